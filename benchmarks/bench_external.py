"""Runs trained elsewhere (issue 20), side by side in one run:

1. The MLflow client's own workload (benchmarks/mlflow_client_workload.py: log_batch of 30 metrics per step,
   1,000 steps, then get_metric_history) against an MLflow tracking server and against Evolab's MLflow protocol,
   both on the same PostgreSQL, driven by the same pinned client (.venv-bench). Goals: Evolab at least 5× faster
   logging and 10× faster reading the history, the read judged as the REST call it is (the client's own turning
   of 1,000 metrics into protobuf messages, ~8 ms here, is the same whichever server answers; it is reported too),
   with a 10,000-point history for scale.
2. verl's rollout dumps (200 steps × 512 rollouts of ~2 KB, 8 prompts × 64 as the papers run) sent by
   `evolab sync verl --once` into a run, until every rollout is grouped and searchable in the explorer (a worker
   on the external queue groups them). Goal: at least 5,000 rollouts/s end to end. The similarity heatmaps follow
   behind (embeddings: slow on a CPU); their rate is reported, without a goal.

Needs PostgreSQL (BENCH_POSTGRES), Redis (REDIS_URL) and .venv-bench (`make bench`). BENCH_QUICK=1: a tenth.
Exits non-zero when a goal is missed.
"""
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_data_plane import (MLFLOW_PYTHON, QUICK, REDIS, ROOT, django_setup, free_port, postgres_problem,
                              recreate_database, size, texts, wait_for_port)

STEPS, METRICS = size(1000), 30
DUMP_STEPS, PROMPTS, GROUP = size(200), 8, 64
GOALS = {"log": 5.0, "history": 10.0, "rollouts_per_s": 5000.0}


def write_dumps(folder: Path, pool: list[str]) -> int:
    """verl's _dump_generations' files: {step}.jsonl, one line per rollout, a prompt's n rollouts in a row."""
    import random

    rng = random.Random(3)
    folder.mkdir(parents=True, exist_ok=True)
    count = 0
    for step in range(1, DUMP_STEPS + 1):
        lines = []
        for p in range(PROMPTS):
            prompt = f"system\nPlease reason step by step.\nuser\nProblem {p}: what is {p} times {p + 3}?\nassistant\n"
            for i in range(GROUP):
                text = pool[(step * PROMPTS * GROUP + p * GROUP + i) % len(pool)]
                lines.append(json.dumps({"input": prompt, "output": text, "gts": str(p * (p + 3)),
                                         "score": float(rng.random() < 0.5), "step": step, "acc": rng.random() < 0.5},
                                        ensure_ascii=False))
                count += 1
        (folder / f"{step}.jsonl").write_text("\n".join(lines) + "\n")
    return count


