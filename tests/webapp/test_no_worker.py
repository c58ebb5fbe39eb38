"""A queued run whose queue no worker consumes says so, on its page and in the run list.
Celery's real control API is asked (`inspect().active_queues()`) over the test Redis."""
import re

import pytest
from django.conf import settings

from tests.factories import make_prompt_set
from webapp.runs.health import queues_with_consumers, worker_command
from webapp.runs.models import Run


def queued_run(user, queue, state=Run.QUEUED):
    return Run.objects.create(name="waiting", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2,
                              created_by=user, queue=queue, state=state)


@pytest.mark.django_db
def test_a_run_queued_where_no_worker_listens_says_so_on_its_page_and_in_the_list(signed_in, user):
    queue = settings.QUEUE_PREFIX + "made-up-queue-for-tests"
    assert queue not in (queues_with_consumers(refresh=True) or set())
    run = queued_run(user, queue)
    page = signed_in.get(f"/runs/{run.pk}/").content.decode()
    notice = re.search(r'<p id="no-worker".*?</p>', page, re.S)
    assert notice, "no notice on the run page"
    assert queue in notice.group(0) and f"celery -A workers.celery worker -Q {queue}" in notice.group(0)
    listed = signed_in.get("/").content.decode()
    row = re.search(rf'<tr data-run-id="{run.pk}".*?</tr>', listed, re.S).group(0)
    assert f"no worker for {queue}" in row and worker_command(queue) in row


@pytest.mark.django_db
def test_a_non_default_model_launched_from_the_form_waits_for_a_gpu_worker_and_says_so(signed_in, user):
    from tests.webapp.test_run_form import alert_fields
    from webapp.runs.presets import preset_values

    prompt_set = make_prompt_set(user)
    data = {"name": "big", "prompt_set": prompt_set.pk, "team": prompt_set.team_id, "method": "ttrl",
            "model": "Qwen/Qwen3-4B-Base", "max_steps": "2", "seed": "0", "gpus": "", **alert_fields()}
    data.update({f"hp-ttrl-{k}": str(v) for k, v in preset_values("ttrl", "paper")["hyperparameters"].items()})
    response = signed_in.post("/runs/new/", data)
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.get()
    assert run.queue == settings.QUEUE_PREFIX + "gpu"
    queues_with_consumers(refresh=True)
    page = signed_in.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="no-worker"' in page and f"-Q {run.queue}" in page


@pytest.mark.django_db
def test_a_run_that_is_not_queued_shows_no_notice(signed_in, user):
    run = queued_run(user, settings.QUEUE_PREFIX + "made-up-queue-for-tests", state=Run.RUNNING)
    queues_with_consumers(refresh=True)
    assert 'id="no-worker"' not in signed_in.get(f"/runs/{run.pk}/").content.decode()
    assert "no worker for" not in signed_in.get("/").content.decode()


@pytest.mark.e2e
def test_a_run_queued_where_a_worker_listens_shows_no_notice(live_stack, transactional_db, client, django_user_model):
    """The live stack's worker consumes PREFIX + "cpu" (the run is created without a task, so it stays queued)."""
    from tests.factories import team_of
    from tests.waiting import wait_until

    user = django_user_model.objects.create_user(username="wendy", password="pw-for-tests-1")
    team_of(user)
    client.force_login(user)
    queue = settings.QUEUE_PREFIX + "cpu"
    wait_until(lambda: queue in (queues_with_consumers(refresh=True) or set()), 30, every=0.5,
               what=f"a worker consuming {queue}", last=queues_with_consumers)
    assert queue in queues_with_consumers()
    run = queued_run(user, queue)
    assert 'id="no-worker"' not in client.get(f"/runs/{run.pk}/").content.decode()
    assert "no worker for" not in client.get("/").content.decode()
