from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from webapp.accounts.models import Membership, Team


class Command(BaseCommand):
    help = "Add USERNAME to TEAM with a role (default member); --create makes the team and the user when missing."

    def add_arguments(self, parser):
        parser.add_argument("team")
        parser.add_argument("username")
        parser.add_argument("--role", choices=[Membership.ADMIN, Membership.MEMBER, Membership.VIEWER],
                            default=Membership.MEMBER)
        parser.add_argument("--create", action="store_true", help="create the team and the user when they do not exist")

    def handle(self, team, username, role, create, **options):
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
        if user is None:
            user = User.objects.create_user(username=username)
            self.stdout.write(f"created user {username!r}")
        membership, created = Membership.objects.update_or_create(team=team_obj, user=user, defaults={"role": role})
        self.stdout.write(f"{username} is {'now' if created else 'still'} {role} of {team}" if created
                          else f"{username} is {role} of {team}")
