"""TRL's own GRPOTrainer (the default policy, 2 steps, CPU), unmodified, logging with `report_to=["wandb"]` (offline)
and `report_to=["tensorboard"]`; `evolab sync wandb|tensorboard --once` brings each run in (issue 39): TRL's names
as Transformers' callbacks write them (`train/...`, W&B's step `train/global_step`) charted under Evolab's names,
and W&B's completions table (`log_completions=True`) as the run's rollouts with each reward function's reward."""
import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model

from tests.e2e.helpers import Api
from tests.e2e.test_trl_reporting import TRAIN
from tests.factories import make_team
from tests.waiting import wait_until
from webapp.accounts.models import ApiToken

pytestmark = pytest.mark.e2e



def train(logger, tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "WANDB_MODE": "offline", "WANDB_DIR": str(tmp_path),
           "WANDB_SILENT": "true", "TENSORBOARD_LOGGING_DIR": str(tmp_path / "tb" / "trl-tensorboard")}
    done = subprocess.run([sys.executable, TRAIN, str(tmp_path / logger), "--name", f"trl-{logger}", "--report-to",
                           logger, "--log-completions", "--reward-weights", "1.0", "0.5"], env=env,
                          capture_output=True, text=True, timeout=400)
    assert done.returncode == 0 and "TRAINED" in done.stdout, done.stderr[-4000:]


def sync(live_stack, token, logger, folder, *args):
    env = {**os.environ, "EVOLAB_URL": live_stack.url, "EVOLAB_TOKEN": token}
    done = subprocess.run([sys.executable, "-m", "evolab_client.cli", "sync", logger, str(folder), "--once", *args],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.fixture
def reporter(live_stack, transactional_db):
    make_team("trl-team", ada="member")
    token = ApiToken.issue(get_user_model().objects.get(username="ada"))
    return token, Api(live_stack.url, token)


def named(api, name):
    """The run, once the worker that charts its points has told its trainer by TRL's names."""
    return wait_until(lambda: next((r for r in api.get("/runs")["runs"] if r["name"] == name and r["trainer"] == "trl"),
                                   None), timeout=120, every=0.5, what=f"{name} told as TRL's")


def charted_under_evolabs_names(api, run_id):
    def both_steps():
        found = api.get(f"/runs/{run_id}/metrics")["metrics"]
        return found if found.get("entropy", {}).get("steps") == [1, 2] else None

    found = wait_until(both_steps, what="both steps charted", timeout=120, every=0.5)
    for reported, ours in (("train/completions/mean_length", "response_length/mean"), ("train/reward", "reward/mean"),
                           ("train/entropy", "entropy"), ("train/frac_reward_zero_std", "zero_variance_groups")):
        assert found[reported]["steps"] == [1, 2] and found[ours]["values"] == found[reported]["values"], reported


def test_a_trl_run_logged_to_wandb_comes_in_with_its_completions_as_rollouts(live_stack, reporter, tmp_path):
    token, api = reporter
    train("wandb", tmp_path)
    (folder,) = (tmp_path / "wandb").glob("offline-run-*")
    said = sync(live_stack, token, "wandb", folder)
    run = named(api, "trl-wandb")
    assert run["source"] == "external" and run["state"] == "succeeded"
    assert "rollouts" in said and "table" not in said  # every table was TRL's completions
    charted_under_evolabs_names(api, run["id"])

    def every_rollout():
        found = api.get(f"/runs/{run['id']}/rollouts/search", params={"limit": 100})["results"]
        return found if len(found) == 2 * 4 * 2 else None

    found = wait_until(every_rollout, what="2 steps × 2 prompts × 4 completions", timeout=120, every=0.5)
    for rollout in found:  # each reward function's reward, and GRPOTrainer's total: reward_weights [1.0, 0.5]
        assert set(rollout["extra"]) == {"boxed_answer", "brevity"} and rollout["advantage"] is not None
        assert rollout["reward"] == pytest.approx(rollout["extra"]["boxed_answer"] + 0.5 * rollout["extra"]["brevity"])
    groups = api.get(f"/runs/{run['id']}/rollouts", params={"step": 1})["groups"]
    assert len(groups) == 2 and all(len(g["rollouts"]) == 4 for g in groups)


def test_a_trl_run_logged_to_tensorboard_comes_in_charted(live_stack, reporter, tmp_path):
    token, api = reporter
    train("tensorboard", tmp_path)
    sync(live_stack, token, "tensorboard", tmp_path / "tb" / "trl-tensorboard", "--experiment", "trl-tests")
    run = named(api, "trl-tensorboard")
    assert run["state"] == "succeeded"
    charted_under_evolabs_names(api, run["id"])
