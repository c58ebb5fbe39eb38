from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.models import Membership, Team
from webapp.accounts.set_password import set_password_link


class Command(BaseCommand):
    help = ("Add USERNAME to TEAM with a role (default member); --create makes the team and the user when missing, "
            "and prints a one-time link where the new user chooses their password.")

    def add_arguments(self, parser):
        parser.add_argument("team")
        parser.add_argument("username")
        parser.add_argument("--role", choices=[Membership.ADMIN, Membership.MEMBER, Membership.VIEWER],
                            default=Membership.MEMBER)
        parser.add_argument("--create", action="store_true", help="create the team and the user when they do not exist")
        parser.add_argument("--base-url", default=None,
                            help="the site's address in the set-password link (default: EVOLAB_BASE_URL, "
                                 f"now {settings.EVOLAB_BASE_URL})")

    def handle(self, team, username, role, create, base_url, **options):
        User = get_user_model()
        team_obj = Team.objects.filter(name=team).first()
        user = User.objects.filter(username=username).first()
        if team_obj is None and not create:
            raise CommandError(f"no team named {team!r}; pass --create to create it")
        if user is None and not create:
            raise CommandError(f"no user named {username!r}; pass --create to create it")
        if team_obj is None:
            team_obj = Team.objects.create(name=team)
            self.stdout.write(f"created team {team!r}")
        link = None
        if user is None:
            user = User.objects.create_user(username=username)  # no usable password until they choose one
            link = set_password_link(user, base_url or settings.EVOLAB_BASE_URL)
            self.stdout.write(f"created user {username!r}")
        membership, created = Membership.objects.update_or_create(team=team_obj, user=user, defaults={"role": role})
        self.stdout.write(f"{username} is {'now' if created else 'still'} {role} of {team}" if created
                          else f"{username} is {role} of {team}")
        if link:
            days = settings.PASSWORD_RESET_TIMEOUT / 86400
            self.stdout.write(f"send {username} this link to choose a password and sign in (it works once, for "
                              f"{days:g} days):\n{link}")
