"""The pinned mlflow client, unmodified, against the live stack (DESIGN §4.8): a script logging as verl does
(MLFLOW_TRACKING_URI=http://HOST/mlflow, MLFLOW_TRACKING_TOKEN=<Evolab token>) makes a run in the user's team
whose entropy falls; entropy_collapse opens live on the run's socket, reaches the team's webhook and email;
another team's user gets MLflow's RESOURCE_DOES_NOT_EXIST from the client for everything of it."""
import json
import os
import subprocess
import sys

import pytest
from django.contrib.auth import get_user_model
from websockets.sync.client import connect

from tests.alerts.receiver import Receiver
from tests.e2e.helpers import Api
from tests.factories import make_team
from tests.waiting import wait_until
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Webhook
from webapp.external.models import ExternalRun

pytestmark = pytest.mark.e2e

# verl's own calls (verl/utils/tracking.py): set_experiment(project_name), start_run(run_name=experiment_name),
# log_params of the flattened config, log_metrics(sanitised names, step=global_steps) once per step
VERL_LIKE = r"""
import json, os, sys, time
import mlflow
mlflow.set_experiment("verl_grpo_gsm8k")
run = mlflow.start_run(run_name="qwen2.5-ttrl")
print(json.dumps({"run_id": run.info.run_id}), flush=True)
mlflow.log_params({"data/max_response_length": 512, "actor_rollout_ref/rollout/n": 8, "algorithm/adv_estimator": "grpo"})
for step in range(1, 13):
    mlflow.log_metrics({"actor/entropy": 1.2 * 0.7 ** step, "response_length/mean": 300.0 - 5 * step,
                        "critic/score/mean": 0.4 + 0.02 * step, "timing_s/step": 10.0,
                        "val-core/gsm8k/acc/mean_at_16": 0.5}, step=step)
    sys.stdin.readline() if step == 1 else time.sleep(0.05)  # the test watches the socket from step 1 on
client = mlflow.MlflowClient()
history = client.get_metric_history(run.info.run_id, "actor/entropy")
print(json.dumps({"history": [[m.step, m.value] for m in history]}), flush=True)
mlflow.end_run()
"""

OUTSIDER = r"""
import json, sys
import mlflow
from mlflow.exceptions import MlflowException
client = mlflow.MlflowClient()
answers = {}
for name, call in (("get_run", lambda: client.get_run(sys.argv[1])),
                   ("history", lambda: client.get_metric_history(sys.argv[1], "entropy")),
                   ("log", lambda: client.log_metric(sys.argv[1], "entropy", 9.0, step=99)),
                   ("experiment", lambda: client.get_experiment(sys.argv[2])),
                   ("by_name", lambda: client.get_experiment_by_name("verl_grpo_gsm8k"))):
    try:
        answers[name] = repr(call())
    except MlflowException as exc:
        answers[name] = exc.error_code
print(json.dumps(answers))
"""


def client_env(live_stack, token):
    return {**os.environ, "MLFLOW_TRACKING_URI": f"{live_stack.url}/mlflow", "MLFLOW_TRACKING_TOKEN": token,
            "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0"}


