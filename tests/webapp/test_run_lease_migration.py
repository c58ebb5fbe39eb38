"""The lease moved off the run into RunLease (runs/0023): a run a supervisor held keeps its owner and last
heartbeat, and one held before heartbeats existed is dated from its start."""
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import migrate_to, migrated_from, run_in

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0022_text_index_models_to_explorer")]
AFTER = [("runs", "0023_run_lease")]


def test_each_held_run_gets_a_lease_with_its_owner_and_heartbeat_and_no_other_run_does():
    beat, started = timezone.now() - timedelta(seconds=30), timezone.now() - timedelta(hours=2)
    with migrated_from(BEFORE) as old:
        held = run_in(old)
        Run = old.get_model("runs", "Run")
        Run.objects.filter(pk=held.pk).update(state="running", supervisor="host-a:1:abc", heartbeat_at=beat)
        early = Run.objects.create(name="early", method="ttrl", prompt_set=held.prompt_set, max_steps=2,
                                   created_by=held.created_by, team=held.team, state="running",
                                   supervisor="host-b:2:def", started_at=started)
        ended = Run.objects.create(name="ended", method="ttrl", prompt_set=held.prompt_set, max_steps=2,
                                   created_by=held.created_by, team=held.team, state="succeeded")

        Lease = migrate_to(AFTER).get_model("runs", "RunLease")
        leases = dict(Lease.objects.values_list("run_id", "owner"))
        assert leases == {held.pk: "host-a:1:abc", early.pk: "host-b:2:def"} and ended.pk not in leases
        assert Lease.objects.get(run_id=held.pk).heartbeat_at == beat
        assert Lease.objects.get(run_id=early.pk).heartbeat_at == started

        Run = migrate_to(BEFORE).get_model("runs", "Run")
        assert Run.objects.get(pk=held.pk).supervisor == "host-a:1:abc"
        assert Run.objects.get(pk=held.pk).heartbeat_at == beat
