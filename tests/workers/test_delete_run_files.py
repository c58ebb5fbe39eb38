"""The worker's half of deleting a run: its directory and checkpoints leave the workers' disk once its row is gone."""
import pytest

from tests.factories import make_prompt_set
from webapp.runs.models import Run
from workers.tasks import delete_run_files

pytestmark = pytest.mark.django_db


@pytest.fixture
def runs_dir(settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    return settings.RUNS_DIR


def fill(folder):
    checkpoint = folder / "checkpoints" / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text("{}")
    (folder / "events.jsonl").write_text('{"type": "status"}\n')


def test_a_deleted_runs_directory_and_checkpoints_are_removed_and_its_neighbours_kept(api_client, user, runs_dir):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user,
                             state=Run.CANCELLED)
    kept = Run.objects.create(name="k", method="ttrl", prompt_set=run.prompt_set, max_steps=2, created_by=user)
    fill(run.run_dir)
    fill(kept.run_dir)
    assert api_client.delete(f"/api/runs/{run.pk}").status_code == 200
    assert delete_run_files(run.pk) is True
    assert not (runs_dir / str(run.pk)).exists()
    assert (kept.run_dir / "checkpoints" / "checkpoint-2" / "trainer_state.json").is_file()
    assert delete_run_files(run.pk) is False  # delivered twice: nothing left to do


def test_a_stored_run_keeps_its_files(user, runs_dir):
    run = Run.objects.create(name="r", method="ttrl", prompt_set=make_prompt_set(user), max_steps=2, created_by=user)
    fill(run.run_dir)
    assert delete_run_files(run.pk) is False and (run.run_dir / "events.jsonl").is_file()
