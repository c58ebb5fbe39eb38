"""/healthz: db, redis and workers, from a check cached for HEALTH_CHECK_SECONDS (a flood of anonymous calls
must not each ping the workers for a second on a server thread); error texts for staff only."""
import threading

import pytest

from webapp.runs import health

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def fresh_check(settings):
    # each test starts with no cached check (health.check keeps the last one in _last)
    health._last.update(at=None, result=None)
    yield
    health._last.update(at=None, result=None)


def test_it_reports_database_and_redis_ok(client):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body["db"] == "ok" and body["redis"] == "ok"
    assert isinstance(body["workers"], int)


def test_it_reports_an_unreachable_redis_and_only_staff_read_the_error(client, settings, django_user_model):
    settings.REDIS_URL = "redis://127.0.0.1:1/0"
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["redis"] == "error"  # anonymous: no text about the deployment's insides
    client.force_login(django_user_model.objects.create_user(username="ops", is_staff=True))
    assert client.get("/healthz").json()["redis"].startswith("error: ")


def test_calls_within_the_cache_time_share_one_check(client, settings, monkeypatch):
    settings.HEALTH_CHECK_SECONDS = 60
    runs = []
    real = health.run_checks
    monkeypatch.setattr(health, "run_checks", lambda: runs.append(1) or real())
    threads = [threading.Thread(target=client.get, args=("/healthz",)) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for _ in range(5):
        assert client.get("/healthz").status_code == 200
    assert len(runs) == 1
