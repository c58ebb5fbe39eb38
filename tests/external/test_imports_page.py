"""/imports/ (issue 39): the runs brought in from a logger's files that the user may see, with where the files were
and what each sync read and skipped; the run page says it too. What a sync sends is the client's text: escaped."""
import json

import pytest
from django.contrib.auth import get_user_model

from tests.factories import make_team
from webapp.runs.models import Run

pytestmark = pytest.mark.django_db

SYNC = {"logger": "tensorboard", "folder": "/runs/<script>alert(1)</script>", "host": "gpu-07", "files": 2,
        "points": 150, "rollouts": 16, "skipped": {"histogram": 3, "image": 1}}


def imported(client, mlflow, name="tb-run", sync=SYNC):
    run = Run.objects.get(mlflow_run_id=mlflow.new_run(name=name))
    body = {"keys": ["actor/entropy"], "points": [[0, s, 1_795_000_000_000 + s, 0.5] for s in (1, 2, 3)], "sync": sync}
    assert client.post(f"/api/runs/{run.pk}/metrics", json.dumps(body), content_type="application/json").status_code == 200
    return run


def test_it_lists_each_import_with_what_was_read_and_skipped(client, api_client, user, mlflow):
    run = imported(api_client, mlflow)
    client.force_login(user)
    page = client.get("/imports/").content.decode()
    assert f'data-run="{run.pk}"' in page and "TensorBoard" in page and "tb-run" in page
    assert "gpu-07:/runs/&lt;script&gt;alert(1)&lt;/script&gt;" in page and "<script>alert(1)" not in page
    assert "(2 files)" in page and ">150<" in page and ">16<" in page and ">3<" in page  # points, rollouts, steps
    assert "3 histogram, 1 image" in page


def test_the_run_page_says_where_it_was_imported_from(client, api_client, user, mlflow):
    run = imported(api_client, mlflow)
    client.force_login(user)
    page = client.get(f"/runs/{run.pk}/").content.decode()
    assert 'id="logger-import"' in page and "Imported from TensorBoard" in page and "150 points, 16 rollouts" in page
    assert "&lt;script&gt;" in page and "<script>alert(1)" not in page


def test_a_run_logged_through_mlflow_says_nothing_of_an_import(client, user, mlflow):
    run = Run.objects.get(mlflow_run_id=mlflow.new_run(name="plain"))
    client.force_login(user)
    assert 'id="logger-import"' not in client.get(f"/runs/{run.pk}/").content.decode()


def test_it_shows_only_the_imports_of_the_users_teams(client, api_client, mlflow):
    imported(api_client, mlflow)
    make_team("elsewhere", sam="member")
    client.force_login(get_user_model().objects.get(username="sam"))
    page = client.get("/imports/").content.decode()
    assert 'id="no-imports"' in page and "tb-run" not in page


def test_it_asks_for_a_sign_in(client):
    response = client.get("/imports/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]
