"""For benchmarks/mlflow_suite_plugin.py, under Evolab's Python and environment (its DATABASE_URL or SQLite folder):
each line read makes a user of its own, a member of a team of its own, and answers `token KEY` with the user's API
token. The user's username in the test's pytest id is kept in the token's name only; nothing else is read."""
import os
import secrets
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("EVOLAB_DEV", "1")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from webapp.accounts.models import ApiToken, Membership, Team  # noqa: E402


def main():
    for line in sys.stdin:
        suffix = secrets.token_hex(5)
        user = get_user_model().objects.create_user(f"suite-{suffix}", f"suite-{suffix}@example.com", None)
        team = Team.objects.create(name=f"suite-{suffix}")
        Membership.objects.create(team=team, user=user, role=Membership.MEMBER)
        print("token", ApiToken.issue(user, name=line.strip()[:ApiToken.NAME_MAX]), flush=True)


if __name__ == "__main__":
    main()
