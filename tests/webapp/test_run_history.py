"""A run's history (issue 24): each change of its state is one RunTransition row with its cause, written by
webapp/runs/lifecycle.py as it announces the change; GET /api/runs/{id}/transitions and the run page show it."""
from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from tests.factories import make_prompt_set, make_team
from webapp.runs import lifecycle
from webapp.runs.actions import cancel_run, launch_run, resume_run
from webapp.runs.launch_request import LaunchRequest
from webapp.runs.models import Run, RunLease, RunTransition

pytestmark = pytest.mark.django_db


def history(run) -> list[tuple]:
    """(cause, state, by, worker, message) oldest first."""
    return [(t.cause, t.state, t.by.username if t.by else None, t.worker, t.message)
            for t in RunTransition.objects.filter(run=run).order_by("id")]


def launched(user) -> Run:
    return launch_run(LaunchRequest(name="r", method="ttrl", prompt_set=make_prompt_set(user).pk, max_steps=3), user=user)


def test_a_run_launched_claimed_and_finished_has_three_rows_naming_who_and_which_worker(user):
    run = launched(user)
    assert lifecycle.claim(run.pk, owner="host-a:1:abc").pk == run.pk
    lifecycle.finish(run, Run.FAILED, "the trainer exited with code 1: CUDA out of memory", 1, "", owner="host-a:1:abc")
    assert history(run) == [
        ("launched", "queued", "ada", "", ""),
        ("claimed", "running", None, "host-a:1:abc", ""),
        ("finished", "failed", None, "host-a:1:abc", "the trainer exited with code 1: CUDA out of memory"),
    ]


def test_a_cancel_names_who_asked_and_a_queued_run_ends_at_once(user):
    run = launched(user)
    cancel_run(run, user)
    assert history(run)[1:] == [("cancel_requested", "queued", "ada", "", ""),
                                ("cancelled_before_start", "cancelled", None, "", "cancelled before it started")]
    cancel_run(run, user)  # an ended run: nothing more to record
    assert len(history(run)) == 3


def test_a_running_runs_cancel_request_is_recorded_then_its_end(user):
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1")
    cancel_run(run, user)
    lifecycle.finish(run, Run.CANCELLED, "cancelled", -15, "", owner="w1")
    assert [row[:3] for row in history(run)[2:]] == [("cancel_requested", "running", "ada"),
                                                    ("finished", "cancelled", None)]


def test_a_resume_names_who_asked(user):
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1")
    lifecycle.finish(run, Run.FAILED, "boom", 1, "", owner="w1")
    resume_run(run, user)
    assert history(run)[-1] == ("resume_requested", "queued", "ada", "",
                                "no checkpoint is recorded: resuming from the last one on the workers' disk, or from step 0")


def test_each_row_keeps_the_state_before_the_change_too(user, settings):
    settings.RUN_AUTO_RESUMES = 1
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1")
    RunLease.objects.filter(run=run).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    lifecycle.reap_run(run.pk)
    changes = [(t.previous_state, t.state, t.cause) for t in RunTransition.objects.filter(run=run).order_by("id")]
    assert changes == [("", "queued", "launched"), ("queued", "running", "claimed"),
                       ("running", "queued", "lease_expired")]
    assert RunTransition.objects.filter(run=run).first().to_json()["previous_state"] == "running"


def test_a_request_that_leaves_the_state_as_it_was_shows_one_state(client, user):
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1")
    cancel_run(run, user)
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert '<td class="state-change"><span class="state state-running">running</span></td>' in page


def test_the_run_page_reads_running_to_queued_for_a_lease_that_expired(client, user, settings):
    settings.RUN_AUTO_RESUMES = 1
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1")
    RunLease.objects.filter(run=run).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    lifecycle.reap_run(run.pk)
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert ('<td class="state-change"><span class="state state-running">running</span> → '
            '<span class="state state-queued">queued</span></td>') in page


def test_the_lease_sweeper_records_the_silent_worker_and_what_it_did(user, settings):
    settings.RUN_AUTO_RESUMES = 1
    run = launched(user)
    lifecycle.claim(run.pk, owner="host-b:7:def")
    RunLease.objects.filter(run=run).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert lifecycle.reap_run(run.pk) == "resumed"
    cause, state, by, worker, message = history(run)[-1]
    assert (cause, state, by, worker) == ("lease_expired", "queued", None, "host-b:7:def")
    assert message.startswith("its worker stopped answering") and "automatic resume 1 of 1" in message
    lifecycle.claim(run.pk, owner="host-c:8:ghi")
    RunLease.objects.filter(run=run).update(heartbeat_at=timezone.now() - timedelta(hours=1))
    assert lifecycle.reap_run(run.pk) == "failed"
    assert history(run)[-1][:4] == ("lease_expired", "failed", None, "host-c:8:ghi")


