"""`evolab sync verl` against the live stack (DESIGN §4.8): a dump folder written exactly as verl's
`RayPPOTrainer._dump_generations` writes it, followed while "training" goes on; the command killed mid-file and
started again, and the web server restarted mid-stream, lose nothing and store nothing twice; a worker
groups each step, reads its answers and held-out labels, and embeds its heatmaps, so the run has the health
signals, search, prompt history and exports of any run."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model

from scripts.stack import Stack, free_port
from tests.e2e.helpers import Api
from tests.factories import make_team
from tests.waiting import wait_until
from webapp.accounts.models import ApiToken

pytestmark = pytest.mark.e2e

PROMPTS, N = 4, 8  # prompts per step, rollouts per prompt (actor_rollout_ref.rollout.n)


def dump_generations(dump_path: Path, global_steps: int, inputs, outputs, gts, scores, reward_extra_infos_dict):
    """verl/trainer/ppo/ray_trainer.py::_dump_generations (verl main, 2026-01), the body as written there."""
    os.makedirs(dump_path, exist_ok=True)
    filename = os.path.join(dump_path, f"{global_steps}.jsonl")
    n = len(inputs)
    base_data = {"input": inputs, "output": outputs, "gts": gts, "score": scores, "step": [global_steps] * n}
    for k, v in reward_extra_infos_dict.items():
        if len(v) == n:
            base_data[k] = v
    lines = []
    for i in range(n):
        entry = {k: v[i] for k, v in base_data.items()}
        lines.append(json.dumps(entry, ensure_ascii=False))
    with open(filename, "w") as f:
        f.write("\n".join(lines) + "\n")


def train_step(dump_path: Path, step: int):
    """One step's batch as verl holds it: each prompt repeated n times, interleaved; its chat template decoded with
    skip_special_tokens (so the role words stay). The policy agrees more with itself as steps go on."""
    inputs, outputs, gts, scores, acc = [], [], [], [], []
    for p in range(PROMPTS):
        question = f"Natalia sold {p + 2} clips in April and twice as many in May. How many clips in total? ✓"
        truth = 3 * (p + 2)
        for i in range(N):
            answer = truth if i < min(N, 2 + step) else truth + i
            inputs.append(f"system\nPlease reason step by step.\nuser\n{question}\nassistant\n")
            outputs.append(f"Step by step: {p + 2} + {2 * (p + 2)} = {answer}. The answer is \\boxed{{{answer}}}.")
            gts.append(str(truth))
            scores.append(float(answer == truth))
            acc.append(answer == truth)
    dump_generations(dump_path, step, inputs, outputs, gts, scores, {"acc": acc})


def sync(url, token, *args):
    env = {**os.environ, "EVOLAB_URL": url, "EVOLAB_TOKEN": token}
    return subprocess.Popen([sys.executable, "-m", "evolab_client.cli", "sync", "verl", *args], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def read_until(process, words, timeout=60):
    """Lines of the process's output up to the first holding `words`."""
    seen = []

    def next_line_holds():
        line = process.stdout.readline()
        if not line:
            raise AssertionError(f"no {words!r} in: {''.join(seen)}")
        seen.append(line)
        return seen if words in line else None

    return wait_until(next_line_holds, timeout, every=0, what=f"{words!r} in the output", last=lambda: "".join(seen))


def every_rollout(api, run_id):
    found, cursor = [], None
    while True:
        page = api.get(f"/runs/{run_id}/rollouts/search", params={"limit": 1000, **({"cursor": cursor} if cursor else {})})
        found += page["results"]
        cursor = page["next_cursor"]
        if cursor is None:
            return found


