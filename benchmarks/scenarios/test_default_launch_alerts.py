"""The default launch raises nothing (issue 36): `POST /api/runs {"name", "method": "ttrl", "prompt_set"}` on the
demo's arithmetic set starts the Small CPU preset (two prompts a step, learning rate 5e-7) on a real worker. Its
entropy swings with which two prompts each step samples while the policy barely moves; the rules used to email
entropy_collapse and zero_variance_groups to every member at step 13 of it. Trained for real, end to end."""
from pathlib import Path

import pytest

from webapp.alerts.models import Alert
from webapp.metrics import series

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]

SAMPLE = Path(__file__).resolve().parents[2] / "rl" / "assets" / "arithmetic_sample.json"


def test_the_default_launch_trains_its_twenty_steps_and_raises_no_alert(api, live_stack, live_user):
    with open(SAMPLE, "rb") as f:
        prompt_set = api.post("/prompt-sets", files={"file": ("arithmetic.json", f)}, data={"name": "arithmetic"})
    run = api.post("/runs", json={"name": "n", "method": "ttrl", "prompt_set": prompt_set["id"]})
    assert run["max_steps"] == 20 and run["hyperparameters"]["learning_rate"] == 5e-7
    final = api.wait_for(run["id"], lambda r: r["state"] not in ("queued", "running"), timeout=600)
    assert final["state"] == "succeeded" and final["last_step"] == 20, final
    found = series.read([run["id"]], ["entropy", "kl"])[run["id"]]
    entropy, kl = found["entropy"].lists()["values"], found["kl"].lists()["values"]
    assert max(entropy) > 1.5 * min(entropy)  # it swings, with the prompts each step samples ...
    assert max(kl) < 1e-3  # ... while the policy barely moves
    assert list(Alert.objects.filter(run_id=run["id"]).values_list("rule", "step")) == []
