"""Evolab's data plane against an MLflow tracking server on the same PostgreSQL (issue 9).

Both sides run in this one process's lifetime on this machine, so every figure is a ratio measured
side by side: metric ingest one step per call (how the supervisor polls a live run) and a whole log
at once (a restarted supervisor), rollout ingest (G = 64, ~2 KB texts; MLflow keeps a text as an
artifact, one log_text each), one 2,000- and one 10,000-point series read over HTTP, and the bytes
each stores per metric point. Then the scale curve: ingest rate and read latency of Evolab when a
run already holds 10k, 100k and 1M points, and 10k, 100k and 1M rollouts.

Needs PostgreSQL (BENCH_POSTGRES, default postgres://postgres@127.0.0.1:5432: it creates and drops
the databases evolab_bench and mlflow_bench), Redis (REDIS_URL, default db 7 of 127.0.0.1:6379) and
.venv-bench with MLflow (`make bench` builds it from benchmarks/requirements-mlflow.txt).
BENCH_QUICK=1 runs every measurement at a tenth of its size (a smoke run: the goals still print).
Exits non-zero when a goal is missed.
"""
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PG = os.environ.get("BENCH_POSTGRES", "postgres://postgres@127.0.0.1:5432").rstrip("/")
REDIS = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/7")
MLFLOW_PYTHON = ROOT / ".venv-bench" / "bin" / "python"
QUICK = os.environ.get("BENCH_QUICK") == "1"
# the development SECRET_KEY is allowed in the benchmarks (webapp/settings.py); run directly too
os.environ.setdefault("EVOLAB_DEV", "1")


