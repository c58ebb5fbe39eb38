"""The tests' settings: the product's (webapp/settings.py), with each pytest-xdist worker (`make test-fast` runs two)
on a Redis database and a data directory of its own, so parallel workers never share a queue, a live stream, a cache
key or a run directory; each has its own test database already (pytest-django). The processes a test starts (daphne,
Celery) inherit them, and the marker keeps those from moving again."""
import os
from pathlib import Path

worker = os.environ.get("PYTEST_XDIST_WORKER")
if worker and not os.environ.get("EVOLAB_TEST_WORKER"):
    os.environ["EVOLAB_TEST_WORKER"] = worker
    index = int(worker.removeprefix("gw"))
    base, _, database = os.environ["REDIS_URL"].rpartition("/")
    os.environ["REDIS_URL"] = f"{base}/{(int(database or 0) + 1 + index) % 16}"
    data_dir = Path(os.environ["EVOLAB_DATA_DIR"]) / worker
    data_dir.mkdir(parents=True, exist_ok=True)
    os.environ["EVOLAB_DATA_DIR"] = str(data_dir)

from webapp.settings import *  # noqa: E402,F401,F403

# Django's own advice for tests: a password hash that costs microseconds. PBKDF2's million rounds cost half a second of
# CPU on this project's 2-core machine, once per user a test makes and once per sign-in; hundreds of tests make one.
# The hashers of webapp/settings.py stay behind it, so a password hashed there still checks here.
from django.conf import global_settings  # noqa: E402

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher", *global_settings.PASSWORD_HASHERS]