def _cpu() -> dict:
    """CPU seconds so far of this machine's processes by role (/proc): where an end-to-end second goes."""
    found = {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        role = next((r for key, r in (("postgres", "postgres"), ("daphne", "web"), ("celery", "worker"),
                                      ("redis", "redis")) if key in command), None)
        if role:
            found[pid] = (role, (int(fields[11]) + int(fields[12])) / tick)
    return found


def _children_cpu() -> float:
    usage = os.times()
    return usage.children_user + usage.children_system


def _cpu_spent(before: dict, sync_cpu: float) -> dict:
    spent = {"sync command": sync_cpu - before.get("children", 0.0)}
    for pid, (role, seconds) in _cpu().items():
        spent[role] = spent.get(role, 0.0) + seconds - before.get(pid, (role, 0.0))[1]
    return spent


def main() -> int:
    problem = postgres_problem("bench_external")
    if problem:
        print(problem)
        return 2
    if not MLFLOW_PYTHON.exists():
        print("bench_external needs .venv-bench with MLflow: run `make bench`")
        return 2
    evolab_url, mlflow_url = recreate_database("evolab_bench_ext"), recreate_database("mlflow_bench_ext")
    user, _, token = django_setup(evolab_url)
    tmp = Path(tempfile.mkdtemp(prefix="evolab-bench-ext-"))
    procs = []
    missed = []
    try:
        mlflow_port, web_port = free_port(), free_port()
        procs.append(subprocess.Popen(
            [str(MLFLOW_PYTHON), "-m", "mlflow", "server", "--backend-store-uri",
             mlflow_url.replace("postgres://", "postgresql://"), "--artifacts-destination", str(tmp / "mlartifacts"),
             "--host", "127.0.0.1", "--port", str(mlflow_port)],
            stdout=(tmp / "mlflow.log").open("w"), stderr=subprocess.STDOUT, cwd=tmp))
        env = {**os.environ, "DATABASE_URL": evolab_url, "REDIS_URL": REDIS, "EVOLAB_DATA_DIR": str(tmp / "data"),
               "EVOLAB_QUEUE_PREFIX": "bench-ext-", "EVOLAB_CHANNEL_PREFIX": "evolab-bench-ext", "HF_HUB_OFFLINE": "1"}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(web_port), "webapp.asgi:application"],
            stdout=(tmp / "daphne.log").open("w"), stderr=subprocess.STDOUT, cwd=ROOT, env=env))
        # the grouping worker; the heatmaps' embeddings are measured after it, by a worker of their own
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "workers.celery", "worker", "-Q", "bench-ext-external", "--pool",
             "threads", "-c", "2", "--loglevel", "WARNING", "--without-gossip", "--without-mingle", "-n", "bench-ext@%h"],
            stdout=(tmp / "worker.log").open("w"), stderr=subprocess.STDOUT, cwd=ROOT, env=env))
        wait_for_port(mlflow_port, procs[0], "mlflow server")
        wait_for_port(web_port, procs[1], "daphne")

        spec = json.dumps({"steps": STEPS, "metrics": METRICS, "repeats": 20, "long_points": size(10_000)})
        results = {}
        for side, uri in (("mlflow", f"http://127.0.0.1:{mlflow_port}"), ("evolab", f"http://127.0.0.1:{web_port}/mlflow")):
            done = subprocess.run([str(MLFLOW_PYTHON), str(ROOT / "benchmarks" / "mlflow_client_workload.py"), uri, spec],
                                  capture_output=True, text=True, cwd=tmp,
                                  env={**os.environ, "MLFLOW_TRACKING_TOKEN": token})
            if done.returncode != 0:
                print(done.stderr[-3000:])
                return 1
            results[side] = json.loads(done.stdout.strip().splitlines()[-1])
        ml, ev = results["mlflow"], results["evolab"]
        log_ratio = ml["log_total_s"] / ev["log_total_s"]
        read_ratio = ml["history_rest_median_s"] / ev["history_rest_median_s"]
        print(f"the MLflow client, {STEPS:,} steps × {METRICS} metrics (log_batch a step), then get_metric_history")
        print(f"{'':34} {'Evolab':>12} {'MLflow':>12} {'ratio':>8}  goal")
        for label, ours, theirs, ratio, goal in (
                ("log_batch, all steps", f"{ev['log_total_s']:.2f} s", f"{ml['log_total_s']:.2f} s", log_ratio, "log"),
                ("log_batch, median call", f"{ev['log_median_s'] * 1e3:.2f} ms", f"{ml['log_median_s'] * 1e3:.2f} ms",
                 ml["log_median_s"] / ev["log_median_s"], None),
                ("log_batch, p95 call", f"{ev['log_p95_s'] * 1e3:.2f} ms", f"{ml['log_p95_s'] * 1e3:.2f} ms",
                 ml["log_p95_s"] / ev["log_p95_s"], None),
                (f"history, the REST call ({STEPS:,} points)", f"{ev['history_rest_median_s'] * 1e3:.2f} ms",
                 f"{ml['history_rest_median_s'] * 1e3:.2f} ms", read_ratio, "history"),
                ("history, client's get_metric_history", f"{ev['history_median_s'] * 1e3:.2f} ms",
                 f"{ml['history_median_s'] * 1e3:.2f} ms", ml["history_median_s"] / ev["history_median_s"], None),
                (f"history, the REST call ({size(10_000):,} points)", f"{ev['long_rest_median_s'] * 1e3:.2f} ms",
                 f"{ml['long_rest_median_s'] * 1e3:.2f} ms", ml["long_rest_median_s"] / ev["long_rest_median_s"], None)):
            met = goal is None or ratio >= GOALS[goal]
            if not met:
                missed.append(label)
            print(f"{label:34} {ours:>12} {theirs:>12} {ratio:>7.1f}×  "
                  f"{'≥ %g×' % GOALS[goal] if goal else '':6} {('met' if met else 'MISSED') if goal else ''}", flush=True)

        def embeddings_worker():
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "celery", "-A", "workers.celery", "worker", "-Q", "bench-ext-embeddings", "--pool",
                 "threads", "-c", "1", "--loglevel", "WARNING", "--without-gossip", "--without-mingle",
                 "-n", "bench-ext-embed@%h"],
                stdout=(tmp / "embed-worker.log").open("w"), stderr=subprocess.STDOUT, cwd=ROOT, env=env))

        missed += verl_sync(tmp, user, token, web_port, env, embeddings_worker)
        if missed:
            print("missed: " + "; ".join(missed))
            return 1
        print("every goal met")
        return 0
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()


