"""DESIGN §4.4: another team's objects answer exactly like missing ones, on every page
and endpoint; viewers read but cannot launch, cancel, resume, clone or upload."""
import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from tests.factories import event_log, make_prompt_set, make_team
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Alert
from webapp.runs.models import Run
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model, monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *a, **kw: None)
    team_a = make_team("team-a", alice="member", vera="viewer")
    make_team("team-b", bob="admin")
    alice = django_user_model.objects.get(username="alice")
    prompt_set = make_prompt_set(alice, team=team_a)
    run = Run.objects.create(name="a-run", method="ttrl", prompt_set=prompt_set, max_steps=2, created_by=alice)
    ingest_events(run, event_log(steps=2))
    alert = Alert.objects.create(team=team_a, run=run, rule="entropy_collapse", message="entropy fell", step=2)
    return {"run": run, "prompt_set": prompt_set, "alert": alert, "team": team_a}


def upload_file():
    return SimpleUploadedFile("prompts.txt", b"What is 1 + 1?\n")


def client_for(django_user_model, username, token=False):
    user = django_user_model.objects.get(username=username)
    client = Client()
    if token:
        client.defaults["HTTP_AUTHORIZATION"] = f"Token {ApiToken.issue(user)}"
    else:
        client.force_login(user)
    return client


READ_URLS = [
    "/api/runs/{run}", "/api/runs/{run}/metrics", "/api/runs/{run}/rollouts", "/api/runs/{run}/groups/1/p1",
    "/api/runs/{run}/alerts", "/api/prompt-sets/{ps}", "/api/teams/{team}",
    "/runs/{run}/", "/runs/{run}/rollouts/", "/runs/{run}/questions/", "/prompt-sets/{ps}/",
    "/teams/{team}/", "/teams/{team}/alerts/", "/api/compare?runs={run}", "/compare/?runs={run}",
    "/api/runs/{run}/metrics?max_points=10&since_step=0", "/runs/new/?clone={run}",
    "/api/runs/{run}/prompts/p1/history", "/runs/{run}/prompts/p1/", "/api/runs/{run}/metrics/export",
    "/api/runs/{run}/rollouts/search?q=answer", "/api/runs/{run}/rollouts/export?format=csv",
    "/runs/{run}/rollouts/search/?q=answer", "/api/runs/{run}/live-state",
]


@pytest.mark.parametrize("url", READ_URLS)
def test_another_teams_object_answers_404_like_a_missing_one(world, django_user_model, url):
    ids = {"run": world["run"].pk, "ps": world["prompt_set"].pk, "team": world["team"].pk}
    outsider = client_for(django_user_model, "bob", token=url.startswith("/api/"))
    assert outsider.get(url.format(**ids)).status_code == 404
    missing = {"run": 999999, "ps": 999999, "team": 999999}
    assert outsider.get(url.format(**missing)).status_code == 404
    viewer = client_for(django_user_model, "vera", token=url.startswith("/api/"))
    assert viewer.get(url.format(**ids)).status_code == 200


def test_another_teams_r_zero_questions_answer_404(world, django_user_model):
    row = {"id": "it1-q0", "question": "Q?", "text": "<question>Q?</question>", "p_hat": 0.5, "pseudo_label": "7",
           "answers": ["7", "6"], "kept": True}
    ingest_events(world["run"], [{"seq": 100, "time": 1.0, "type": "questions", "iteration": 1, "offset": 0,
                                  "total": 1, "questions": [row]}])
    url = f"/api/runs/{world['run'].pk}/rzero/1/questions"
    assert client_for(django_user_model, "bob", token=True).get(url).status_code == 404
    assert client_for(django_user_model, "vera", token=True).get(url).json()["questions"] == [row]
    page = client_for(django_user_model, "bob").get(f"/runs/{world['run'].pk}/questions/?iteration=1")
    assert page.status_code == 404