def test_a_worker_shutting_down_hands_the_run_back(user):
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1")
    assert lifecycle.hand_back(run, "w1", "the worker is shutting down: resuming on the next one")
    assert history(run)[-1] == ("handed_back", "queued", None, "w1",
                                "the worker is shutting down: resuming on the next one")


def test_an_engines_job_starting_is_recorded_but_a_new_reason_alone_is_not(user):
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1", state=Run.PENDING)
    lifecycle.engine_state(run, "w1", Run.PENDING, "Priority")
    lifecycle.engine_state(run, "w1", Run.PENDING, "Resources")
    lifecycle.engine_state(run, "w1", Run.RUNNING, "")
    assert [row[:2] for row in history(run)] == [("launched", "queued"), ("claimed", "pending"), ("engine", "running")]


def test_the_status_message_carries_the_new_row(user, monkeypatch):
    pushed = []
    monkeypatch.setattr(lifecycle, "push_on_commit", lambda **kw: pushed.append(kw))
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1")
    status = next(m for kw in pushed if kw.get("run_id") == run.pk for m in kw["messages"] if m["type"] == "status")
    row = RunTransition.objects.filter(run=run).order_by("-id").first()
    assert status["transition"] == row.to_json()
    assert status["transition"]["cause_title"] == "taken by a worker" and status["transition"]["worker"] == "w1"


def test_the_status_message_carries_the_runs_row_so_the_page_needs_no_second_read(user, monkeypatch):
    pushed = []
    monkeypatch.setattr(lifecycle, "push_on_commit", lambda **kw: pushed.append(kw))
    run = launched(user)
    lifecycle.claim(run.pk, owner="w1")
    lifecycle.finish(Run.objects.get(pk=run.pk), Run.FAILED, "the trainer exited with code 1", 1, "", owner="w1")
    status = [m for kw in pushed if kw.get("run_id") == run.pk for m in kw["messages"] if m["type"] == "status"][-1]
    run.refresh_from_db()
    assert {k: status[k] for k in ("state", "message", "started_at", "finished_at", "last_step", "total_steps")} == {
        "state": "failed", "message": "the trainer exited with code 1", "started_at": run.started_at.isoformat(),
        "finished_at": run.finished_at.isoformat(), "last_step": None, "total_steps": run.total_steps}


def test_the_api_pages_through_the_history_newest_first(api_client, user):
    run = launched(user)
    for n in range(4):
        lifecycle.claim(run.pk, owner=f"w{n}")
        lifecycle.hand_back(run, f"w{n}", "handed back")
    first = api_client.get(f"/api/runs/{run.pk}/transitions", {"limit": 5}).json()
    assert [t["cause"] for t in first["results"]] == ["handed_back", "claimed"] * 2 + ["handed_back"]
    rest = api_client.get(f"/api/runs/{run.pk}/transitions", {"limit": 5, "before": first["next_before"]}).json()
    assert [t["cause"] for t in rest["results"]] == ["claimed", "handed_back", "claimed", "launched"]
    assert rest["next_before"] is None and rest["results"][-1]["by"] == "ada"


@pytest.mark.parametrize("params, field", [({"limit": "0"}, "limit"), ({"limit": "1001"}, "limit"),
                                           ({"before": "x"}, "before")])
def test_the_api_refuses_a_bad_page_naming_the_parameter(api_client, user, params, field):
    run = launched(user)
    response = api_client.get(f"/api/runs/{run.pk}/transitions", params)
    assert response.status_code == 400 and response.json()["field"] == field


def test_another_teams_run_history_is_a_404(api_client, user):
    make_team("elsewhere", grace="admin")
    grace = get_user_model().objects.get(username="grace")
    run = launch_run(LaunchRequest(name="theirs", method="ttrl", prompt_set=make_prompt_set(grace, name="g").pk,
                                   max_steps=3), user=grace)
    assert api_client.get(f"/api/runs/{run.pk}/transitions").status_code == 404


def test_the_run_page_lists_the_history_escaped(client, user):
    run = launched(user)
    lifecycle.claim(run.pk, owner="<script>w</script>")
    lifecycle.finish(run, Run.FAILED, "<img src=x onerror=alert(1)>", 1, "")
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    rows = page[page.index('id="history-rows"'):page.index("</tbody>", page.index('id="history-rows"'))]
    assert rows.index("its trainer ended") < rows.index("taken by a worker") < rows.index("launched")
    assert "&lt;img src=x onerror=alert(1)&gt;" in rows and "<img" not in rows
    assert "&lt;script&gt;w&lt;/script&gt;" in rows and "<script>" not in rows
    assert ">ada<" in rows
