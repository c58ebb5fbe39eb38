from pathlib import Path

import pytest

from tests.factories import event_log, make_prompt_set
from webapp.runs.models import Run
from webapp.runs.presets import SMALL_CPU, preset_values
from webapp.runs.ingestion import ingest_events

pytestmark = pytest.mark.django_db


@pytest.fixture
def prompt_set(user):
    return make_prompt_set(user)


@pytest.fixture
def no_enqueue(monkeypatch):
    """These tests check the API's validation and reads; the Celery round trip is
    covered by tests/e2e with a real worker."""
    sent = []
    monkeypatch.setattr("webapp.tasks.app.send_task", lambda name, args, queue, countdown=None, **retry: sent.append((args, queue)))
    return sent


def post_run(client, **body):
    return client.post("/api/runs", body, content_type="application/json")


def test_it_lists_methods_with_their_defaults(api_client):
    methods = {m["name"]: m for m in api_client.get("/api/methods").json()["methods"]}
    ttrl = {hp["name"]: hp for hp in methods["ttrl"]["hyperparameters"]}
    assert ttrl["n_votes"]["default"] == 64 and ttrl["n_train"]["default"] == 32


def test_it_lists_intuitor_and_empo_with_their_papers_defaults_and_where_they_come_from(api_client):
    methods = {m["name"]: m for m in api_client.get("/api/methods").json()["methods"]}
    for name, paper, group_size in (("intuitor", "2505.19590", 7), ("empo", "2504.05812", 16)):
        method = methods[name]
        assert method["label_free"] and not method["needs_references"] and paper in method["paper"]
        assert "§4" in method["defaults_source"]
        defaults = {hp["name"]: hp["default"] for hp in method["hyperparameters"]}
        assert defaults["n_votes"] == group_size == defaults["n_train"]


def test_it_queues_a_default_model_run_with_the_small_cpu_preset_the_form_preselects(
        api_client, prompt_set, no_enqueue, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        response = post_run(api_client, name="first", method="ttrl", prompt_set=prompt_set.pk)
    assert response.status_code == 201, response.content
    run = response.json()
    assert run["state"] == "queued" and run["queue"].endswith("cpu")
    small = preset_values("ttrl", SMALL_CPU)
    assert run["hyperparameters"] == small["hyperparameters"] and run["max_steps"] == small["max_steps"]
    assert no_enqueue == [([run["id"]], run["queue"])]


def test_it_queues_the_papers_defaults_when_the_paper_preset_is_asked_for(api_client, prompt_set, no_enqueue):
    run = post_run(api_client, name="p", method="ttrl", prompt_set=prompt_set.pk, preset="paper", max_steps=2).json()
    assert run["hyperparameters"]["n_votes"] == 64 and run["hyperparameters"]["max_completion_length"] == 12288


def test_a_gpu_run_or_another_model_starts_from_the_papers_settings(api_client, prompt_set, no_enqueue):
    on_gpu = post_run(api_client, name="g", method="ttrl", prompt_set=prompt_set.pk, gpus=1).json()
    other = post_run(api_client, name="o", method="ttrl", prompt_set=prompt_set.pk, model="qwen2.5-math-1.5b").json()
    assert on_gpu["hyperparameters"]["n_votes"] == 64 and other["hyperparameters"]["n_votes"] == 64


def test_the_clients_hyperparameters_and_steps_override_the_preset(api_client, prompt_set, no_enqueue):
    run = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, max_steps=3,
                   hyperparameters={"n_votes": 6, "temperature": 0.7}).json()
    assert run["max_steps"] == 3
    hp = run["hyperparameters"]
    assert (hp["n_votes"], hp["temperature"], hp["max_completion_length"]) == (6, 0.7, 96)


@pytest.mark.parametrize("preset", ["fast", "", 3])
def test_it_rejects_an_unknown_preset_naming_it(api_client, prompt_set, no_enqueue, preset):
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, preset=preset)
    assert response.status_code == 400 and response.json()["field"] == "preset"
    assert "small_cpu" in response.json()["error"]


def test_a_run_chooses_its_embedder_and_the_trainer_config_carries_its_window_and_pooling(api_client, prompt_set,
                                                                                          no_enqueue):
    # the embedder's folder reaches CONFIG.json through the worker: tests/workers/test_model_resolution.py
    response = post_run(api_client, name="long", method="evol_rl", prompt_set=prompt_set.pk,
                        embedding_model="qwen3-embedding-4b",
                        hyperparameters={"embedding_max_length": 16384, "embedding_pooling": "end"})
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["embedding_model"] == "qwen3-embedding-4b"
    run = Run.objects.get(pk=body["id"])
    config = run.trainer_config(Path("prompts.jsonl"))
    assert config["hyperparameters"]["embedding_max_length"] == 16384
    assert config["hyperparameters"]["embedding_pooling"] == "end"
    default = post_run(api_client, name="short", method="evol_rl", prompt_set=prompt_set.pk).json()
    assert default["embedding_model"] == ""  # the bundled all-MiniLM-L6-v2


