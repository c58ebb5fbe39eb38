"""Large prompt files go to a worker (webapp/prompts/uploads.py): the request answers at once with
the upload to follow; the worker's part is called here as the task calls it."""
import json
from datetime import timedelta

import pytest
import redis
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from tests.factories import team_of
from webapp.accounts.models import ApiToken
from webapp.prompts import uploads
from webapp.prompts.models import Prompt, PromptSet, PromptUpload

pytestmark = pytest.mark.django_db

INLINE = 2_000  # bytes: files above are queued in these tests


@pytest.fixture(autouse=True)
def small_inline_limit(settings):
    settings.PROMPT_UPLOAD_INLINE_MAX_BYTES = INLINE


def jsonl(n, bad_line=None):
    rows = [{"id": f"q{i}", "prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(1, n + 1)]
    lines = [json.dumps(r) for r in rows]
    if bad_line:
        lines[bad_line - 1] = json.dumps({"id": "oops", "prompt": 42})
    return ("\n".join(lines) + "\n").encode()


def post(client, data, filename="big.jsonl", name="big set"):
    return client.post("/api/prompt-sets", {"name": name, "file": SimpleUploadedFile(filename, data)})


def test_a_small_file_is_still_saved_in_the_request(api_client):
    response = post(api_client, jsonl(3))
    assert response.status_code == 201 and response.json()["row_count"] == 3
    assert not PromptUpload.objects.exists()


def test_a_large_file_is_answered_202_with_the_upload_to_follow_and_nothing_saved_yet(api_client, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks() as sent:
        response = post(api_client, jsonl(200))
    assert response.status_code == 202, response.content
    upload = response.json()["upload"]
    assert response["Location"] == f"/api/prompt-uploads/{upload['id']}"
    assert upload["state"] == "queued" and upload["filename"] == "big.jsonl" and upload["prompt_set"] is None
    assert upload["size"] == len(jsonl(200)) and upload["name"] == "big set"
    assert len(sent) == 1  # the parse task, sent once the row is committed
    assert not PromptSet.objects.exists()


def test_the_worker_saves_the_set_and_the_upload_then_names_it_with_a_preview(api_client):
    upload_id = post(api_client, jsonl(200)).json()["upload"]["id"]
    assert uploads.parse_upload(upload_id) == "done"
    body = api_client.get(f"/api/prompt-uploads/{upload_id}").json()["upload"]
    assert body["state"] == "done" and body["rows_checked"] == 200 and body["row_count"] == 200
    prompt_set = body["prompt_set"]
    assert prompt_set["name"] == "big set" and prompt_set["row_count"] == 200 and prompt_set["has_labels"]
    assert prompt_set["preview"][0]["prompt"] == "What is 1 + 1?"
    assert Prompt.objects.filter(prompt_set_id=prompt_set["id"]).count() == 200
    assert bytes(PromptUpload.objects.get(pk=upload_id).data) == b""  # the file is not kept twice


def test_a_bad_row_fails_the_upload_naming_the_line_and_field_and_saves_nothing(api_client):
    upload_id = post(api_client, jsonl(200, bad_line=150)).json()["upload"]["id"]
    assert uploads.parse_upload(upload_id) == "failed"
    body = api_client.get(f"/api/prompt-uploads/{upload_id}").json()["upload"]
    assert body["state"] == "failed" and body["prompt_set"] is None
    assert body["error"] == "line 150: the prompt must be a string, not a number" and body["field"] == "prompt"
    assert not PromptSet.objects.exists() and not Prompt.objects.exists()


def test_a_second_delivery_of_the_task_saves_nothing_more(api_client):
    upload_id = post(api_client, jsonl(200)).json()["upload"]["id"]
    assert uploads.parse_upload(upload_id) == "done"
    assert uploads.parse_upload(upload_id) == "skipped"
    assert PromptSet.objects.count() == 1


def test_an_upload_whose_worker_stopped_reporting_is_taken_again(api_client, settings):
    upload_id = post(api_client, jsonl(200)).json()["upload"]["id"]
    # a worker claimed it, then died before it reported anything for longer than the stale time
    PromptUpload.objects.filter(pk=upload_id).update(state="parsing", attempts=1)
    assert uploads.parse_upload(upload_id) == "skipped"  # still fresh: its worker may be busy
    PromptUpload.objects.filter(pk=upload_id).update(
        updated_at=timezone.now() - timedelta(seconds=settings.PROMPT_UPLOAD_STALE_SECONDS + 1))
    assert uploads.parse_upload(upload_id) == "done"
    assert PromptUpload.objects.get(pk=upload_id).attempts == 2


def test_a_file_that_stopped_its_worker_three_times_is_refused(api_client, settings):
    upload_id = post(api_client, jsonl(200)).json()["upload"]["id"]
    PromptUpload.objects.filter(pk=upload_id).update(
        state="parsing", attempts=uploads.MAX_ATTEMPTS,
        updated_at=timezone.now() - timedelta(seconds=settings.PROMPT_UPLOAD_STALE_SECONDS + 1))
    assert uploads.parse_upload(upload_id) == "skipped"
    upload = PromptUpload.objects.get(pk=upload_id)
    assert upload.state == "failed" and "stopped its worker 3 times" in upload.error
    assert not PromptSet.objects.exists()


def test_the_periodic_check_sends_again_only_the_uploads_nobody_works_on(api_client, settings):
    stale_at = timezone.now() - timedelta(seconds=settings.PROMPT_UPLOAD_STALE_SECONDS + 1)
    lost = post(api_client, jsonl(200)).json()["upload"]["id"]
    dead = post(api_client, jsonl(201)).json()["upload"]["id"]
    fresh = post(api_client, jsonl(202)).json()["upload"]["id"]
    done = post(api_client, jsonl(203)).json()["upload"]["id"]
    uploads.parse_upload(done)
    PromptUpload.objects.filter(pk=lost).update(updated_at=stale_at)
    PromptUpload.objects.filter(pk=dead).update(state="parsing", updated_at=stale_at)
    PromptUpload.objects.filter(pk=done).update(updated_at=stale_at)
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    broker.delete(uploads.queue())
    assert sorted(uploads.resend_stale()) == sorted([lost, dead])
    sent = [json.loads(m)["headers"]["argsrepr"] for m in broker.lrange(uploads.queue(), 0, -1)]
    assert sorted(sent) == sorted([f"[{lost}]", f"[{dead}]"]) and fresh
    broker.delete(uploads.queue())


def test_a_file_over_the_upload_limit_is_refused_at_once(api_client, settings):
    settings.PROMPT_FILE_MAX_BYTES = 5_000
    response = post(api_client, jsonl(200))
    assert response.status_code == 400
    assert "over the 5 KB limit" in response.json()["error"] and response.json()["field"] == "file"
    assert not PromptUpload.objects.exists()


def test_a_bad_name_is_refused_before_the_file_is_queued(api_client):
    response = post(api_client, jsonl(200), name="x" * 201)
    assert response.status_code == 400 and response.json()["field"] == "name"
    assert not PromptUpload.objects.exists()


def test_another_teams_upload_is_not_found(api_client, django_user_model):
    upload_id = post(api_client, jsonl(200)).json()["upload"]["id"]
    other = django_user_model.objects.create_user(username="eve", password="pw-for-tests-2")
    team_of(other)
    response = api_client.get(f"/api/prompt-uploads/{upload_id}", HTTP_AUTHORIZATION=f"Token {ApiToken.issue(other)}")
    assert response.status_code == 404 and response.json()["error"] == f"no prompt upload with id {upload_id}"


def test_the_upload_page_follows_the_upload_then_opens_the_set(client, user):
    client.force_login(user)
    response = client.post("/prompt-sets/", {"name": "", "file": SimpleUploadedFile("big.jsonl", jsonl(200))})
    upload = PromptUpload.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/prompt-sets/uploads/{upload.pk}/"
    page = client.get(response["Location"])
    assert b"Waiting for a worker" in page.content and b"prompt_upload.js" in page.content
    assert b"Uploads being read" in client.get("/prompt-sets/").content
    uploads.parse_upload(upload.pk)
    prompt_set = PromptSet.objects.get()
    assert prompt_set.name == "big"  # the file's name when none was typed
    assert client.get(f"/prompt-sets/uploads/{upload.pk}/")["Location"] == f"/prompt-sets/{prompt_set.pk}/"


def test_the_upload_page_shows_a_refusal_escaped(client, user):
    client.force_login(user)
    data = jsonl(200)[:-1] + b'\n{"prompt": "<script>alert(1)</script>", "answer": {"a": 1}}\n'
    client.post("/prompt-sets/", {"file": SimpleUploadedFile("<i>x.jsonl", data)})
    upload = PromptUpload.objects.get()
    uploads.parse_upload(upload.pk)
    page = client.get(f"/prompt-sets/uploads/{upload.pk}/").content.decode()
    assert "line 201:" in page and "&lt;i&gt;x.jsonl" in page and "<i>x" not in page
