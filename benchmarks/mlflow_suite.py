"""MLflow's own tracking tests, run against MLflow's server and against Evolab side by side (issue 37).

    .venv/bin/python benchmarks/mlflow_suite.py --mlflow-src PATH [--only mlflow|evolab] [-k EXPR]

PATH is a checkout of MLflow's repository at the pinned client's version (benchmarks/requirements-mlflow.txt):

    git clone --depth 1 --branch v3.17.2 https://github.com/mlflow/mlflow /tmp/mlflow-src

(or MLFLOW_SUITE_SRC=PATH). Where GitHub is out of reach, DESIGN §4.8's way: the opendatahub-io/mlflow mirror's
commit closest to the pinned version (its history ends at 3.6.1.dev0), `git --git-dir=MIRROR archive HEAD tests
pyproject.toml | tar -x -C PATH`; those older tests' conftest calls `workspace_context.clear_workspace()`, which
3.17.2 names `clear_server_request_workspace()` (RESULTS.md records the run made so). Only its tests/ folder is used, copied into a folder of its own so that the installed,
pinned mlflow is the one imported. The tests run under .venv-bench (`make bench`'s venv: mlflow from
requirements-mlflow.txt, plus what MLflow's tests need from requirements-mlflow-suite.txt; installed here when
missing). Evolab is started as `make demo` starts it (scripts/demo.py: daphne, its workers) in a folder of its own,
on SQLite with its bundled Redis, or on DATABASE_URL / REDIS_URL when set.

It runs tests/tracking/test_rest_tracking.py and tests/tracking/fluent/test_fluent.py twice:

1. against MLflow's own server: MLflow's tracking app on a fresh SQLite store for each test (test_rest_tracking.py's
   own fixture; test_fluent.py's local store is put behind the same server);
2. against Evolab (http://HOST:PORT/mlflow), each test as a fresh member of a fresh team, with its token as
   MLFLOW_TRACKING_TOKEN (mlflow_suite_plugin.py).

The categories issue 37 leaves out (artifacts, logged models and the registry, traces and GenAI, datasets, GraphQL,
webhooks, MLflow's workspaces, its gateway and jobs) are deselected by pattern, listed with the reason
(mlflow_suite_plugin.DESELECT). It prints each test with its result on both, and the counts; it exits 1 when a
test that passes against MLflow's server does not pass against Evolab. Not part of `make test`.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from demo_stack import DemoStack

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "benchmarks"
BENCH_VENV = ROOT / ".venv-bench"
BENCH_PYTHON = BENCH_VENV / "bin" / "python"
REQUIREMENTS = [BENCH / "requirements-mlflow.txt", BENCH / "requirements-mlflow-suite.txt"]
TEST_FILES = ["tests/tracking/test_rest_tracking.py", "tests/tracking/fluent/test_fluent.py"]
CLONE = "git clone --depth 1 --branch v{v} https://github.com/mlflow/mlflow /tmp/mlflow-src"


def pinned_version() -> str:
    for line in (BENCH / "requirements-mlflow.txt").read_text().splitlines():
        if line.strip().startswith("mlflow=="):
            return line.split("==", 1)[1].strip()
    raise SystemExit("benchmarks/requirements-mlflow.txt pins no mlflow==VERSION")


def checkout_version(src: Path) -> str | None:
    version_file = src / "mlflow" / "version.py"
    if not version_file.exists():
        return None
    for line in version_file.read_text().splitlines():
        if line.startswith("VERSION"):
            return line.split("=", 1)[1].strip().strip("\"'")
    return None


def ensure_bench_venv() -> None:
    stamp = BENCH_VENV / (".suite-" + "-".join(str(int(r.stat().st_mtime)) for r in REQUIREMENTS))
    if stamp.exists():
        return
    if not BENCH_PYTHON.exists():
        subprocess.run([sys.executable, "-m", "venv", str(BENCH_VENV)], check=True)
    print("Installing MLflow and what its tests need into .venv-bench ...", flush=True)
    subprocess.run([str(BENCH_PYTHON), "-m", "pip", "install", "--quiet"]
                   + [a for r in REQUIREMENTS for a in ("-r", str(r))], check=True)
    for old in BENCH_VENV.glob(".suite-*"):
        old.unlink()
    stamp.touch()


def prepare_tests(src: Path, work: Path) -> None:
    shutil.copytree(src / "tests", work / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    (work / "pytest.ini").write_text(
        "[pytest]\n"
        "addopts = -p no:cacheprovider -p no:legacypath\n"
        "asyncio_default_fixture_loop_scope = function\n"
        "timeout = 300\n")


def run_suite(work: Path, target: str, results: Path, extra: list[str], env_extra: dict) -> None:
    env = {**os.environ, **env_extra, "MLFLOW_SUITE_TARGET": target, "MLFLOW_SUITE_RESULTS": str(results),
           "PYTHONPATH": str(BENCH), "HF_HUB_OFFLINE": "1",
           # a failing request fails its test at once, on both servers, instead of being retried for minutes
           "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "0", "MLFLOW_HTTP_REQUEST_TIMEOUT": "30"}
    env.pop("MLFLOW_TRACKING_URI", None)
    env.pop("MLFLOW_TRACKING_TOKEN", None)
    print(f"\n== MLflow's tests against {'MLflow' if target == 'mlflow' else 'Evolab'} ==", flush=True)
    subprocess.run([str(BENCH_PYTHON), "-m", "pytest", "-p", "mlflow_suite_plugin", "-q", "-rN", "--no-header",
                    *TEST_FILES, *extra], cwd=work, env=env)


def read_results(path: Path) -> dict[str, dict]:
    rows = {}
    if path.exists():
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["test"] not in rows or rows[row["test"]]["outcome"] == "passed":
                rows[row["test"]] = row  # a teardown's error after a passed call is not recorded; setup's is
    return rows


def table(mlflow: dict, evolab: dict, both: bool) -> int:
    tests = sorted(set(mlflow) | set(evolab))
    width = min(110, max((len(t) for t in tests), default=10))
    differing = []
    print(f"\n{'test':<{width}}  {'MLflow':<10}  {'Evolab':<10}")
    for test in tests:
        m = mlflow.get(test, {}).get("outcome", "-")
        e = evolab.get(test, {}).get("outcome", "-")
        print(f"{test[:width]:<{width}}  {m:<10}  {e:<10}")
        if both and m == "passed" and e != "passed":
            differing.append(test)
    for name, rows in (("MLflow", mlflow), ("Evolab", evolab)):
        counts = Counter(r["outcome"] for r in rows.values())
        if rows:
            print(f"{name}: " + ", ".join(f"{n} {k}" for k, n in sorted(counts.items())))
    reasons = Counter(r.get("reason") for r in (mlflow or evolab).values() if r["outcome"] == "deselected")
    for reason, n in reasons.most_common():
        print(f"  deselected {n}: {reason}")
    if both:
        print(f"Pass against MLflow's server: {sum(r['outcome'] == 'passed' for r in mlflow.values())}; "
              f"of those, pass against Evolab: "
              f"{sum(mlflow[t]['outcome'] == 'passed' and evolab.get(t, {}).get('outcome') == 'passed' for t in mlflow)}")
        for test in differing:
            print(f"  differs: {test}: {evolab.get(test, {}).get('message', '')[:300]}")
    return 1 if differing else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mlflow-src", default=os.environ.get("MLFLOW_SUITE_SRC"),
                        help="a checkout of MLflow's repository at the pinned version (or MLFLOW_SUITE_SRC)")
    parser.add_argument("--only", choices=["mlflow", "evolab"], help="run against one server only")
    parser.add_argument("--out", help="keep the results (JSON lines) in this folder")
    parser.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --), e.g. -- -k search")
    args = parser.parse_args()
    version = pinned_version()
    if not args.mlflow_src:
        raise SystemExit(f"Give a checkout of MLflow's repository at v{version}: --mlflow-src PATH or "
                         f"MLFLOW_SUITE_SRC=PATH. To get one:\n  {CLONE.format(v=version)}")
    src = Path(args.mlflow_src).resolve()
    if not (src / TEST_FILES[0]).exists():
        raise SystemExit(f"{src} has no {TEST_FILES[0]}: not a checkout of MLflow's repository. To get one:\n"
                         f"  {CLONE.format(v=version)}")
    theirs = checkout_version(src)
    if theirs != version:
        print(f"Warning: the checkout's mlflow/version.py says {theirs}, the pinned client is {version}: tests "
              f"written for another version may fail against both servers.", flush=True)
    ensure_bench_venv()
    out = Path(args.out) if args.out else Path(tempfile.mkdtemp(prefix="mlflow-suite-"))
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="mlflow-suite-") as scratch:
        work = Path(scratch) / "suite"
        work.mkdir()
        prepare_tests(src, work)
        results = {t: out / f"{t}.jsonl" for t in ("mlflow", "evolab")}
        for path in results.values():
            path.unlink(missing_ok=True)
        if args.only in (None, "mlflow"):
            run_suite(work, "mlflow", results["mlflow"], args.pytest_args, {})
        if args.only in (None, "evolab"):
            evolab = DemoStack(Path(scratch) / "evolab", os.environ.get("DATABASE_URL"), os.environ.get("REDIS_URL"),
                               name="suite")
            try:
                accounts_env = {k: evolab.env[k] for k in ("EVOLAB_DATA_DIR", "DATABASE_URL", "REDIS_URL",
                                                           "EVOLAB_DEV", "DJANGO_SETTINGS_MODULE") if k in evolab.env}
                run_suite(work, "evolab", results["evolab"], args.pytest_args,
                          {"MLFLOW_SUITE_EVOLAB_URL": evolab.url, "MLFLOW_SUITE_EVOLAB_PYTHON": sys.executable,
                           "MLFLOW_SUITE_EVOLAB_ENV": json.dumps(accounts_env)})
            finally:
                evolab.stop()
        print(f"\nResults: {out}")
        return table(read_results(results["mlflow"]), read_results(results["evolab"]), args.only is None)


if __name__ == "__main__":
    sys.exit(main())