def size(n: int) -> int:
    return max(1, n // 10) if QUICK else n


METRICS_PER_STEP = 30  # a real step logs about this many (DESIGN §5 names, the method's own, timings)
# Real names first, so the alert rules judge what they would in a run; then fillers up to 30.
REAL_NAMES = ["entropy", "response_length/mean", "response_length/min", "response_length/max", "reward/mean",
              "reward/std", "majority_ratio", "unique_answers", "similarity/mean", "label_accuracy", "loss", "kl",
              "grad_norm", "learning_rate", "clip_ratio", "time/generation", "time/reward", "time/step"]
NAMES = REAL_NAMES + [f"extra/m{i:02d}" for i in range(METRICS_PER_STEP - len(REAL_NAMES))]
LEVELS = {"entropy": 0.8, "response_length/mean": 600.0, "response_length/min": 200.0, "response_length/max": 1500.0,
          "majority_ratio": 0.5, "unique_answers": 6.0, "similarity/mean": 0.4, "label_accuracy": 0.5,
          "learning_rate": 1e-6}
GOALS = {  # (measurement, goal, met when) of the issue's table
    "live": 10.0, "bulk": 10.0, "rollouts": 30.0, "read2000_ms": 10.0, "read10000_ms": 15.0, "bytes": 80.0,
}
WORDS = ("the answer is so we add then multiply each side by two and check that step again because "
         "first second third sum total value equation solve compute therefore hence result boxed").split()


def texts(count: int, rng: random.Random, chars: int = 2000) -> list[str]:
    out = []
    for _ in range(count):
        words = []
        while sum(len(w) + 1 for w in words) < chars:
            words.append(rng.choice(WORDS) if rng.random() < 0.8 else str(rng.randint(0, 9999)))
        out.append(" ".join(words)[:chars] + f" \\boxed{{{rng.randint(0, 99)}}}")
    return out


# --- setup ------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for_port(port: int, process: subprocess.Popen, what: str, timeout: float = 120.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"{what} exited with {process.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"{what} did not listen on port {port} within {timeout:.0f} s")


def recreate_database(name: str) -> str:
    import psycopg

    with psycopg.connect(f"{PG}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        conn.execute(f"CREATE DATABASE {name}")
    return f"{PG}/{name}"


def relation_bytes(url: str, tables: list[str]) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        return sum(conn.execute("SELECT pg_total_relation_size(%s)", [t]).fetchone()[0] for t in tables)


def django_setup(database_url: str):
    os.environ.update(DATABASE_URL=database_url, REDIS_URL=REDIS, DJANGO_SETTINGS_MODULE="webapp.settings",
                      HF_HUB_OFFLINE="1", EVOLAB_CHANNEL_PREFIX="evolab-bench")
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0)
    from django.contrib.auth import get_user_model

    from webapp.accounts.models import ApiToken, Membership, Team
    from webapp.prompts.models import PromptSet
    from webapp.prompts.parsing import ParsedPromptSet, PromptRow

    user = get_user_model().objects.create(username="bench")
    team = Team.objects.create(name="bench")
    Membership.objects.create(team=team, user=user, role=Membership.ADMIN)
    rows = [PromptRow(id=f"p{i}", prompt=f"What is {i} + {i}?", label=None, position=i + 1) for i in range(8)]
    prompt_set = PromptSet.create_from_parsed(name="bench", owner=user, team=team, filename="bench.json",
                                              parsed=ParsedPromptSet(rows=rows, format="json"))
    return user, prompt_set, ApiToken.issue(user)


def new_run(user, prompt_set, name: str, method: str = "ttrl"):
    from webapp.runs.models import Run

    return Run.objects.create(name=name, method=method, prompt_set=prompt_set, max_steps=10**6, created_by=user,
                              state=Run.RUNNING, hyperparameters={"max_completion_length": 4096})


# --- the events a trainer writes ---------------------------------------------------------------------


class Log:
    """A trainer's event stream for one run: seq and time grow as rl.events writes them."""

    def __init__(self):
        self.seq, self.rng = 0, random.Random(1)

    def _event(self, **event) -> dict:
        event = {"seq": self.seq, "time": 1.7e9 + self.seq * 0.01, **event}
        self.seq += 1
        return event

    def metrics(self, step: int) -> dict:
        # stationary noise around fixed levels: a healthy run, so no collapse alert opens and closes
        return self._event(type="metrics", step=step,
                           values={n: LEVELS.get(n, 1.0) * (0.95 + 0.1 * self.rng.random()) for n in NAMES})

    def groups(self, step: int, pool: list[str], prompts: int = 8, g: int = 64) -> list[dict]:
        out = []
        for p in range(prompts):
            first = step * prompts * g + p * g
            # rewards 0/1 but for one rollout in 1,000 at 0.25 (a rare reward range to filter on); EVOL-RL's
            # novelty and mean similarity as extras
            rollouts = [{"index": i, "text": pool[(first + i) % len(pool)], "answer": str(i % 3),
                         "valid": True, "in_majority": i % 3 == 0,
                         "reward": 0.25 if (first + i) % 1000 == 7 else float(i % 3 == 0),
                         "advantage": 0.5 if i % 3 == 0 else -0.25, "length": 700, "used_for_training": True,
                         "entropy": 0.4, "extra": {"novelty": 0.1 * (i % 10),
                                                   "mean_similarity": 0.001 * ((first + 13 * i) % 997)}}
                        for i in range(g)]
            out.append(self._event(type="group", step=step, prompt_id=f"p{p}", majority_answer="0",
                                   similarity=None, rollouts=rollouts))
        return out


def write_log(path: Path, events) -> None:
    with path.open("w") as f:
        for e in events:
            f.write(json.dumps(e) + "\n")


# --- Evolab measurements -------------------------------------------------------------------------------


def ingest_one_step_per_call(run, log: Log, first_step: int, steps: int) -> float:
    from webapp.runs.ingestion import ingest_events

    events = [log.metrics(s) for s in range(first_step, first_step + steps)]
    started = time.perf_counter()
    for e in events:
        ingest_events(run, [e])
    return steps * len(NAMES) / (time.perf_counter() - started)


def ingest_whole_log(run, log: Log, first_step: int, steps: int, tmp: Path) -> float:
    """As a restarted supervisor does: EventTail's bounded batches of the log file, one transaction each."""
    from webapp.runs.ingestion import ingest_events
    from workers.event_tail import EventTail

    path = tmp / f"log-{run.pk}-{first_step}.jsonl"
    write_log(path, (log.metrics(s) for s in range(first_step, first_step + steps)))
    started = time.perf_counter()
    for batch in EventTail(path).batches():
        ingest_events(run, batch)
    elapsed = time.perf_counter() - started
    path.unlink()
    return steps * len(NAMES) / elapsed


def ingest_rollouts(run, log: Log, first_step: int, steps: int, pool: list[str]) -> float:
    """One call per step, each the step's 8 groups of 64 rollouts (a live EVOL-RL run's poll)."""
    from webapp.runs.ingestion import ingest_events

    batches = [log.groups(s, pool) for s in range(first_step, first_step + steps)]
    started = time.perf_counter()
    for batch in batches:
        ingest_events(run, batch)
    return sum(len(e["rollouts"]) for b in batches for e in b) / (time.perf_counter() - started)


def read_times(session, url: str, repeats: int, check=None, parse=lambda response: response.json()) -> list[float]:
    """Seconds of each of `repeats` reads of url, its body parsed included; `check` is given one parsed body."""
    body = parse(session.get(url))
    if check:
        check(body)
    timings = []
    for _ in range(repeats):
        started = time.perf_counter()
        parse(session.get(url))
        timings.append(time.perf_counter() - started)
    return timings


def read_median(session, url: str, repeats: int, check=None) -> float:
    return statistics.median(read_times(session, url, repeats, check))


def series_length_is(name: str, n: int):
    def check(body):
        got = len(body["metrics"][name]["steps"])
        assert got == n, f"{name}: {got} points read, {n} expected"
    return check


# --- the run ---------------------------------------------------------------------------------------


def postgres_problem(script: str) -> str | None:
    """Why the benchmark cannot reach PostgreSQL, or None."""
    try:
        import psycopg

        psycopg.connect(f"{PG}/postgres").close()
    except Exception as exc:  # noqa: BLE001 - any reason PostgreSQL is unreachable
        return f"{script} needs PostgreSQL at {PG} (set BENCH_POSTGRES): {exc}"
    return None


def main() -> int:
    problem = postgres_problem("bench_data_plane")
    if problem:
        print(problem)
        return 2
    if not MLFLOW_PYTHON.exists():
        print("bench_data_plane needs .venv-bench with MLflow: run `make bench`")
        return 2
    evolab_url, mlflow_url = recreate_database("evolab_bench"), recreate_database("mlflow_bench")
    user, prompt_set, token = django_setup(evolab_url)
    import requests

    tmp = Path(tempfile.mkdtemp(prefix="evolab-bench-"))
    procs = []
    try:
        mlflow_port, web_port = free_port(), free_port()
        procs.append(subprocess.Popen(
            [str(MLFLOW_PYTHON), "-m", "mlflow", "server", "--backend-store-uri", mlflow_url.replace("postgres://", "postgresql://"),
             "--artifacts-destination", str(tmp / "mlartifacts"), "--host", "127.0.0.1", "--port", str(mlflow_port)],
            stdout=(tmp / "mlflow.log").open("w"), stderr=subprocess.STDOUT, cwd=tmp))
        env = {**os.environ, "DATABASE_URL": evolab_url, "REDIS_URL": REDIS, "EVOLAB_DATA_DIR": str(tmp / "data")}
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(web_port), "webapp.asgi:application"],
            stdout=(tmp / "daphne.log").open("w"), stderr=subprocess.STDOUT, cwd=ROOT, env=env))
        wait_for_port(mlflow_port, procs[0], "mlflow server")
        wait_for_port(web_port, procs[1], "daphne")
        session = requests.Session()
        session.headers["Authorization"] = f"Token {token}"
        base = f"http://127.0.0.1:{web_port}/api"
        rng = random.Random(0)
        pool = texts(512, rng)
        repeats = 30

        # MLflow first, so Evolab's tables are not warm in its favour; the same sizes where MLflow is
        # fast enough, smaller where it would take minutes (rates do not depend on the count).
        spec = {"metrics_per_step": METRICS_PER_STEP, "live_steps": size(200), "bulk_points": size(30_000),
                "rollouts": size(300), "texts": pool[:64], "read_sizes": [2000, 10000], "read_repeats": repeats}
        mlflow = subprocess.run([str(MLFLOW_PYTHON), str(ROOT / "benchmarks" / "mlflow_workload.py"),
                                 f"http://127.0.0.1:{mlflow_port}", json.dumps(spec)],
                                capture_output=True, text=True, cwd=tmp)
        if mlflow.returncode != 0:
            print(mlflow.stderr[-3000:])
            return 1
        ml = json.loads(mlflow.stdout.strip().splitlines()[-1])
        mlflow_points = spec["live_steps"] * METRICS_PER_STEP + spec["bulk_points"] + sum(spec["read_sizes"])
        ml_bytes = relation_bytes(mlflow_url, ["metrics", "latest_metrics"]) / mlflow_points

        ev = {}
        log = Log()
        run = new_run(user, prompt_set, "live")
        ev["live"] = ingest_one_step_per_call(run, log, 1, size(2000))
        run2k = run if not QUICK else new_run(user, prompt_set, "read2k")
        if QUICK:
            ingest_whole_log(run2k, Log(), 1, 2000, tmp)
        run = new_run(user, prompt_set, "bulk")
        ev["bulk"] = ingest_whole_log(run, Log(), 1, 10_000, tmp)
        run10k = run
        run = new_run(user, prompt_set, "rollouts")
        ev["rollouts"] = ingest_rollouts(run, Log(), 1, size(20), pool)
        ev["read2000"] = read_median(session, f"{base}/runs/{run2k.pk}/metrics?names=entropy", repeats,
                                     series_length_is("entropy", 2000))
        ev["read10000"] = read_median(session, f"{base}/runs/{run10k.pk}/metrics?names=entropy", repeats,
                                      series_length_is("entropy", 10000))
        from webapp.metrics.models import MetricChunk, MetricPoint, MetricSeries

        # every metric point stored, open or in a chunk (clock points are overhead, not counted)
        metric_points = MetricPoint.objects.filter(series__clock=False).count() + sum(
            body.count(",") + 1 for body in MetricChunk.objects.filter(series__clock=False).values_list("steps", flat=True))
        tables = [MetricPoint._meta.db_table, MetricChunk._meta.db_table, MetricSeries._meta.db_table]
        ev_bytes = relation_bytes(evolab_url, tables) / metric_points

        rows = [
            ("metric ingest, one step per call", f"{ev['live']:,.0f} points/s", f"{ml['live_points_per_s']:,.0f}",
             ev["live"] / ml["live_points_per_s"], "live", "≥ 10×"),
            ("metric ingest, whole log in one call", f"{ev['bulk']:,.0f} points/s", f"{ml['bulk_points_per_s']:,.0f}",
             ev["bulk"] / ml["bulk_points_per_s"], "bulk", "≥ 10×"),
            ("rollout ingest, G = 64, ~2 KB texts", f"{ev['rollouts']:,.0f} records/s", f"{ml['rollouts_per_s']:,.0f}",
             ev["rollouts"] / ml["rollouts_per_s"], "rollouts", "≥ 30×"),
            ("one 2,000-point series over HTTP", f"{ev['read2000'] * 1e3:.1f} ms", f"{ml['read_median_s']['2000'] * 1e3:.0f} ms",
             ml["read_median_s"]["2000"] / ev["read2000"], "read2000_ms", "≤ 10 ms"),
            ("one 10,000-point series over HTTP", f"{ev['read10000'] * 1e3:.1f} ms",
             f"{ml['read_median_s']['10000'] * 1e3:.0f} ms", ml["read_median_s"]["10000"] / ev["read10000"],
             "read10000_ms", "≤ 15 ms"),
            ("bytes per metric point", f"{ev_bytes:.0f}", f"{ml_bytes:.0f}", ml_bytes / ev_bytes, "bytes", "≤ 80"),
        ]
        missed = []
        print(f"{'':40} {'Evolab':>20} {'MLflow':>12} {'ratio':>8}  goal")
        for label, ours, theirs, ratio, key, goal in rows:
            value = {"read2000_ms": ev["read2000"] * 1e3, "read10000_ms": ev["read10000"] * 1e3, "bytes": ev_bytes}
            met = (ratio >= GOALS[key]) if key in ("live", "bulk", "rollouts") else value[key] <= GOALS[key]
            if not met:
                missed.append(label)
            print(f"{label:40} {ours:>20} {theirs:>12} {ratio:>7.1f}×  {goal:8} {'met' if met else 'MISSED'}", flush=True)

        missed += scale_curve(user, prompt_set, session, base, tmp, pool)
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
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()


