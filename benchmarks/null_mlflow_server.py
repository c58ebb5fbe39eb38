"""A tracking server that keeps nothing and answers at once: what the MLflow client's own time is, measured with the
same workload (mlflow_client_workload.py), so the servers' ratios can be given net of it.

    python null_mlflow_server.py PORT POINTS

It answers the calls the workload makes: experiments/create, runs/create, runs/log-batch, and metrics/get-history
with POINTS points (the history the workload reads back), in the bodies MLflow's server writes."""
import functools
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlparse


def main():
    port, points = int(sys.argv[1]), int(sys.argv[2])
    run = {"info": {"run_id": "0" * 32, "run_uuid": "0" * 32, "experiment_id": "1", "run_name": "bench",
                    "user_id": "bench", "status": "RUNNING", "start_time": 1, "artifact_uri": "mlflow-artifacts:/1",
                    "lifecycle_stage": "active"}, "data": {}, "inputs": {}}

    @functools.lru_cache
    def history(key: str) -> bytes:  # written once: the client's time is what this server measures
        return json.dumps({"metrics": [{"key": key, "value": 0.5, "timestamp": 1_795_000_000_000 + step, "step": step}
                                       for step in range(1, points + 1)]}).encode()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the servers measured against it answer
        disable_nagle_algorithm = True  # else the body waits ~40 ms behind the headers for the client's ACK

        def log_message(self, *args):
            pass

        def answer(self, body: bytes):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            path = urlparse(self.path).path
            if path.endswith("experiments/create"):
                return self.answer(b'{"experiment_id": "1"}')
            if path.endswith("runs/create"):
                return self.answer(json.dumps({"run": run}).encode())
            return self.answer(b"{}")

        def do_GET(self):
            url = urlparse(self.path)
            if url.path.endswith("metrics/get-history"):
                return self.answer(history(parse_qs(url.query)["metric_key"][0]))
            return self.answer(b"{}")

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    main()