def test_lists_show_only_the_users_teams(world, django_user_model):
    bob = client_for(django_user_model, "bob", token=True)
    assert bob.get("/api/runs").json()["runs"] == []
    assert bob.get("/api/prompt-sets").json()["prompt_sets"] == []
    assert bob.get("/api/alerts").json()["alerts"] == []
    assert [t["name"] for t in bob.get("/api/teams").json()["teams"]] == ["team-b"]
    page = client_for(django_user_model, "bob").get("/").content.decode()
    assert "a-run" not in page


@pytest.mark.parametrize("action", ["cancel", "resume", "clone"])
def test_outsiders_acting_on_a_run_get_404(world, django_user_model, action):
    bob = client_for(django_user_model, "bob", token=True)
    assert bob.post(f"/api/runs/{world['run'].pk}/{action}").status_code == 404
    assert client_for(django_user_model, "bob").post(f"/runs/{world['run'].pk}/{action}/").status_code == 404


@pytest.mark.parametrize("action", ["cancel", "resume", "clone"])
def test_viewers_cannot_cancel_resume_or_clone(world, django_user_model, action):
    vera = client_for(django_user_model, "vera", token=True)
    response = vera.post(f"/api/runs/{world['run'].pk}/{action}")
    assert response.status_code == 403 and "viewer" in response.json()["error"]
    assert client_for(django_user_model, "vera").post(f"/runs/{world['run'].pk}/{action}/").status_code == 403
    assert Run.objects.count() == 1


def test_viewers_cannot_launch_upload_or_acknowledge(world, django_user_model):
    vera = client_for(django_user_model, "vera", token=True)
    launch = vera.post("/api/runs", {"name": "x", "method": "ttrl", "prompt_set": world["prompt_set"].pk},
                       content_type="application/json")
    assert launch.status_code == 403
    upload = vera.post("/api/prompt-sets", {"name": "s", "file": upload_file()})
    assert upload.status_code == 403
    assert vera.post(f"/api/alerts/{world['alert'].pk}/acknowledge").status_code == 403
    assert Run.objects.count() == 1 and world["alert"].__class__.objects.get().state == "open"


def test_outsiders_cannot_launch_on_another_teams_prompt_set(world, django_user_model):
    bob = client_for(django_user_model, "bob", token=True)
    response = bob.post("/api/runs", {"name": "x", "method": "ttrl", "prompt_set": world["prompt_set"].pk},
                        content_type="application/json")
    assert response.status_code == 400 and response.json()["field"] == "prompt_set"
    assert bob.post(f"/api/alerts/{world['alert'].pk}/acknowledge").status_code == 404


def test_members_launch_in_their_prompt_sets_team(world, django_user_model):
    alice = client_for(django_user_model, "alice", token=True)
    response = alice.post("/api/runs", {"name": "x", "method": "ttrl", "prompt_set": world["prompt_set"].pk},
                          content_type="application/json")
    assert response.status_code == 201 and response.json()["team"] == world["team"].pk
    upload = alice.post("/api/prompt-sets", {"name": "s", "file": upload_file()})
    assert upload.status_code == 201 and upload.json()["team"] == world["team"].pk


def test_a_user_in_several_teams_must_say_which(world, django_user_model):
    make_team("team-c", alice="admin")
    alice = client_for(django_user_model, "alice", token=True)
    upload = alice.post("/api/prompt-sets", {"name": "s", "file": upload_file()})
    assert upload.status_code == 400 and upload.json()["field"] == "team"
    named = alice.post("/api/prompt-sets", {"name": "s", "team": "team-c", "file": upload_file()})
    assert named.status_code == 201
    wrong_team = alice.post("/api/runs", {"name": "x", "method": "ttrl", "prompt_set": world["prompt_set"].pk,
                                          "team": "team-c"}, content_type="application/json")
    assert wrong_team.status_code == 400 and wrong_team.json()["field"] == "team"
    unknown = alice.post("/api/prompt-sets", {"name": "s", "team": "team-b", "file": upload_file()})
    assert unknown.status_code == 404 and unknown.json()["field"] == "team"