def test_it_rejects_an_embedder_that_is_not_a_path(api_client, prompt_set, no_enqueue):
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, embedding_model=["a"])
    assert response.status_code == 400 and response.json()["field"] == "embedding_model"
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, embedding_model="x" * 501)
    assert response.status_code == 400 and response.json()["field"] == "embedding_model"
    assert not Run.objects.filter(name="x").exists()


def test_it_rejects_an_unknown_method(api_client, prompt_set, no_enqueue):
    response = post_run(api_client, name="x", method="nope", prompt_set=prompt_set.pk)
    assert response.status_code == 400 and response.json()["field"] == "method"
    assert "nope" in response.json()["error"]
    assert not Run.objects.exists()


def test_it_rejects_an_out_of_range_hyperparameter_naming_it(api_client, prompt_set, no_enqueue):
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, hyperparameters={"temperature": -1})
    assert response.status_code == 400 and response.json()["field"] == "temperature"
    assert not Run.objects.exists()


def test_it_rejects_more_trained_than_voted_rollouts(api_client, prompt_set, no_enqueue):
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, hyperparameters={"n_votes": 4, "n_train": 8})
    assert response.status_code == 400 and "n_train" in response.json()["error"]


def test_it_rejects_a_missing_prompt_set(api_client, no_enqueue):
    response = post_run(api_client, name="x", method="ttrl", prompt_set=999)
    assert response.status_code == 400 and response.json()["field"] == "prompt_set"


def test_it_refuses_a_key_that_is_no_launch_setting_naming_it_and_what_a_launch_takes(api_client, prompt_set,
                                                                                      no_enqueue):
    # a misspelt max_steps was dropped: the run trained the preset's length and nobody was told
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, max_step=5)
    body = response.json()
    assert response.status_code == 400 and body["field"] == "max_step"
    assert "'max_step' is not a launch setting" in body["error"] and "max_steps" in body["error"]
    assert not Run.objects.exists() and no_enqueue == []


def test_it_rejects_a_body_that_is_not_json(api_client):
    response = api_client.post("/api/runs", "{oops", content_type="application/json")
    assert response.status_code == 400 and "JSON" in response.json()["error"]


def test_it_cancels_a_queued_run_at_once(api_client, prompt_set, no_enqueue):
    run_id = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk).json()["id"]
    response = api_client.post(f"/api/runs/{run_id}/cancel")
    assert response.status_code == 200 and response.json()["state"] == "cancelled"


def test_it_resumes_a_cancelled_run_with_no_recorded_checkpoint_from_what_its_worker_finds(api_client, prompt_set,
                                                                                           no_enqueue):
    run_id = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk).json()["id"]
    api_client.post(f"/api/runs/{run_id}/cancel")
    response = api_client.post(f"/api/runs/{run_id}/resume")
    assert response.status_code == 200 and "no checkpoint is recorded" in response.json()["message"]


def test_it_clones_a_run_with_the_same_settings(api_client, prompt_set, no_enqueue):
    original = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, hyperparameters={"n_votes": 8, "n_train": 4}).json()
    clone = api_client.post(f"/api/runs/{original['id']}/clone").json()
    assert clone["id"] != original["id"] and clone["cloned_from"] == original["id"]
    assert clone["hyperparameters"] == original["hyperparameters"]


def test_it_serves_metrics_rollouts_and_groups_of_an_ingested_run(api_client, prompt_set, no_enqueue):
    run = Run.objects.get(pk=post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk).json()["id"])
    ingest_events(run, event_log(steps=2))
    metrics = api_client.get(f"/api/runs/{run.pk}/metrics?names=entropy,reward/mean").json()["metrics"]
    assert set(metrics) == {"entropy", "reward/mean"} and metrics["entropy"]["steps"] == [1, 2]

    rollouts = api_client.get(f"/api/runs/{run.pk}/rollouts?step=1").json()
    assert rollouts["steps"] == [1, 2] and [g["prompt_id"] for g in rollouts["groups"]] == ["p1", "p2"]
    assert rollouts["groups"][0]["rollouts"][1]["in_majority"] is True
    latest = api_client.get(f"/api/runs/{run.pk}/rollouts?prompt=p2").json()
    assert latest["step"] == 2 and [g["prompt_id"] for g in latest["groups"]] == ["p2"]

    group = api_client.get(f"/api/runs/{run.pk}/groups/2/p1").json()
    assert group["majority_answer"] == "5" and len(group["rollouts"]) == 4 and "text" in group["rollouts"][0]
    assert api_client.get(f"/api/runs/{run.pk}/groups/9/p1").status_code == 404


