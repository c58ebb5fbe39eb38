"""The engine's job moved off the run into EngineJob (runs/0024): a run a worker had taken keeps its engine, job id,
reason, log tail and attempts, and a run never taken gets no row."""
import pytest

from tests.factories import migrate_to, migrated_from, run_in

pytestmark = pytest.mark.django_db(transaction=True)

BEFORE = [("runs", "0023_run_lease")]
AFTER = [("runs", "0024_engine_job")]


def test_each_taken_run_gets_its_job_and_a_run_never_taken_gets_none():
    with migrated_from(BEFORE) as old:
        taken = run_in(old)
        Run = old.get_model("runs", "Run")
        Run.objects.filter(pk=taken.pk).update(engine="slurm", engine_job_id="4242", engine_reason="Priority",
                                               engine_log_tail="step 1\n", engine_attempt=2)
        never = Run.objects.create(name="never", method="ttrl", prompt_set=taken.prompt_set, max_steps=2,
                                   created_by=taken.created_by, team=taken.team)

        Job = migrate_to(AFTER).get_model("runs", "EngineJob")
        assert list(Job.objects.values_list("run_id", "engine", "job_id", "reason", "log_tail", "attempt")) == [
            (taken.pk, "slurm", "4242", "Priority", "step 1\n", 2)]
        assert not Job.objects.filter(run_id=never.pk).exists()

        Run = migrate_to(BEFORE).get_model("runs", "Run")
        assert Run.objects.filter(pk=taken.pk).values_list("engine", "engine_job_id", "engine_attempt").get() == (
            "slurm", "4242", 2)
