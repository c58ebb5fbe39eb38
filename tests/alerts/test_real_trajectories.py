"""The alert rules judged on real runs, not crafted streams: the per-step metrics the CPU experiments of
docs/experiments.md recorded (docs/experiments/figure1.csv, mechanism.csv, degeneration.csv), ingested step by
step as a trainer's event log would be, through ingestion and the alert engine. The steps asserted here are the ones
docs/teams-and-alerts.md records ("The rules on real runs")."""
import csv
from pathlib import Path

import pytest

from tests.factories import make_prompt_set, make_team
from webapp.alerts.models import Alert
from webapp.runs.ingestion import ingest_events
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

DATA = Path(__file__).resolve().parents[2] / "docs" / "experiments"
TRAIN_METRICS = ("entropy", "response_length/mean", "pass@1", "pass@16")  # figure1.csv: the training batch's
MECHANISM_TRAIN = ("entropy", "response_length/mean")  # mechanism.csv: pass@k there is the periodic evaluation's
MECHANISM_EVAL = ("pass@1", "pass@16", "maj@16")
DEGENERATION = ("entropy", "response_length/mean", "unique_answers", "majority_ratio", "invalid_ratio",
                "truncated_ratio")  # the last two derived from the run's rollouts as ingestion derives them
MAX_COMPLETION_LENGTH = 64  # every experiment's SIZES


@pytest.fixture(autouse=True)
def no_queue(monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *args, **kwargs: None)


@pytest.fixture
def new_run(django_user_model):
    team = make_team("lab", ada="admin")
    user = django_user_model.objects.get(username="ada")
    prompt_set = make_prompt_set(user, team=team)

    def make(name):
        return Run.objects.create(name=name, method="ttrl", prompt_set=prompt_set, max_steps=300, created_by=user,
                                  hyperparameters={"max_completion_length": MAX_COMPLETION_LENGTH})

    return make


def rows(file: str, **where) -> list[dict]:
    with open(DATA / file, newline="") as f:
        return [r for r in csv.DictReader(f) if all(r[k] == v for k, v in where.items())]


def events_of(recorded: list[dict], train: tuple, evaluated: tuple = ()) -> list[dict]:
    """The recorded steps as a trainer's event log: a `metrics` event per trained step, an `eval` event per
    evaluation (empty cells are steps where the value was not logged)."""
    events = []
    for r in recorded:
        step = int(r["step"])
        for kind, names in (("metrics", train), ("eval", evaluated)):
            values = {n: float(r[n]) for n in names if r[n] != ""}
            if values:
                events.append({"seq": len(events), "time": 1_700_000_000.0 + step, "type": kind, "step": step,
                               "values": values})
    return events


def replay(run, events, django_capture_on_commit_callbacks, batch=1) -> list[Alert]:
    """Ingest the events `batch` at a time, as the trainer's log is tailed (the engine judges every step of a
    batch in order, so the alerts are the same), and return the run's alerts in the order they opened."""
    with django_capture_on_commit_callbacks(execute=True):
        for i in range(0, len(events), batch):
            ingest_events(run, events[i:i + batch])
    return list(Alert.objects.filter(run=run).order_by("created_at", "id"))


def opened(alerts: list[Alert], rule: str) -> list[int]:
    return [a.step for a in alerts if a.rule == rule]


def test_the_ttrl_run_of_the_cpu_experiment_raises_entropy_collapse_and_it_stays_open(
        new_run, django_capture_on_commit_callbacks):
    # docs/experiments.md, Figure 1 miniature: TTRL's entropy falls by two thirds (0.095 -> 0.034) over 40 steps
    run = new_run("ttrl")
    alerts = replay(run, events_of(rows("figure1.csv", method="ttrl"), TRAIN_METRICS),
                    django_capture_on_commit_callbacks)
    entropy = [a for a in alerts if a.rule == "entropy_collapse"]
    # step-to-step noise (4 prompts a step) lifts the smoothed entropy back over half its start at steps 14 and
    # 19, for less than QUIET_STEPS_TO_RESOLVE steps each time: one alert, from step 13 to the end (it opened,
    # resolved and reopened three times, each opening emailed, before alerts waited for quiet steps to resolve)
    assert [a.step for a in entropy] == [13]
    assert [a.state for a in entropy] == ["open"]
    last = entropy[-1]
    assert last.last_step == 40 and last.severity == "warning"
    assert last.values["entropy_start"] == pytest.approx(0.0804, abs=1e-4)
    assert 0.2 < last.values["share"] < 0.5
    assert last.message.startswith("entropy fell to ") and "converging" not in last.message
    # its training pass@16 falls while pass@1 rises (Figure 1's signature), read from 4 prompts a step
    assert opened(alerts, "pass_at_k_divergence")[0] == 6
    assert {a.rule for a in alerts} == {"entropy_collapse", "pass_at_k_divergence"}


def test_the_evol_rl_run_of_the_cpu_experiment_collapses_too_and_raises_entropy_collapse(
        new_run, django_capture_on_commit_callbacks):
    # docs/experiments.md: "by step 40 it has collapsed as far as TTRL"
    run = new_run("evol_rl")
    alerts = replay(run, events_of(rows("figure1.csv", method="evol_rl"), TRAIN_METRICS),
                    django_capture_on_commit_callbacks)
    entropy = [a for a in alerts if a.rule == "entropy_collapse"]
    assert [a.step for a in entropy] == [17]
    assert entropy[-1].state == "open" and entropy[-1].last_step == 40


@pytest.mark.parametrize("arm", ["TTRL", "EVOL-RL", "EVOL-RL −novelty"])
def test_runs_whose_entropy_holds_raise_no_entropy_collapse(arm, new_run, django_capture_on_commit_callbacks):
    # docs/experiments.md, mechanism experiment: policy entropy falls by about 3% in every arm (seed 0, 300 steps;
    # its smoothed entropy never goes below 80% of the start)
    run = new_run(arm)
    recorded = rows("mechanism.csv", arm=arm, seed="0")
    assert len(recorded) == 301
    alerts = replay(run, events_of(recorded, MECHANISM_TRAIN, MECHANISM_EVAL), django_capture_on_commit_callbacks,
                    batch=20)
    assert run.last_step == 300
    assert alerts == []


def test_a_real_run_whose_text_degenerates_raises_degeneration_and_no_alert_says_converging(
        new_run, django_capture_on_commit_callbacks):
    # scripts/experiments/degeneration.py: TTRL at learning rate 1e-2; answers invalid from step 2, noise, then
    # one token repeated to the 64-token limit (entropy 0.23 -> 1.0 -> 0.005)
    run = new_run("degenerating")
    alerts = replay(run, events_of(rows("degeneration.csv"), DEGENERATION), django_capture_on_commit_callbacks)
    first = {}
    for a in alerts:
        first.setdefault(a.rule, a)
    assert {rule: a.step for rule, a in first.items()} == {
        "invalid_answers": 3, "length_collapse": 4, "degeneration": 5, "entropy_collapse": 6}
    degeneration = first["degeneration"]
    assert degeneration.state == "open" and degeneration.severity == "critical" and degeneration.last_step == 12
    assert degeneration.message == ("entropy fell from 0.657 to 0.00467 over 11 steps; 100% of answers invalid, "
                                    "from 62% at the start (threshold 90%); mean length 64, at the 64-token limit; "
                                    "100% truncated at the limit")
    assert first["entropy_collapse"].message.endswith("; 100% of answers invalid")
    assert all("converging" not in a.message for a in alerts)
