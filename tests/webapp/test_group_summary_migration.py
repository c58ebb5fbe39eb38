"""Groups stored before their summary columns existed are summarised from their rollouts."""
import pytest

from tests.factories import migrate_to, migrated_from, run_in

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0006_metric_series")]
AFTER = [("runs", "0007_group_summary")]


def test_stored_groups_get_the_summary_ingestion_would_have_written():
    with migrated_from(BEFORE) as old:
        run = run_in(old)
        Group, Rollout = old.get_model("runs", "Group"), old.get_model("runs", "Rollout")
        group = Group.objects.create(run=run, seq=0, step=1, prompt_id="p1", majority_answer="5",
                                     similarity=[[1, 0.5], [0.5, 1]])
        for index, (answer, in_majority, reward) in enumerate([("5", True, 1.0), ("4", False, 0.0), ("5", True, None)]):
            Rollout.objects.create(group=group, index=index, text="...", answer=answer, in_majority=in_majority,
                                   reward=reward)
        empty = Group.objects.create(run=run, seq=1, step=1, prompt_id="p2", majority_answer=None)

        # the models of that state: later migrations add fields today's Group reads
        NewGroup = migrate_to(AFTER).get_model("runs", "Group")

        summarised = NewGroup.objects.get(pk=group.pk)
        assert (summarised.size, summarised.unique_answers, summarised.reward_mean) == (3, 2, 0.5)
        assert summarised.majority_ratio == pytest.approx(2 / 3) and summarised.similarity_mean == 0.5
        assert NewGroup.objects.filter(pk=empty.pk).values_list("size", "majority_ratio").get() == (0, None)
