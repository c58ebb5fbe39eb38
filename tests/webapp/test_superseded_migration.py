"""Runs stored before superseded steps were marked get the mark: for each (step, prompt) logged more
than once, every group but the latest, and their rollouts."""
import pytest

from tests.factories import migrate_to, migrate_to_latest, run_in

pytestmark = pytest.mark.django_db(transaction=True)


def test_replayed_steps_stored_before_the_migration_are_marked():
    try:
        old = migrate_to([("runs", "0011_run_lease")])
        run = run_in(old)
        Group, Rollout = old.get_model("runs", "Group"), old.get_model("runs", "Rollout")
        for seq, step in [(0, 1), (1, 2), (2, 2)]:  # step 2 logged again after a resume
            group = Group.objects.create(run=run, seq=seq, step=step, prompt_id="p1")
            Rollout.objects.create(group=group, run_id=run.pk, step=step, index=0, text=f"seq {seq}", reward=1.0)

        migrate_to([("runs", "0012_superseded_steps")])
        from webapp.runs.models import Group as NewGroup
        from webapp.runs.models import Rollout as NewRollout

        assert list(NewGroup.objects.filter(run_id=run.pk).order_by("seq").values_list("superseded", flat=True)) == [
            False, True, False]
        assert list(NewRollout.objects.filter(superseded=True).values_list("text", flat=True)) == ["seq 1"]
    finally:
        migrate_to_latest()
