"""The MLflow side of bench_data_plane.py, run by .venv-bench's Python (MLflow is never installed
into the product's .venv). It drives a running MLflow tracking server with the official client,
doing what Evolab does in the same benchmark, and prints its timings as one JSON object.

    python mlflow_workload.py URI '{"live_steps": 200, ...}'
"""
import json
import random
import sys
import time

import requests
from mlflow import MlflowClient
from mlflow.entities import Metric

MAX_BATCH = 1000  # MLflow's limit of metrics per log_batch call


def metric_names(k: int) -> list[str]:
    return [f"m{i:02d}" for i in range(k)]


def main():
    uri, spec = sys.argv[1], json.loads(sys.argv[2])
    client = MlflowClient(tracking_uri=uri)
    experiment = client.create_experiment(f"bench-{time.time()}")
    names, rng, out = metric_names(spec["metrics_per_step"]), random.Random(0), {}

    # One step per call, as a training loop logs a step's metrics.
    run = client.create_run(experiment).info.run_id
    started = time.perf_counter()
    for step in range(1, spec["live_steps"] + 1):
        now = int(time.time() * 1000)
        client.log_batch(run, metrics=[Metric(n, rng.random(), now, step) for n in names])
    out["live_points_per_s"] = spec["live_steps"] * len(names) / (time.perf_counter() - started)

    # A whole log at once: batches of MLflow's maximum size.
    run = client.create_run(experiment).info.run_id
    points = [(n, step) for step in range(1, spec["bulk_points"] // len(names) + 1) for n in names]
    started = time.perf_counter()
    now = int(time.time() * 1000)
    for i in range(0, len(points), MAX_BATCH):
        client.log_batch(run, metrics=[Metric(n, rng.random(), now, s) for n, s in points[i:i + MAX_BATCH]])
    out["bulk_points_per_s"] = len(points) / (time.perf_counter() - started)

    # Rollout texts: MLflow's way to keep a text is an artifact, one log_text per rollout.
    run = client.create_run(experiment).info.run_id
    texts = spec["texts"]
    started = time.perf_counter()
    for i in range(spec["rollouts"]):
        client.log_text(run, texts[i % len(texts)], f"rollouts/step-{i // 512}/prompt-{i // 64 % 8}/{i % 64}.txt")
    out["rollouts_per_s"] = spec["rollouts"] / (time.perf_counter() - started)

    # One series over HTTP: the REST call the MLflow UI makes, on one kept-alive connection.
    run = client.create_run(experiment).info.run_id
    session, read = requests.Session(), {}
    for size in spec["read_sizes"]:
        key = f"series{size}"
        now = int(time.time() * 1000)
        for start in range(1, size + 1, MAX_BATCH):
            client.log_batch(run, metrics=[Metric(key, rng.random(), now, s)
                                           for s in range(start, min(start + MAX_BATCH, size + 1))])
        url = f"{uri}/api/2.0/mlflow/metrics/get-history"
        params = {"run_id": run, "metric_key": key, "max_results": 25000}
        got = session.get(url, params=params).json()["metrics"]
        assert len(got) == size, (size, len(got))
        timings = []
        for _ in range(spec["read_repeats"]):
            started = time.perf_counter()
            response = session.get(url, params=params)
            response.json()
            timings.append(time.perf_counter() - started)
        read[str(size)] = sorted(timings)[len(timings) // 2]
    out["read_median_s"] = read
    print(json.dumps(out))


if __name__ == "__main__":
    main()
