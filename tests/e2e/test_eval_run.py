"""A run with an eval prompt set, end to end: the API launches it, the real worker's
supervisor writes the eval set for the trainer, and its evaluations come back as
`eval/...` metrics (pass@1, pass@k, maj@k) from GET /api/runs/{id}/metrics."""
import pytest

from tests.factories import make_prompt_set

pytestmark = [pytest.mark.e2e, pytest.mark.trainer]

TINY_WITH_EVAL = {"n_votes": 4, "n_train": 2, "prompts_per_step": 2, "max_completion_length": 32,
                  "eval_every": 1, "eval_samples": 2}


def test_a_small_run_with_an_eval_set_records_eval_pass_at_k_metrics(api, live_user):
    train = make_prompt_set(live_user, name="arith-train")
    held_out = make_prompt_set(live_user, name="arith-eval", rows=[("e1", "What is 4 + 4?", "8"),
                                                                   ("e2", "What is 9 - 6?", "3")])
    run = api.post("/runs", json={"name": "with eval", "method": "ttrl", "prompt_set": train.pk, "max_steps": 2,
                                   "eval_prompt_set": held_out.pk, "tags": ["e2e", "eval"],
                                   "hyperparameters": TINY_WITH_EVAL})
    assert run["eval_prompt_set"] == held_out.pk and run["tags"] == ["e2e", "eval"]
    final = api.wait_for(run["id"], lambda r: r["state"] in ("succeeded", "failed", "cancelled"))
    assert final["state"] == "succeeded", final

    metrics = api.get(f"/runs/{run['id']}/metrics")["metrics"]
    eval_names = {name for name in metrics if name.startswith("eval/")}
    assert {"eval/pass@1", "eval/pass@2", "eval/maj@2"} <= eval_names, sorted(metrics)
    for name in ("eval/pass@1", "eval/pass@2"):
        series = metrics[name]
        assert 2 in series["steps"], (name, series)
        assert all(v is not None and 0.0 <= v <= 1.0 for v in series["values"]), (name, series)
    # The eval set's labels never reach the training prompts: the metrics of the training
    # batch are named without the prefix and come from the train set's own held-out labels.
    assert "label_accuracy" in metrics
