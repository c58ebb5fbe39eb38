"""Rows of a run's history kept before RunTransition.previous_state existed get it from the run's previous row."""
import pytest

from tests.factories import migrate_to, migrated_from, run_in

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0019_search_extra_indexes_sqlite")]
AFTER = [("runs", "0020_transition_previous_state")]


def test_each_kept_row_gets_the_state_of_the_runs_row_before_it():
    with migrated_from(BEFORE) as old:
        first = run_in(old)
        Transition = old.get_model("runs", "RunTransition")
        for state, cause in (("queued", "launched"), ("running", "claimed"), ("queued", "lease_expired")):
            Transition.objects.create(run=first, cause=cause, state=state)
        user, team, prompt_set = first.created_by, first.team, first.prompt_set
        second = old.get_model("runs", "Run").objects.create(name="s", method="ttrl", prompt_set=prompt_set,
                                                             max_steps=2, created_by=user, team=team)
        Transition.objects.create(run=second, cause="launched", state="queued")

        New = migrate_to(AFTER).get_model("runs", "RunTransition")
        assert list(New.objects.filter(run_id=first.pk).order_by("id").values_list("previous_state", "state")) == [
            ("", "queued"), ("queued", "running"), ("running", "queued")]
        assert list(New.objects.filter(run_id=second.pk).values_list("previous_state", flat=True)) == [""]
