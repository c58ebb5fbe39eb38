"""The client names a run as `RUN`, `EXPERIMENT/RUN` or `TEAM/EXPERIMENT/RUN` (docs/external-runs.md, "The
client"), against the live stack. For a user of two teams whose teams both have a run `qwen-grpo`, a bare name
picked whichever started last, the other team's too, and `evolab sync verl --run` sent rollouts there: a name
that matches in more than one team is now refused, listing the teams and saying how to write it."""
import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model

from evolab_client import Evolab
from evolab_client.client import AmbiguousRun
from tests.factories import make_team
from webapp.accounts.models import ApiToken

pytestmark = pytest.mark.e2e


@pytest.fixture
def two_teams(live_stack, transactional_db):
    """carol, a member of `lab` and `other-lab`, each with an experiment gsm8k-ttrl holding a run qwen-grpo;
    `other-lab` also has a run `solo` that only it has; dave is in `lab` only."""
    make_team("lab", carol="member", dave="member")
    make_team("other-lab", carol="member")
    users = get_user_model().objects
    carol = Evolab(live_stack.url, ApiToken.issue(users.get(username="carol")), retry_for=5)
    dave = Evolab(live_stack.url, ApiToken.issue(users.get(username="dave")), retry_for=5)
    runs = {team: carol.create_run("qwen-grpo", experiment=f"{team}/gsm8k-ttrl") for team in ("lab", "other-lab")}
    runs["solo"] = carol.create_run("solo", experiment="other-lab/gsm8k-ttrl")
    return carol, dave, runs


def test_a_name_in_two_of_the_users_teams_is_refused_naming_them(two_teams):
    carol, _, _ = two_teams
    for ref in ("qwen-grpo", "gsm8k-ttrl/qwen-grpo"):
        with pytest.raises(AmbiguousRun) as refused:
            carol.find_run(ref)
        message = str(refused.value)
        assert "'lab'" in message and "'other-lab'" in message and "TEAM/EXPERIMENT/RUN" in message, message
        assert "lab/gsm8k-ttrl/qwen-grpo" in message


def test_team_experiment_run_names_one_teams_run(two_teams):
    carol, _, runs = two_teams
    assert carol.find_run("lab/gsm8k-ttrl/qwen-grpo") == runs["lab"]
    assert carol.find_run("other-lab/gsm8k-ttrl/qwen-grpo") == runs["other-lab"]
    assert carol.find_run("nowhere/gsm8k-ttrl/qwen-grpo") is None


def test_a_name_in_one_team_still_needs_no_team(two_teams):
    carol, dave, runs = two_teams
    assert carol.find_run("solo") == runs["solo"] and carol.find_run("gsm8k-ttrl/solo") == runs["solo"]
    assert carol.find_run("nothing") is None
    # a user of one team never needs to name it (and may)
    for ref in ("qwen-grpo", "gsm8k-ttrl/qwen-grpo", "lab/gsm8k-ttrl/qwen-grpo"):
        assert dave.find_run(ref) == runs["lab"], ref
    assert dave.find_run("solo") is None


def test_the_sync_command_says_so_instead_of_waiting_for_a_run(two_teams, live_stack, tmp_path):
    env = {**os.environ, "EVOLAB_URL": live_stack.url, "EVOLAB_TOKEN": two_teams[0].token}
    done = subprocess.run([sys.executable, "-m", "evolab_client.cli", "sync", "verl", str(tmp_path), "--run", "qwen-grpo"],
                          capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 2 and "TEAM/EXPERIMENT/RUN" in done.stderr, done.stderr + done.stdout
