"""The worker's half of model names (webapp/runs/model_names.py): a run's `model` and `embedding_model` become
folders under the model roots, or a run's checkpoint, in the trainer's CONFIG.json; a name with no folder fails the
run with the web's sentence before anything is written or started."""
import json

import pytest

from tests.factories import make_prompt_set
from webapp.runs.model_names import ModelNameError
from webapp.runs.models import Run
from workers.run_io import prepare_run_dir
from workers.supervisor import supervise

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(autouse=True)
def roots(settings, tmp_path):
    settings.RUNS_DIR = tmp_path / "runs"
    settings.MODEL_ROOTS = [tmp_path / "fast", tmp_path / "shared"]
    for folder in ("fast/Qwen/Qwen3-4B-Base", "shared/Qwen/Qwen3-4B-Base", "shared/Qwen/Qwen3-8B", "shared/minilm-long",
                   "outside-the-roots"):
        (tmp_path / folder).mkdir(parents=True)
    return tmp_path


def make_run(user, **fields):
    defaults = dict(name="r", method="ttrl", max_steps=1, created_by=user, hyperparameters={"n_votes": 8, "n_train": 4})
    return Run.objects.create(prompt_set=make_prompt_set(user), **{**defaults, **fields})


def test_a_name_becomes_its_folder_in_the_first_root_that_has_it(user, roots):
    config = json.loads(prepare_run_dir(make_run(user, model="Qwen/Qwen3-4B-Base")).read_text())
    assert config["model"] == str(roots / "fast/Qwen/Qwen3-4B-Base") and config["embedding_model"] is None
    config = json.loads(prepare_run_dir(make_run(user, model="Qwen/Qwen3-8B", embedding_model="minilm-long")).read_text())
    assert config["model"] == str(roots / "shared/Qwen/Qwen3-8B")
    assert config["embedding_model"] == str(roots / "shared/minilm-long")


def test_a_checkpoint_name_becomes_that_runs_last_complete_checkpoint(user, roots):
    earlier = make_run(user, state=Run.SUCCEEDED)
    for step, complete in ((2, True), (4, True), (6, False)):  # 6: cut off while it was written
        folder = earlier.run_dir / "checkpoints" / f"checkpoint-{step}"
        folder.mkdir(parents=True)
        if complete:
            (folder / "trainer_state.json").write_text("{}")
    config = json.loads(prepare_run_dir(make_run(user, model=f"run:{earlier.pk}")).read_text())
    assert config["model"] == str(earlier.run_dir / "checkpoints" / "checkpoint-4")
    config = json.loads(prepare_run_dir(make_run(user, model=f"run:{earlier.pk}/checkpoint-2")).read_text())
    assert config["model"] == str(earlier.run_dir / "checkpoints" / "checkpoint-2")
    with pytest.raises(ModelNameError):
        prepare_run_dir(make_run(user, model=f"run:{earlier.pk}/checkpoint-6"))


@pytest.mark.parametrize("field, value", [
    ("model", "Qwen/Qwen3-70B"),  # in no root
    ("model", "run:999"),  # no such run here
    ("model", "PLACEHOLDER/outside-the-roots"),  # a path stored before names were checked
    ("embedding_model", "qwen3-embedding-4b"),
])
def test_a_name_with_no_folder_fails_the_run_with_the_webs_sentence_before_anything_starts(user, roots, field, value):
    value = value.replace("PLACEHOLDER", str(roots))
    run = make_run(user, **{field: value})
    assert supervise(run.pk) == Run.FAILED
    run.refresh_from_db()
    assert run.message == ModelNameError(value, field).run_message == f"{field}: {ModelNameError(value, field)}"
    assert not (run.run_dir / "config.json").exists() and not (run.run_dir / "prompts.jsonl").exists()
    assert not (run.run_dir / "stderr.log").exists()  # no trainer was started
