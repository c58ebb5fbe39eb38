"""Ingestion of events reported over HTTP (a run trained elsewhere): numbered under the run's lock, a step
reported late judged where the run is, and a group's similarity matrix arriving after the group."""
import pytest

from tests.alerts.streams import collapsing, metric_events
from tests.factories import RunStream, event_log, make_prompt_set
from webapp.alerts.models import Alert
from webapp.runs.ingestion import append_events, ingest_events
from webapp.runs.models import Group, Run, RunEvent

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def run(user):
    return Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=30, created_by=user)


def test_appended_events_are_numbered_after_the_runs_last_seq(run):
    log = event_log(steps=1)
    ingest_events(run, log)
    assert append_events(run, [{"time": 2e9, "type": "metrics", "step": 2, "values": {"entropy": 0.5}},
                               {"time": 2e9, "type": "metrics", "step": 3, "values": {"entropy": 0.4}}]) == 2
    seqs = list(RunEvent.objects.filter(run=run).values_list("seq", flat=True))
    assert seqs == list(range(len(log) + 2))
    assert Run.objects.get(pk=run.pk).last_step == 3


def test_a_step_reported_late_is_judged_at_the_runs_last_step(run):
    # rollouts of a run trained elsewhere are grouped after the trainer reported the next steps: their
    # majority ratio for step 2 must not be judged at step 2, where entropy had not collapsed yet
    steady = {"entropy": [1.2] * 10, "majority_ratio": [0.5] * 10, "response_length/mean": [300.0] * 10}
    falling = collapsing()
    ingest_events(run, metric_events({name: steady[name] + falling[name] for name in steady}))
    alert = Alert.objects.get(run=run, rule="entropy_collapse")
    assert alert.state == "open" and alert.last_step == 22
    append_events(run, [{"time": 2e9, "type": "metrics", "step": 8, "values": {"unique_answers": 3.0}}])
    alert.refresh_from_db()
    assert alert.state == "open" and alert.last_step == 22


def test_a_similarity_event_gives_its_group_a_matrix_and_the_page_a_heatmap(run):
    log = event_log(steps=1, prompts=("p1",), group_size=2)
    ingest_events(run, log)
    group = Group.objects.get(run=run, prompt_id="p1")
    assert group.similarity is None
    stream = RunStream(run.pk)
    append_events(run, [{"time": 2e9, "type": "similarity", "step": 1, "prompt_id": "p1", "group": group.seq,
                         "majority_answer": "5", "similarity": [[1.0, 0.25], [0.25, 1.0]]}])
    group.refresh_from_db()
    assert group.similarity == [[1.0, 0.25], [0.25, 1.0]] and group.similarity_mean == 0.25
    (message,) = stream.receive()
    assert message == {"type": "group", "step": 1, "prompt_id": "p1", "majority_answer": "5",
                       "similarity": [[1.0, 0.25], [0.25, 1.0]], "rollouts": []}
