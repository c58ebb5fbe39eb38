"""docs/external-runs.md's table of trainers' metric names is the one the code maps (rl/trainer_metrics.py)."""
import re
from pathlib import Path

from rl.trainer_metrics import TRAINER_METRICS

DOC = Path(__file__).resolve().parents[2] / "docs" / "external-runs.md"


def test_the_documented_table_is_the_mapping():
    rows = re.findall(r"^\| (verl|trl|openrlhf) \| `([^`]+)` \| `([^`]+)` \|$", DOC.read_text(), re.MULTILINE)
    documented = {}
    for trainer, reported, ours in rows:
        documented.setdefault(trainer, {})[reported] = ours
    # and the rule the page states under the table: TRL's names are mapped with the `train/` prefix too
    assert "TRL's are mapped with the `train/` prefix too" in " ".join(DOC.read_text().split())
    documented["trl"].update({"train/" + reported: ours for reported, ours in list(documented["trl"].items())})
    assert documented == TRAINER_METRICS
