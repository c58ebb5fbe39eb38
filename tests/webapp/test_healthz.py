import pytest

pytestmark = pytest.mark.django_db


def test_it_reports_database_and_redis_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["db"] == "ok" and body["redis"] == "ok"
    assert isinstance(body["workers"], int)


def test_it_reports_an_unreachable_redis(client, settings):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["redis"].startswith("error")