def test_verl_dumps_reach_the_explorer_whole_across_a_killed_sync_and_a_web_server_restart(live_stack, transactional_db,
                                                                                          tmp_path):
    make_team("verl-team", ada="member")
    ada = get_user_model().objects.get(username="ada")
    token = ApiToken.issue(ada)
    dumps = tmp_path / "rollout_data"
    web = Stack(log_dir=tmp_path / "logs", quiet=True)
    web.env.update(live_stack.stack.env)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    api = Api(url, token)
    try:
        web.start_web(port)
        for step in (1, 2):  # started late: a backlog is there already
            train_step(dumps, step)
        first = sync(url, token, str(dumps), "--create", "qwen-grpo", "--batch", "10", "--poll", "0.2")
        created = read_until(first, "created run")
        run_id = int(created[-1].split("created run ")[1].split()[0])
        read_until(first, "step 2:")
        train_step(dumps, 3)
        read_until(first, "step 3:")  # a batch of step 3 stored: killed in the middle of its file
        first.send_signal(signal.SIGKILL)
        first.wait()
        state = json.loads((dumps / f".evolab-sync-{run_id}.json").read_text())
        assert 0 < state["files"]["3.jsonl"]["offset"] <= (dumps / "3.jsonl").stat().st_size

        train_step(dumps, 4)
        second = sync(url, token, str(dumps), "--run", str(run_id), "--batch", "10", "--poll", "0.2")
        read_until(second, "step 4:")
        web.stop()  # the web server goes away mid-stream (a deploy)
        train_step(dumps, 5)
        time.sleep(2)
        web.start_web(port)
        wait_until(lambda: len(every_rollout(api, run_id)) == 5 * PROMPTS * N, 120, every=0.5,
                   what="every rollout of 5 steps")
        second.send_signal(signal.SIGTERM)  # stopped as a process manager stops it (Ctrl-C does the same)
        assert second.wait(timeout=30) == 130
    finally:
        web.stop()
        for process in ("first", "second"):
            proc = locals().get(process)
            if proc is not None and proc.poll() is None:
                proc.kill()

    web.start_web(port)
    try:
        rollouts = every_rollout(api, run_id)
        keys = [(r["step"], r["prompt_id"], r["index"]) for r in rollouts]
        assert len(keys) == len(set(keys)) == 5 * PROMPTS * N  # nothing lost, nothing stored twice

        def last_step_groups():
            found = api.get(f"/runs/{run_id}/rollouts", params={"step": 5})["groups"]
            return found if len(found) == PROMPTS else None

        # the steps before the last are grouped as the next arrives; the last once it has been quiet
        groups = wait_until(last_step_groups, 120, every=0.5, what="step 5's groups")
        by_index = {r["index"]: r for r in groups[0]["rollouts"]}
        assert groups[0]["majority_answer"] is not None and by_index[0]["answer"] == groups[0]["majority_answer"]
        assert by_index[0]["reward"] == 1.0 and by_index[0]["extra"] == {"acc": True}
        assert by_index[0]["length"] == len(by_index[0]["text"])  # characters: verl's dumps hold no token counts

        def metrics_with_heatmaps():
            found = api.get(f"/runs/{run_id}/metrics")["metrics"]
            return found if len(found.get("similarity/mean", {}).get("steps", [])) == 5 else None

        metrics = wait_until(metrics_with_heatmaps, 240, every=0.5, what="the heatmaps of 5 steps")
        # the policy agrees more with itself as steps go on: majority up, distinct answers down
        assert metrics["majority_ratio"]["values"] == pytest.approx([3 / 8, 4 / 8, 5 / 8, 6 / 8, 7 / 8])
        assert metrics["unique_answers"]["values"][0] > metrics["unique_answers"]["values"][-1]
        assert metrics["label_accuracy"]["values"] == [1.0] * 5
        heatmap = api.get(f"/runs/{run_id}/groups/5/{groups[0]['prompt_id']}")["similarity"]
        assert len(heatmap) == N and heatmap[0][0] == 1.0

        prompt_id = groups[0]["prompt_id"]
        history = api.get(f"/runs/{run_id}/prompts/{prompt_id}/history")
        assert [row["step"] for row in history["history"]] == [1, 2, 3, 4, 5] and "Natalia" in history["prompt"]
        assert all(row["majority_correct"] for row in history["history"])
        by_prompt = api.get(f"/runs/{run_id}/rollouts/search", params={"prompt_text": "Natalia clips", "step_min": 5,
                                                                       "limit": 1000})
        assert len(by_prompt["results"]) == PROMPTS * N
        boxed = api.get(f"/runs/{run_id}/rollouts/search", params={"q": "answer boxed", "step_min": 5, "limit": 1000})
        assert len(boxed["results"]) == PROMPTS * N
        exported = api.session.get(f"{url}/api/runs/{run_id}/rollouts/export", params={"format": "jsonl"}, timeout=60)
        assert exported.status_code == 200 and len(exported.text.splitlines()) == 5 * PROMPTS * N
    finally:
        web.stop()


def test_the_sync_command_finds_the_run_verl_logs_to_by_its_experiment_and_name(live_stack, transactional_db, tmp_path):
    from evolab_client import Evolab

    make_team("verl-team", ada="member")
    token = ApiToken.issue(get_user_model().objects.get(username="ada"))
    dumps = tmp_path / "rollout_data"
    train_step(dumps, 1)
    waiting = sync(live_stack.url, token, str(dumps), "--run", "gsm8k-ttrl/qwen-7b", "--poll", "0.2")
    read_until(waiting, "waiting for run")
    # verl starts: Tracking's mlflow.set_experiment(project_name), start_run(run_name=experiment_name)
    run = Evolab(url=live_stack.url, token=token).create_run("qwen-7b", experiment="gsm8k-ttrl")
    read_until(waiting, "step 1:", timeout=30)
    waiting.send_signal(signal.SIGTERM)
    waiting.wait(timeout=30)
    api = Api(live_stack.url, token)
    assert wait_until(lambda: len(every_rollout(api, run.id)) == PROMPTS * N, 120, every=0.5, what="step 1's rollouts")
