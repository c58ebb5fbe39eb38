"""The run page's own facts and controls (issue 25): its eval prompt set, notes, progress bar, and a member's
rename, notes, tags, archive and delete (after confirmation); a viewer sees none of the controls."""
import pytest

from tests.factories import make_prompt_set, make_team
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db


@pytest.fixture
def lab(django_user_model, monkeypatch):
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda *args, **kwargs: None)  # no broker in these tests
    team = make_team("lab", mel="member", vic="viewer")
    users = {u.username: u for u in django_user_model.objects.filter(username__in=["mel", "vic"])}
    return users, make_prompt_set(users["mel"], team=team)


def make_run(lab, **fields):
    users, prompt_set = lab
    return Run.objects.create(name="r", method="ttrl", prompt_set=prompt_set, max_steps=8, created_by=users["mel"], **fields)


def page(client, user, run):
    client.force_login(user)
    response = client.get(f"/runs/{run.pk}/")
    assert response.status_code == 200
    return response.content.decode()


def test_the_page_names_the_eval_prompt_set_and_shows_notes_escaped(client, lab):
    users, prompt_set = lab
    evals = make_prompt_set(users["mel"], name="aime-eval", team=prompt_set.team)
    run = make_run(lab, eval_prompt_set=evals, notes="<script>x</script>\nline two")
    html = page(client, users["vic"], run)
    assert f'href="/prompt-sets/{evals.pk}/">aime-eval</a>' in html
    assert "&lt;script&gt;x&lt;/script&gt;<br>line two" in html and "<script>x</script>" not in html


def test_progress_is_a_bar_of_steps_logged_of_the_total(client, lab):
    run = make_run(lab, state=Run.RUNNING, last_step=2)
    html = page(client, lab[0]["vic"], run)
    assert 'class="run-progress" data-field="progress" max="8" value="2"' in html and ">25%</progress>" in html


def test_a_queued_run_says_its_charts_wait_for_the_first_step(client, lab):
    html = page(client, lab[0]["vic"], make_run(lab))
    assert 'id="charts-waiting"' in html and "Waiting for the first step" in html


def test_a_viewer_sees_no_controls_and_cannot_post_them(client, lab):
    users, _ = lab
    run = make_run(lab, state=Run.SUCCEEDED)
    html = page(client, users["vic"], run)
    assert 'id="edit-form"' not in html and 'id="delete-form"' not in html
    assert client.post(f"/runs/{run.pk}/edit/", {"name": "mine"}).status_code == 403
    assert client.post(f"/runs/{run.pk}/delete/", {"confirm": str(run.pk)}).status_code == 403
    assert Run.objects.get(pk=run.pk).name == "r"


def test_a_member_renames_annotates_retags_and_archives_from_the_page(client, lab):
    users, _ = lab
    run = make_run(lab)
    page(client, users["mel"], run)
    client.post(f"/runs/{run.pk}/edit/", {"name": "renamed", "notes": "try lr 1e-6", "tags": "a, b"})
    client.post(f"/runs/{run.pk}/archive/", {"archived": "1"})
    run.refresh_from_db()
    assert (run.name, run.notes, run.tags, run.archived_at is not None) == ("renamed", "try lr 1e-6", ["a", "b"], True)
    assert 'id="archived-badge"' in page(client, users["mel"], run)


def test_delete_needs_the_box_ticked_and_an_ended_run(client, lab):
    users, _ = lab
    running, ended = make_run(lab, state=Run.RUNNING), make_run(lab, state=Run.FAILED)
    assert "cancel it first" in page(client, users["mel"], running)
    client.post(f"/runs/{ended.pk}/delete/", {})
    assert Run.objects.filter(pk=ended.pk).exists()
    response = client.post(f"/runs/{ended.pk}/delete/", {"confirm": str(ended.pk)})
    assert response.status_code == 302 and response.url == "/" and not Run.objects.filter(pk=ended.pk).exists()


def test_compare_shows_each_runs_notes_escaped(client, lab):
    users, _ = lab
    one, two = make_run(lab, notes="<b>bold</b> idea"), make_run(lab)
    client.force_login(users["vic"])
    html = client.get(f"/compare/?runs={one.pk},{two.pk}").content.decode()
    assert '<td class="notes">&lt;b&gt;bold&lt;/b&gt; idea</td>' in html
