"""TRL's own GRPOTrainer (the default policy, 2 steps, CPU), unmodified, reporting to the live stack (DESIGN
§4.8): once through Transformers' MLflow callback (report_to="mlflow"), whose metric names Evolab maps onto
its own, and once with EvolabCallback, which sends each step's metrics and every completion with its prompt,
each reward function's reward, their total and its advantage."""
import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model

from tests.e2e.helpers import Api
from tests.factories import make_team
from tests.waiting import wait_until
from webapp.accounts.models import ApiToken

pytestmark = pytest.mark.e2e

TRAIN = "tests/e2e/trl_train.py"


def train(live_stack, token, mode, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "MLFLOW_TRACKING_URI": f"{live_stack.url}/mlflow",
           "MLFLOW_TRACKING_TOKEN": token, "MLFLOW_EXPERIMENT_NAME": "trl-tests", "EVOLAB_URL": live_stack.url,
           "EVOLAB_TOKEN": token}
    options = {"mlflow": ["--report-to", "mlflow"], "callback": ["--callback"],
               # the README's recipe: report_to="mlflow" and the callback, which reports to the run MLflow's made
               "both": ["--report-to", "mlflow", "--callback"]}[mode]
    done = subprocess.run([sys.executable, TRAIN, str(tmp_path / mode), "--name", f"trl-{mode}", *options], env=env,
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0 and "TRAINED" in done.stdout, done.stderr[-4000:]


@pytest.fixture
def reporter(live_stack, transactional_db):
    make_team("trl-team", ada="member")
    token = ApiToken.issue(get_user_model().objects.get(username="ada"))
    return token, Api(live_stack.url, token)


def test_report_to_mlflow_logs_trls_metrics_under_evolabs_names(live_stack, reporter, tmp_path):
    token, api = reporter
    train(live_stack, token, "mlflow", tmp_path)
    run = next(r for r in api.get("/runs")["runs"] if r["name"] == "trl-mlflow")
    assert run["source"] == "external" and run["state"] == "succeeded"  # Transformers' callback ends its run
    metrics = api.get(f"/runs/{run['id']}/metrics")["metrics"]
    for reported, ours in (("completions/mean_length", "response_length/mean"), ("reward", "reward/mean"),
                           ("frac_reward_zero_std", "zero_variance_groups"), ("entropy", "entropy")):
        assert metrics[reported]["steps"] == [1, 2] and metrics[ours]["values"] == metrics[reported]["values"], reported
    assert run["hyperparameters"]["max_completion_length"] == 24 and run["hyperparameters"]["n_votes"] == 4


@pytest.mark.parametrize("mode", ["callback", "both"])
def test_the_evolab_callback_sends_metrics_and_every_completion_with_its_rewards(live_stack, reporter, tmp_path, mode):
    token, api = reporter
    train(live_stack, token, mode, tmp_path)
    runs = [r for r in api.get("/runs")["runs"] if r["name"] == f"trl-{mode}"]
    assert len(runs) == 1  # with report_to="mlflow" the callback reports to the run Transformers' callback made
    run = runs[0]
    assert run["source"] == "external" and run["state"] == "succeeded"
    seen = {"found": []}

    def every_completion():  # 2 steps × 2 prompts × 4 generations
        seen["found"] = api.get(f"/runs/{run['id']}/rollouts/search", params={"limit": 100})["results"]
        return seen["found"] if len(seen["found"]) == 2 * 4 * 2 else None

    # grouped by the worker once the run has ended
    found = wait_until(every_completion, 60, every=0.5, what="the run's 16 completions",
                       last=lambda: len(seen["found"]))
    first = found[0]
    assert set(first["extra"]) == {"boxed_answer", "brevity"} and first["advantage"] is not None
    assert first["reward"] == pytest.approx(first["extra"]["boxed_answer"] + first["extra"]["brevity"])
    assert first["length"] <= 24  # tokens, counted by the trainer's tokenizer
    groups = api.get(f"/runs/{run['id']}/rollouts", params={"step": 1})["groups"]
    assert len(groups) == 2 and all(len(g["rollouts"]) == 4 for g in groups)
    metrics = api.get(f"/runs/{run['id']}/metrics")["metrics"]
    assert metrics["response_length/mean"]["steps"] == [1, 2] and "majority_ratio" in metrics