def scale_curve(user, prompt_set, session, base, tmp, pool) -> list[str]:
    """Ingest rate and read latency as one run grows: each size is reached by ingesting a whole log,
    then measured by ingesting the next steps one per call and reading the last 300 steps of a series
    (the run page's live tail) and one step's rollouts."""
    missed = []
    print(f"\nscale curve (one run growing; {METRICS_PER_STEP} metrics per step, 8 × 64 rollouts of ~2 KB per step)")
    run, log, step = new_run(user, prompt_set, "scale-points"), Log(), 0
    results = []
    for target in [size(10_000), size(100_000), size(1_000_000)]:
        target_steps = target // METRICS_PER_STEP
        if target_steps > step:
            ingest_whole_log(run, log, step + 1, target_steps - step, tmp)
            step = target_steps
        rate = ingest_one_step_per_call(run, log, step + 1, 100)
        step += 100
        tail = min(300, step)
        latency = read_median(session, f"{base}/runs/{run.pk}/metrics?names=entropy&since_step={step - tail}", 20,
                              series_length_is("entropy", tail))
        results.append((target, rate, latency))
        print(f"  {target:>9,} points: ingest {rate:>9,.0f} points/s (one step per call), "
              f"read of the last {tail} points {latency * 1e3:6.1f} ms", flush=True)
    missed += _flat("metric ingest", results[0][1], results[-1][1], higher_is_better=True)
    missed += _flat("metric read", results[0][2], results[-1][2], higher_is_better=False)

    run, log, step, results = new_run(user, prompt_set, "scale-rollouts"), Log(), 0, []
    per_step = 8 * 64
    for target in [size(10_000), size(100_000), size(1_000_000)]:
        target_steps = target // per_step
        while step < target_steps:  # a whole log, in steps of 8 groups
            chunk = min(20, target_steps - step)
            ingest_rollouts(run, log, step + 1, chunk, pool)
            step += chunk
        rate = ingest_rollouts(run, log, step + 1, 5, pool)
        step += 5
        latency = read_median(session, f"{base}/runs/{run.pk}/rollouts?step={step}", 10)
        results.append((target, rate, latency))
        print(f"  {target:>9,} rollouts: ingest {rate:>9,.0f} records/s, read of one step's 512 rollouts "
              f"{latency * 1e3:6.1f} ms", flush=True)
    missed += _flat("rollout ingest", results[0][1], results[-1][1], higher_is_better=True)
    missed += _flat("rollout read", results[0][2], results[-1][2], higher_is_better=False)
    return missed


def _flat(what, small, large, higher_is_better) -> list[str]:
    slowdown = small / large if higher_is_better else large / small
    met = slowdown <= 1.5
    print(f"  {what}: {slowdown:.2f}× slower at the largest size than at the smallest (goal ≤ 1.5×) "
          f"{'met' if met else 'MISSED'}")
    return [] if met else [f"{what} scale curve"]


if __name__ == "__main__":
    sys.exit(main())