def test_a_run_logged_by_the_mlflow_client_collapses_and_its_team_is_alerted(live_stack, transactional_db):
    User = get_user_model()
    team = make_team("rl-team", alice="member")
    make_team("other-team", bob="member")
    alice, bob = User.objects.get(username="alice"), User.objects.get(username="bob")
    alice.email = "alice@example.org"
    alice.save()
    key = ApiToken.issue(alice)
    api = Api(live_stack.url, key)
    with Receiver() as receiver:
        Webhook.objects.create(team=team, url=receiver.url)
        script = subprocess.Popen([sys.executable, "-c", VERL_LIKE], env=client_env(live_stack, key),
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        first = script.stdout.readline()
        assert first.startswith("{"), first + script.stderr.read()
        run_id = json.loads(first)["run_id"]
        run = next(r for r in api.get("/runs")["runs"] if r["mlflow_run_id"] == run_id)
        assert run["source"] == "external" and run["team"] == team.pk and run["name"] == "qwen2.5-ttrl"
        origin = live_stack.url.replace("http", "ws")
        with connect(f"{origin}/ws/runs/{run['id']}/", additional_headers={"Authorization": f"Token {key}"},
                     open_timeout=10) as socket:
            script.stdin.write("go\n")
            script.stdin.flush()

            def collapse_alert():
                message = json.loads(socket.recv(timeout=30))
                return message if message["type"] == "alert" and message["rule"] == "entropy_collapse" else None

            alert = wait_until(collapse_alert, 60, every=0, what="entropy_collapse on the run's socket")
        out, err = script.communicate(timeout=60)
        assert script.returncode == 0, err
        assert alert is not None and alert["state"] == "open" and alert["run"] == run["id"]
        history = next(json.loads(line) for line in out.splitlines() if line.startswith('{"history"'))["history"]
        assert [s for s, _ in history] == list(range(1, 13)) and history[0][1] == pytest.approx(0.84)

        finished = api.wait_for(run["id"], lambda r: r["state"] == "succeeded", timeout=30)
        assert finished["hyperparameters"]["max_completion_length"] == 512
        metrics = api.get(f"/runs/{run['id']}/metrics")["metrics"]
        assert metrics["entropy"]["values"] == metrics["actor/entropy"]["values"] and len(metrics["entropy"]["steps"]) == 12
        assert "reward/mean" in metrics and "time/step" in metrics

        posts = wait_until(lambda: [p for p in receiver.received if p["body"]["alert"]["rule"] == "entropy_collapse"],
                           20, every=0.2, what="entropy_collapse at the team's webhook", last=lambda: receiver.received)
        assert "qwen2.5-ttrl" in posts[0]["body"]["text"]

        def outbox():
            return "".join(p.read_text() for p in live_stack.outbox.glob("*.log")) if live_stack.outbox.exists() else ""

        def the_alerts_mail():
            mails = outbox()
            return mails if "entropy_collapse" in mails and "qwen2.5-ttrl" in mails else ""

        mails = wait_until(the_alerts_mail, 20, every=0.2, what="the entropy_collapse email", last=outbox)
        assert "alice@example.org" in mails and "entropy_collapse" in mails

    # team isolation over MLflow's protocol, as the client sees it
    experiment_id = str(ExternalRun.objects.get(run_id=run["id"]).experiment_id)
    outsider = subprocess.run([sys.executable, "-c", OUTSIDER, run_id, experiment_id],
                              env=client_env(live_stack, ApiToken.issue(bob)), capture_output=True, text=True, timeout=120)
    assert outsider.returncode == 0, outsider.stderr
    assert json.loads(outsider.stdout.splitlines()[-1]) == {
        "get_run": "RESOURCE_DOES_NOT_EXIST", "history": "RESOURCE_DOES_NOT_EXIST", "log": "RESOURCE_DOES_NOT_EXIST",
        "experiment": "RESOURCE_DOES_NOT_EXIST", "by_name": "None"}
    assert api.get(f"/runs/{run['id']}/metrics?names=entropy")["metrics"]["entropy"]["steps"][-1] == 12


ASYNC_AND_RESUMED = r"""
import json, mlflow
mlflow.set_experiment("async")
with mlflow.start_run(run_name="async-resumed") as run:
    for step in range(1, 151):  # sent in parallel batches by the client's async logging queue
        mlflow.log_metrics({f"k{i}": step + i / 10 for i in range(5)}, step=step, synchronous=False)
    mlflow.flush_async_logging()
    for step in range(100, 111):  # a trainer resumed from its step-99 checkpoint logs those steps again
        mlflow.log_metric("k0", -step, step=step)  # asynchronous too: the variable makes it the default
    mlflow.flush_async_logging()
    client = mlflow.MlflowClient()
    print(json.dumps({"run_id": run.info.run_id,
                      "history": {f"k{i}": [[m.step, m.value] for m in client.get_metric_history(run.info.run_id, f"k{i}")]
                                  for i in range(5)}}))
"""


def test_asynchronous_logging_and_a_resumed_trainer_lose_no_point(live_stack, live_user):
    """The client's async logging sends batches in parallel, so a later step's batch may land before an earlier
    one's; 1-5% of points were refused ("must not go backwards") and kept client-side only. A resumed trainer that
    logs steps again died on the same refusal."""
    done = subprocess.run([sys.executable, "-c", ASYNC_AND_RESUMED], env={
        **client_env(live_stack, ApiToken.issue(live_user)), "MLFLOW_ENABLE_ASYNC_LOGGING": "true"},
        capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    # the client prints "View run ... at" lines as the run ends
    found = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    for i in range(5):
        kept = sorted(found["history"][f"k{i}"])
        expected = [[step, step + i / 10] for step in range(1, 151)]
        if i == 0:
            expected = sorted(expected + [[step, -step] for step in range(100, 111)])
        assert kept == expected, (f"k{i}: {len(kept)} points kept of {len(expected)}", sorted(set(map(tuple, expected)) - set(map(tuple, kept))), done.stderr[-4000:])
    run = ExternalRun.objects.get(run__mlflow_run_id=found["run_id"]).run
    from tests.factories import charts_of

    chart = charts_of(run)["k0"]
    assert chart["steps"] == list(range(1, 151)) and chart["values"][104] == -105  # the step as logged last


ARTIFACTS = r"""
import json, os, sys, tempfile
from pathlib import Path
import mlflow
client = mlflow.MlflowClient()
with mlflow.start_run(run_name="with-artifacts") as run:
    mlflow.log_text("lr: 1e-6\n", "config/notes.txt")
    mlflow.log_dict({"n_votes": 16}, "config/method.json")
    # verl/utils/tracking.py ValidationGenerationsLogger.log_generations_to_mlflow, as it writes and uploads
    with tempfile.TemporaryDirectory() as tmp_dir:
        path = Path(tmp_dir, "val_step10.json")
        path.write_text(json.dumps([{"input": "<|im_start|>user\nWhat is 2+3?<|im_end|>", "output": "\\boxed{5}",
                                     "score": 1.0}]))
        mlflow.log_artifact(str(path))
    answers = {
        "root": sorted(f.path for f in client.list_artifacts(run.info.run_id)),
        "config": sorted(f.path for f in client.list_artifacts(run.info.run_id, "config")),
        "text": mlflow.artifacts.load_text(f"runs:/{run.info.run_id}/config/notes.txt"),
        "dict": mlflow.artifacts.load_dict(f"runs:/{run.info.run_id}/config/method.json"),
        "run_id": run.info.run_id,
    }
print(json.dumps(answers))
"""


def test_the_clients_artifact_calls_keep_files_and_verls_validation_becomes_generations(live_stack, live_user):
    done = subprocess.run([sys.executable, "-c", ARTIFACTS], env=client_env(live_stack, ApiToken.issue(live_user)),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    assert found["root"] == ["config", "val_step10.json"]
    assert found["config"] == ["config/method.json", "config/notes.txt"]
    assert found["text"] == "lr: 1e-6\n" and found["dict"] == {"n_votes": 16}
    from webapp.external.models import EvalGeneration

    generation = EvalGeneration.objects.get(run__mlflow_run_id=found["run_id"])
    assert (generation.step, generation.answer, generation.score) == (10, "5", 1.0)