def test_it_answers_404_for_an_unknown_run(api_client):
    assert api_client.get("/api/runs/12345").status_code == 404
    assert api_client.post("/api/runs/12345/cancel").status_code == 404


def test_it_rejects_a_step_that_is_not_a_number(api_client, prompt_set, no_enqueue):
    run_id = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk).json()["id"]
    response = api_client.get(f"/api/runs/{run_id}/rollouts?step=abc")
    assert response.status_code == 400 and response.json()["field"] == "step"


def test_a_run_with_gpus_goes_to_the_gpu_queue(api_client, prompt_set, no_enqueue):
    run = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, gpus=2).json()
    assert run["gpus"] == 2 and run["queue"].endswith("gpu")


def test_a_custom_model_defaults_to_one_gpu(api_client, prompt_set, no_enqueue):
    run = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, model="Qwen3-4B").json()
    assert run["gpus"] == 1 and run["queue"].endswith("gpu")


def test_it_rejects_a_negative_gpu_count(api_client, prompt_set, no_enqueue):
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, gpus=-1)
    assert response.status_code == 400 and response.json()["field"] == "gpus"


def test_it_queues_a_run_of_two_nodes_with_its_slurm_options(api_client, prompt_set, no_enqueue):
    options = {"partition": "a100", "time_limit": "2-00:00:00", "sbatch": ["--constraint=ib"]}
    run = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, gpus=8, nodes=2,
                   engine_options=options).json()
    assert run["nodes"] == 2 and run["gpus"] == 8 and run["engine"] is None  # no worker has taken it yet
    assert Run.objects.get(pk=run["id"]).engine_options == options


@pytest.mark.parametrize("body, field", [
    ({"nodes": 0}, "nodes"),
    ({"engine_options": {"partition": "a100; reboot"}}, "engine_options.partition"),
    ({"engine_options": {"partition": "gpu\n"}}, "engine_options.partition"),
    ({"engine_options": {"sbatch": ["--output=/etc/passwd"]}}, "engine_options.sbatch"),
    ({"engine_options": {"time_limit": "soon"}}, "engine_options.time_limit"),
    ({"engine_options": ["--partition=a100"]}, "engine_options"),
])
def test_it_rejects_bad_nodes_or_slurm_options_naming_the_field(api_client, prompt_set, no_enqueue, body, field):
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk, **body)
    assert response.status_code == 400 and response.json()["field"] == field, response.content
    assert not Run.objects.exists()


# sbatch takes any unique prefix of an option's name: each of these was accepted (201), and sbatch read it as the
# option named beside it
@pytest.mark.parametrize("option, slurms", [
    ("--outp=/shared/other-team/train.log", "--output"), ("--open=truncate", "--open-mode"), ("--chdi=/tmp", "--chdir"),
    ("--export-file=/home/me/env", "--export-file"), ("--arr=0-999", "--array"), ("--job=victim", "--job-name"),
    ("--no-r", "--no-requeue"),
])
def test_it_refuses_an_abbreviation_of_a_slurm_option_a_run_may_not_set_naming_engine_options_sbatch(
        api_client, prompt_set, no_enqueue, option, slurms):
    response = post_run(api_client, name="x", method="ttrl", prompt_set=prompt_set.pk,
                        engine_options={"sbatch": ["--constraint=a100", option]})
    assert response.status_code == 400 and response.json()["field"] == "engine_options.sbatch", response.content
    assert option.split("=")[0] in response.json()["error"] and slurms in response.json()["error"]
    assert not Run.objects.exists()


def test_it_refuses_darl_on_a_set_without_labels_unless_the_majority_is_the_reference(api_client, user, no_enqueue):
    unlabelled = make_prompt_set(user, rows=[("a", "What is 1 + 1?", None)], name="plain")
    response = post_run(api_client, name="x", method="darl", prompt_set=unlabelled.pk)
    assert response.status_code == 400 and "use_majority_as_reference" in response.json()["error"]
    response = post_run(api_client, name="x", method="darl", prompt_set=unlabelled.pk,
                        hyperparameters={"use_majority_as_reference": True})
    assert response.status_code == 201
