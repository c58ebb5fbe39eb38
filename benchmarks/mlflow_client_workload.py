"""The MLflow client's own workload, run by .venv-bench's Python (the same pinned client for both servers):
one run, `steps` calls of log_batch with the metrics `names` each (a trainer logging a step at a time), then
get_metric_history of the first, read `repeats` times, and (with `long_points`) a longer history. Prints its
timings and the MLflow run id as one JSON object.

    python mlflow_client_workload.py TRACKING_URI '{"steps": 300, "names": ["actor/entropy", ...], "repeats": 20}'

For Evolab, MLFLOW_TRACKING_TOKEN carries the API token (the tracking URI ends in /mlflow)."""
import json
import os
import random
import sys
import time

import requests

from mlflow import MlflowClient
from mlflow.entities import Metric


def main():
    uri, spec = sys.argv[1], json.loads(sys.argv[2])
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment(f"bench-{time.time()}")
    run = client.create_run(experiment, run_name="bench").info.run_id
    names = spec["names"]
    rng = random.Random(0)
    calls = []
    for step in range(1, spec["steps"] + 1):
        now = int(time.time() * 1000)
        metrics = [Metric(n, 0.5 + 0.1 * rng.random(), now, step) for n in names]
        started = time.perf_counter()
        client.log_batch(run, metrics=metrics)
        calls.append(time.perf_counter() - started)
    logged_at = time.time()
    reads = []
    for _ in range(spec["repeats"]):
        started = time.perf_counter()
        history = client.get_metric_history(run, names[0])
        reads.append(time.perf_counter() - started)
        assert len(history) == spec["steps"], len(history)
    # the same read as the REST call it is (what a dashboard makes), without the client turning 1,000 metrics into
    # protobuf messages and Metric objects, which costs it the same whichever server answered
    session = requests.Session()
    if os.environ.get("MLFLOW_TRACKING_TOKEN"):
        session.headers["Authorization"] = f"Bearer {os.environ['MLFLOW_TRACKING_TOKEN']}"
    raw = []
    for _ in range(spec["repeats"]):
        started = time.perf_counter()
        body = session.get(f"{uri}/api/2.0/mlflow/metrics/get-history",
                           params={"run_id": run, "metric_key": names[0]}).json()
        raw.append(time.perf_counter() - started)
        assert len(body["metrics"]) == spec["steps"]
    # a longer history for scale: `long_points` points of one metric, logged 1,000 a call (MLflow's batch limit)
    long_raw = []
    if not spec.get("long_points"):
        return _report(run, logged_at, calls, reads, raw, long_raw)
    long_run = client.create_run(experiment, run_name="bench-long").info.run_id
    for start in range(1, spec["long_points"] + 1, 1000):
        now = int(time.time() * 1000)
        client.log_batch(long_run, metrics=[Metric("actor/entropy", rng.random(), now, s)
                                            for s in range(start, min(start + 1000, spec["long_points"] + 1))])
    for _ in range(spec["repeats"] // 2):
        started = time.perf_counter()
        body = session.get(f"{uri}/api/2.0/mlflow/metrics/get-history",
                           params={"run_id": long_run, "metric_key": "actor/entropy"}).json()
        long_raw.append(time.perf_counter() - started)
        assert len(body["metrics"]) == spec["long_points"]
    return _report(run, logged_at, calls, reads, raw, long_raw)


def _report(run, logged_at, calls, reads, raw, long_raw):
    calls.sort()
    reads.sort()
    raw.sort()
    long_raw.sort()
    print(json.dumps({"run_id": run, "logged_at": logged_at, "log_total_s": sum(calls), "log_median_s": calls[len(calls) // 2],
                      "log_p95_s": calls[int(len(calls) * 0.95)], "history_median_s": reads[len(reads) // 2],
                      "history_rest_median_s": raw[len(raw) // 2],
                      "long_rest_median_s": long_raw[len(long_raw) // 2] if long_raw else None}))


if __name__ == "__main__":
    main()
