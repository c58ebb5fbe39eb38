import json
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from webapp.accounts.models import Membership, Team
from webapp.prompts.models import PromptSet
from webapp.prompts.parsing import parse_prompt_file

ARITHMETIC = settings.BASE_DIR / "rl" / "assets" / "arithmetic_sample.json"
SAMPLES = [
    # (name, file, rows kept: None for all): the arithmetic set matches the default policy, so a demo run's
    # majority vote carries signal; the MATH-500 excerpt shows a real benchmark's format.
    ("Arithmetic word problems (sample)", ARITHMETIC, None),
    ("MATH-500 (first 40)", Path(__file__).resolve().parents[2] / "samples" / "math500_sample.json", None),
    # The 32 problems of docs/experiments.md's Figure 1 miniature (the policy's first held-out problems), where
    # TTRL's entropy falls by two thirds in 40 steps: the README's run that shows a collapse and its alert.
    ("Arithmetic, Figure 1 miniature (32 problems)", ARITHMETIC, 32),
]


class Command(BaseCommand):
    help = "Create the demo account, the team `demo` (the account its admin) and the sample prompt sets; leaves existing ones alone."

    def add_arguments(self, parser):
        parser.add_argument("--username", default="demo")
        parser.add_argument("--password", default="evolab-demo")
        # the alert emails need an address (example.com is reserved: nothing is ever delivered there)
        parser.add_argument("--email", default="demo@example.com")

    def handle(self, username, password, email, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            user = User.objects.create_user(username=username, password=password, email=email)
            self.stdout.write(f"created user {username!r}")
        elif user.is_superuser or user.is_staff:
            # Its password is in the README: it is the demo team's admin and nothing more (a database made
            # before this made it a superuser, with the admin site and every team's data).
            User.objects.filter(pk=user.pk).update(is_superuser=False, is_staff=False)
            self.stdout.write(f"user {username!r} is no longer a superuser")
        if not user.email:  # an account made before the demo had an address
            User.objects.filter(pk=user.pk).update(email=email)
        team, _ = Team.objects.get_or_create(name="demo")
        Membership.objects.get_or_create(team=team, user=user, defaults={"role": Membership.ADMIN})
        for name, path, kept in SAMPLES:
            if PromptSet.objects.filter(team=team, name=name).exists():
                continue
            data = path.read_bytes() if kept is None else json.dumps(json.loads(path.read_bytes())[:kept]).encode()
            parsed = parse_prompt_file(path.name, data, settings.PROMPT_FILE_MAX_BYTES)
            PromptSet.create_from_parsed(name=name, owner=user, team=team, filename=path.name, parsed=parsed)
            self.stdout.write(f"loaded prompt set {name!r} ({len(parsed.rows)} rows)")
