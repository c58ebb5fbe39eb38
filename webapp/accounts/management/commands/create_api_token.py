from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.models import ApiToken


class Command(BaseCommand):
    help = "Print a new API token for USERNAME (use --create to create the user first)."

    def add_arguments(self, parser):
        parser.add_argument("username")
        parser.add_argument("--create", action="store_true", help="create the user when it does not exist")

    def handle(self, username, create, **options):
        User = get_user_model()
        user = User.objects.filter(username=username).first()
        if user is None:
            if not create:
                raise CommandError(f"no user named {username!r}; pass --create to create it")
            user = User.objects.create_user(username=username)
        self.stdout.write(ApiToken.issue(user))
