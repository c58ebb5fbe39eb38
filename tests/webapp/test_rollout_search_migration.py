"""Rollouts stored before the search existed get their run and step, so the search finds them, their
texts too before anything has indexed them (runs/0009 starts every run's text index empty)."""
import pytest

from tests.factories import migrate_to, migrate_to_latest, run_in

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0007_group_summary")]


def test_stored_rollouts_are_searchable_after_the_migration():
    try:
        old = migrate_to(BEFORE)
        run = run_in(old)
        Group, Rollout = old.get_model("runs", "Group"), old.get_model("runs", "Rollout")
        for step, text in [(4, "carry the one"), (7, "subtract seven then carry")]:
            group = Group.objects.create(run=run, seq=step, step=step, prompt_id="p1")
            Rollout.objects.create(group=group, index=0, text=text, answer="1", reward=1.0)

        # every migration since (the search reads today's models, whose fields later migrations add)
        migrate_to_latest()
        from webapp.explorer.search import search

        page = search(run.pk, {"q": "carry"})
        assert [(r["step"], r["prompt_id"], r["text"]) for r in page.results] == [
            (4, "p1", "carry the one"), (7, "p1", "subtract seven then carry")]
        assert [r["step"] for r in search(run.pk, {"q": "seven", "order": "-step"}).results] == [7]
    finally:
        migrate_to_latest()
