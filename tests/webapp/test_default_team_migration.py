"""Data from before teams moves into the team `default`, with every user a member."""
import pytest

from tests.factories import migrate_to, migrate_to_latest

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("accounts", "0002_teams"), ("prompts", "0002_prompt_set_team"), ("runs", "0003_run_team_eval_set_tags")]
AFTER = [("accounts", "0003_default_team"), ("prompts", "0003_prompt_set_team_required"), ("runs", "0004_run_team_required")]


def test_existing_sets_runs_and_users_join_the_default_team():
    try:
        old = migrate_to(BEFORE)
        User = old.get_model("auth", "User")
        admin = User.objects.create(username="root", is_superuser=True)
        user = User.objects.create(username="ada")
        prompt_set = old.get_model("prompts", "PromptSet").objects.create(name="s", owner=user, format="json")
        run = old.get_model("runs", "Run").objects.create(name="r", method="ttrl", prompt_set=prompt_set, max_steps=1,
                                                           created_by=user)
        new = migrate_to(AFTER)
        team = new.get_model("accounts", "Team").objects.get(name="default")
        roles = dict(new.get_model("accounts", "Membership").objects.filter(team=team).values_list("user__username", "role"))
        assert roles == {"root": "admin", "ada": "member"}
        assert new.get_model("prompts", "PromptSet").objects.get(pk=prompt_set.pk).team_id == team.pk
        assert new.get_model("runs", "Run").objects.get(pk=run.pk).team_id == team.pk
        assert admin.pk
    finally:
        migrate_to_latest()
