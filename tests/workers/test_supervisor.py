"""The supervisor in-process, with the real trainer as its child."""
import pytest

from tests.factories import make_prompt_set
from webapp.runs.models import Run
from workers.supervisor import supervise

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.trainer]


@pytest.fixture(autouse=True)
def own_runs_dir(settings, tmp_path):
    # Run ids restart when a transactional test flushes SQLite; a run directory left by an
    # earlier test under the same id must not be mistaken for this run's.
    settings.RUNS_DIR = tmp_path / "runs"


def make_run(user, **fields):
    defaults = dict(name="r", method="ttrl", max_steps=1, created_by=user,
                    hyperparameters={"n_votes": 8, "n_train": 4, "prompts_per_step": 2, "max_completion_length": 32})
    return Run.objects.create(prompt_set=make_prompt_set(user), **{**defaults, **fields})


def test_a_trainer_that_refuses_its_config_fails_the_run_with_its_message(user, tmp_path, settings):
    settings.MODEL_ROOTS = [tmp_path / "models"]
    (tmp_path / "models" / "no-weights-model").mkdir(parents=True)  # a folder the worker finds, the trainer refuses
    run = make_run(user, model="no-weights-model")
    assert supervise(run.pk) == Run.FAILED
    run.refresh_from_db()
    assert run.exit_code not in (0, None)
    assert "no-weights-model" in run.message and "has no config.json" in run.message
    assert run.finished_at is not None


def test_it_does_nothing_for_a_run_that_is_not_queued(user):
    run = make_run(user, state=Run.SUCCEEDED)
    assert supervise(run.pk) is None
    run.refresh_from_db()
    assert run.state == Run.SUCCEEDED


def test_a_run_cancelled_before_a_worker_took_it_never_starts(user):
    run = make_run(user, cancel_requested=True)
    assert supervise(run.pk) is None
    run.refresh_from_db()
    assert run.state == Run.CANCELLED and not run.run_dir.exists()


def test_it_writes_the_prompts_with_held_out_labels_and_the_trainer_config(user, tmp_path):
    import json

    from workers.run_io import prepare_run_dir

    run = make_run(user)
    config = json.loads(prepare_run_dir(run).read_text())
    # Exactly DESIGN §4.1's keys: the trainer refuses any other.
    assert set(config) == {"method", "model", "prompts", "eval_prompts", "embedding_model", "max_steps", "seed", "hyperparameters"}
    assert config["method"] == "ttrl" and config["max_steps"] == 1 and config["model"] == "default"
    rows = [json.loads(line) for line in open(config["prompts"])]
    assert rows == [{"id": "p1", "prompt": "What is 2 + 3?", "label": "5"}, {"id": "p2", "prompt": "What is 7 - 4?", "label": "3"}]


def test_it_launches_the_trainer_directly_for_one_gpu_and_under_accelerate_for_more(user):
    from workers.engines.local import LocalTrainer
    from workers.supervisor import job_spec

    one_run = make_run(user, gpus=1)
    one = LocalTrainer.command(job_spec(one_run, "me", 1, resume=False))
    assert one[1:5] == ["-m", "rl.train", "--config", str(one_run.run_dir / "config.json")]
    four = LocalTrainer.command(job_spec(make_run(user, gpus=4), "me", 1, resume=True))
    assert "accelerate.commands.launch" in four and four[four.index("--num_processes") + 1] == "4"
    assert four[-1] == "--resume"


def test_only_a_method_that_needs_references_receives_the_labels_as_references(user):
    import json

    from workers.run_io import prepare_run_dir

    cases = (("ttrl", {}, False), ("darl", {}, True), ("darl", {"use_majority_as_reference": True}, False))
    for method, hyperparameters, expected in cases:
        run = make_run(user, method=method, hyperparameters=hyperparameters)
        config = json.loads(prepare_run_dir(run).read_text())
        rows = [json.loads(line) for line in open(config["prompts"])]
        assert all(("reference" in row) is expected for row in rows), method
        if expected:
            assert [row["reference"] for row in rows] == ["5", "3"]
