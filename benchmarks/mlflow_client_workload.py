"""The MLflow client's own workload, run by .venv-bench's Python (the same pinned client for both servers):
one run, `steps` calls of log_batch with `metrics` metrics each (a trainer logging a step at a time), then
get_metric_history of one metric, read `repeats` times. Prints its timings as one JSON object.

    python mlflow_client_workload.py TRACKING_URI '{"steps": 1000, "metrics": 30, "repeats": 20}'

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
    names = ["actor/entropy", "response_length/mean", "critic/score/mean"] + [f"m{i:02d}" for i in range(spec["metrics"] - 3)]
    rng = random.Random(0)
    calls = []
    for step in range(1, spec["steps"] + 1):
        now = int(time.time() * 1000)
        metrics = [Metric(n, 0.5 + 0.1 * rng.random(), now, step) for n in names]
        started = time.perf_counter()
        client.log_batch(run, metrics=metrics)
        calls.append(time.perf_counter() - started)
    reads = []
    for _ in range(spec["repeats"]):
        started = time.perf_counter()
        history = client.get_metric_history(run, "actor/entropy")
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
                           params={"run_id": run, "metric_key": "actor/entropy"}).json()
        raw.append(time.perf_counter() - started)
        assert len(body["metrics"]) == spec["steps"]
    # a longer history for scale: `long_points` points of one metric, logged 1,000 a call (MLflow's batch limit)
    long_run = client.create_run(experiment, run_name="bench-long").info.run_id
    for start in range(1, spec["long_points"] + 1, 1000):
        now = int(time.time() * 1000)
        client.log_batch(long_run, metrics=[Metric("actor/entropy", rng.random(), now, s)
                                            for s in range(start, min(start + 1000, spec["long_points"] + 1))])
    long_raw = []
    for _ in range(spec["repeats"] // 2):
        started = time.perf_counter()
        body = session.get(f"{uri}/api/2.0/mlflow/metrics/get-history",
                           params={"run_id": long_run, "metric_key": "actor/entropy"}).json()
        long_raw.append(time.perf_counter() - started)
        assert len(body["metrics"]) == spec["long_points"]
    calls.sort()
    reads.sort()
    raw.sort()
    long_raw.sort()
    print(json.dumps({"log_total_s": sum(calls), "log_median_s": calls[len(calls) // 2],
                      "log_p95_s": calls[int(len(calls) * 0.95)], "history_median_s": reads[len(reads) // 2],
                      "history_rest_median_s": raw[len(raw) // 2], "long_rest_median_s": long_raw[len(long_raw) // 2]}))


if __name__ == "__main__":
    main()
