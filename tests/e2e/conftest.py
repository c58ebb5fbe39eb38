import os
import signal
import subprocess

import pytest
from django.contrib.auth import get_user_model

from tests.e2e.helpers import Api
from webapp.accounts.models import ApiToken


@pytest.fixture
def live_user(transactional_db):
    from tests.factories import team_of

    user = get_user_model().objects.create_user(username="grace", password="pw-for-e2e-1")
    team_of(user)
    return user


@pytest.fixture
def api(live_stack, live_user):
    return Api(live_stack.url, ApiToken.issue(live_user))


@pytest.fixture
def session_key(live_user):
    """A signed-in session for the WebSocket, made the way Django's test client does."""
    from django.test import Client

    client = Client()
    client.force_login(live_user)
    return client.cookies["sessionid"].value


CHROMIUM = "/usr/bin/chromium"
# Without the background-networking flags Chromium keeps dialling out on this closed
# network; the rest are what headless Chromium needs as root in a container. Even with them it
# looks up accounts.google.com and update.googleapis.com at start, through the machine's nameserver
# (off loopback: the engines' loopback tests saw it): its own resolver answers every name but
# localhost "not found" instead, and the pages under test are on 127.0.0.x addresses.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE localhost , EXCLUDE 127.*"]


@pytest.fixture
def browser_page(tmp_path, monkeypatch):
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's 'chromium' package (make test does it as root)")
    # Playwright's sync API runs an event loop in this thread; the test touches the
    # database only before the browser starts, so Django's guard can be relaxed.
    monkeypatch.setenv("DJANGO_ALLOW_ASYNC_UNSAFE", "true")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_default_timeout(30_000)
        yield page
        page.screenshot(path=str(tmp_path / "last.png"))
        browser.close()


# --- cluster engines (DESIGN §4.9): real Slurm and Ray on loopback, and a stack whose worker hands runs to one

ENGINE_LEASE = {"EVOLAB_RUN_LEASE_SECONDS": "5", "EVOLAB_RUN_HEARTBEAT_SECONDS": "0.5",
                "EVOLAB_RUN_REAP_EVERY_SECONDS": "1"}

CLUSTERS = ("slurm_cluster", "ray_cluster")


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(items):
    """Each cluster's tests run together, where the first of them is. pytest-django runs the tests that use no
    database after all those that do: the last test of each engine file (the loopback check, which uses none) would
    run at the end of the suite and start its cluster a second time, after the rest of its file stopped it."""
    for fixture in CLUSTERS:
        using = [item for item in items if fixture in getattr(item, "fixturenames", ())]
        if using:
            first = items.index(using[0])
            chosen = set(map(id, using))
            rest = [item for item in items if id(item) not in chosen]
            items[:] = rest[:first] + using + rest[first:]


# Module-scoped: each engine's tests are one file, so each engine starts once per session and stops after its
# file instead of idling (and being watched) through the rest of the suite.
@pytest.fixture(scope="module")
def slurm_cluster():
    from scripts.clusters import SlurmCluster, slurm_missing
    from tests.e2e.connection_watch import ConnectionWatch

    reason = slurm_missing()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster().start()
    try:
        # every socket of this test process's descendants, for the loopback test: the daemons, and the jobs'
        # steps, which daemonize and are adopted by this process (the subreaper), with the stacks that use them
        with ConnectionWatch(lambda: [os.getpid()]) as cluster.watch:
            yield cluster
    finally:
        cluster.stop()


@pytest.fixture(scope="module")
def ray_cluster():
    from scripts.clusters import RayCluster
    from tests.e2e.connection_watch import ConnectionWatch

    cluster = RayCluster().start()
    try:
        with ConnectionWatch(lambda: [os.getpid()]) as cluster.watch:
            yield cluster
    finally:
        cluster.stop()


class EngineStack:
    """daphne, a training worker that hands its runs to an engine, and an alerts worker (beat: the lease check,
    shortened as benchmarks/scenarios/test_worker_loss.py does) of their own, on the test database and Redis."""

    def __init__(self, live_stack, env, log_dir, settings, user):
        import uuid

        from scripts.stack import Stack, free_port
        from tests.conftest import _test_database_url

        self.prefix = f"g{uuid.uuid4().hex[:8]}-"
        self.stack = Stack(log_dir=log_dir, quiet=True)
        self.stack.env.update(live_stack.stack.env, EVOLAB_QUEUE_PREFIX=self.prefix,
                              EVOLAB_CHANNEL_PREFIX=f"evolab-{self.prefix}", DATABASE_URL=_test_database_url(),
                              EVOLAB_CANCEL_GRACE_SECONDS="30", **ENGINE_LEASE, **env)
        settings.RUN_LEASE_SECONDS = float(ENGINE_LEASE["EVOLAB_RUN_LEASE_SECONDS"])
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        self.api = Api(self.url, ApiToken.issue(user))
        self.stack.start_web(port)
        self.worker = self.start_worker()
        self.stack.start_alerts_worker(self.prefix)

    def start_worker(self):
        # a worker that hands runs to an engine takes both queues: the cluster, not the worker, has the GPUs
        return self.stack.start_worker(f"{self.prefix}cpu,{self.prefix}gpu")

    def stop(self):
        # all at once, as none of them waits on another: Stack.stop's one at a time spends a second on each worker
        running = [process for _, process in self.stack.children if process.poll() is None]
        for process in running:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        for process in running:
            try:
                process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait()
        self.stack.children.clear()


@pytest.fixture
def engine_stack(live_stack, live_user, tmp_path, settings):
    stacks = []

    def start(env):
        stacks.append(EngineStack(live_stack, env, tmp_path / f"logs-{len(stacks)}", settings, live_user))
        return stacks[-1]

    yield start
    for stack in stacks:
        stack.stop()