def verl_sync(tmp: Path, user, token: str, web_port: int, env: dict, embeddings_worker) -> list[str]:
    import random

    from webapp.external.models import PendingRollout
    from webapp.runs.models import Group, Rollout, Run

    pool = texts(1024, random.Random(0))
    folder = tmp / "rollout_data"
    total = write_dumps(folder, pool)
    size_mb = sum(p.stat().st_size for p in folder.glob("*.jsonl")) / 1e6
    client_env = {**env, "EVOLAB_URL": f"http://127.0.0.1:{web_port}", "EVOLAB_TOKEN": token}
    cpu_before = {**_cpu(), "children": _children_cpu()}
    started = time.perf_counter()
    sync = subprocess.run([sys.executable, "-m", "evolab_client.cli", "sync", "verl", str(folder), "--create", "verl-bench",
                           "--once"], capture_output=True, text=True, env=client_env, cwd=ROOT)
    sent = time.perf_counter() - started
    if sync.returncode != 0:
        print(sync.stdout[-2000:], sync.stderr[-2000:])
        return ["verl sync"]
    run = Run.objects.filter(name="verl-bench").latest("pk")
    deadline = time.monotonic() + 1800
    while time.monotonic() < deadline:
        if not PendingRollout.objects.filter(run=run).exists() and Rollout.objects.filter(run=run).count() == total:
            break
        time.sleep(0.2)
    grouped = time.perf_counter() - started
    cpu = _cpu_spent(cpu_before, sync_cpu=_children_cpu())
    rate = total / grouped
    searchable = Rollout.objects.filter(run=run, superseded=False).count()
    met = rate >= GOALS["rollouts_per_s"] and searchable == total
    print(f"\nverl dumps, {DUMP_STEPS} steps × {PROMPTS * GROUP} rollouts ({total:,} rollouts, {size_mb:.0f} MB), "
          f"evolab sync verl --once")
    print(f"  sent (the command's run)            {sent:7.1f} s  {total / sent:9,.0f} rollouts/s")
    print(f"  grouped and searchable (end to end) {grouped:7.1f} s  {rate:9,.0f} rollouts/s  ≥ 5,000/s "
          f"{'met' if met else 'MISSED'}")
    print("  CPU seconds meanwhile: " + ", ".join(f"{k} {v:.1f}" for k, v in sorted(cpu.items())))
    # the heatmaps, on a queue of their own (a GPU host's in a deployment): measured alone, for a while
    embeddings_worker()
    budget = 120 if not QUICK else 40
    first = None
    heat_started = time.monotonic()
    while time.monotonic() < heat_started + budget:
        done = Group.objects.filter(run=run, similarity__isnull=False).count()
        if done and first is None:
            first = (time.monotonic(), done)  # the worker has loaded its model
        if done == DUMP_STEPS * PROMPTS:
            break
        time.sleep(1)
    done = Group.objects.filter(run=run, similarity__isnull=False).count()
    if first is not None and done > first[1]:
        rate = (done - first[1]) * GROUP / (time.monotonic() - first[0])
        print(f"  heatmaps (MiniLM on this CPU, its own worker): {rate:,.0f} rollouts/s embedded "
              f"({done} of {DUMP_STEPS * PROMPTS} groups after {time.monotonic() - heat_started:.0f} s)")
    else:
        print(f"  heatmaps: {done} groups embedded in {budget} s")
    return [] if met else ["verl sync end to end"]


if __name__ == "__main__":
    sys.exit(main())
