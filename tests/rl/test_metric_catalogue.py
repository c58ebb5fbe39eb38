"""rl/metric_catalogue.py is the one list of metric names: the trainer, ingestion, the run list and the pages read
it. A second list drifted before (the run list showed three figures while the live message carried five)."""
import ast
from pathlib import Path

from rl.metric_catalogue import BY_NAME, GROUP_PREFIXES, GROUPS, RECORDS, names
from rl.trainer_metrics import TRAINER_METRICS
from tests.source_scan import findings

DESIGN_SECTION_5 = ("entropy", "response_length/mean", "reward/mean", "reward/std", "majority_ratio", "unique_answers",
                    "similarity/mean", "kl", "clip_ratio/low", "clip_ratio/high", "loss", "grad_norm", "learning_rate",
                    "time/step", "time/generation", "time/reward", "label_accuracy", "maj@16", "pass@1", "pass@16")
# Modules whose literals name several metrics for a concept of their own, not as a list of what exists: what each
# alert rule reads and the signals that confirm a fall of entropy, the values the trainer computes for a group, and
# other trainers' names mapped onto ours.
OWN_CONCEPT = {"webapp/alerts/rule_specs.py", "webapp/alerts/rules.py", "webapp/alerts/engine.py", "rl/trainer.py",
               "rl/trainer_metrics.py", "rl/metric_catalogue.py"}


def test_every_design_name_has_one_record_in_a_known_group():
    assert set(DESIGN_SECTION_5) <= set(BY_NAME)
    assert len(BY_NAME) == len(RECORDS)
    assert {r.group for r in RECORDS} <= set(GROUPS) and set(GROUP_PREFIXES) <= set(GROUPS)


def test_the_run_list_columns_have_titles_and_the_trainer_keys_are_distinct():
    assert names(run_list=True) == ("entropy", "response_length/mean", "majority_ratio")
    assert all(BY_NAME[n].title for n in names(run_list=True))
    keys = [r.trainer for r in RECORDS if r.trainer]
    assert len(keys) == len(set(keys))


def test_other_trainers_names_map_onto_a_record_or_a_group_prefix():
    for trainer, table in TRAINER_METRICS.items():
        for ours in table.values():
            assert ours in BY_NAME or any(ours.startswith(p) for ps in GROUP_PREFIXES.values() for p in ps), (trainer, ours)


def literals_listing_metrics(path: Path) -> list[tuple[int, list[str]]]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            items = node.elts
        elif isinstance(node, ast.Dict):
            items = [k for k in node.keys if k is not None]
        else:
            continue
        listed = [i.value for i in items if isinstance(i, ast.Constant) and i.value in BY_NAME]
        if len(listed) >= 3:
            found.append((node.lineno, listed))
    return found


def test_no_other_module_keeps_a_list_of_metric_names():
    assert findings(literals_listing_metrics, skip=OWN_CONCEPT) == {}


def test_the_scan_finds_a_list_where_there_is_one(tmp_path):
    module = tmp_path / "columns.py"
    module.write_text('COLUMNS = ("entropy", "response_length/mean", "majority_ratio")\n')
    assert literals_listing_metrics(module) == [(1, ["entropy", "response_length/mean", "majority_ratio"])]
