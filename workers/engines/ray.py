"""Ray (DESIGN §4.9): each run is a Ray job submitted through the Ray Jobs REST API of RAY_ADDRESS
(`http://HEAD:8265`), its submission id the run's job name (so a worker that died between submitting and
recording it finds it again), its entrypoint rl.launch.ray_entrypoint: the trainer, or rl.ray_launch placing
one launcher per node. The job's environment names the run directory on the storage the cluster's nodes share.
Stop: the API's stop (SIGTERM to the job's driver, which passes it on to its nodes' trainers)."""
import json
import urllib.error
import urllib.request

from rl.launch import ray_entrypoint

from .base import Engine, EngineError, JobSpec, JobState, log_tail

TIMEOUT_S = 30
ENDS = {"SUCCEEDED": "completed", "FAILED": "failed", "STOPPED": "cancelled"}


class RayJobs(Engine):
    name, title = "ray", "Ray"

    def __init__(self, address: str):
        if not address:
            raise EngineError("EVOLAB_TRAINER_LAUNCHER=ray needs RAY_ADDRESS (the head's dashboard, http://HEAD:8265)")
        if not address.startswith(("http://", "https://")):
            address = "http://" + address
        self.base = address.rstrip("/")

    def _call(self, method: str, path: str, body: dict | None = None, missing_ok: bool = False):
        request = urllib.request.Request(f"{self.base}/api/jobs/{path}", method=method,
                                         data=json.dumps(body).encode() if body is not None else None,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            if missing_ok and exc.code == 404:
                return None
            raise EngineError(f"Ray's job API answered {exc.code} to {method} {path or '/'}: "
                              f"{exc.read().decode('utf-8', 'replace')[:300]}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise EngineError(f"Ray's job API at {self.base} cannot be reached: {exc}") from None

    def submit(self, spec: JobSpec) -> str:
        entrypoint = ray_entrypoint(code_dir=spec.code_dir, python=spec.python, config_path=spec.config_path,
                                    run_dir=spec.run_dir, nodes=spec.nodes, gpus=spec.gpus, resume=spec.resume,
                                    accelerate_config=spec.accelerate_config)
        one_node = spec.nodes == 1
        body = {"entrypoint": entrypoint, "submission_id": spec.name,
                # PYTHONPATH: the node launchers' tasks start in Ray's worker folder, not the job's `cd`.
                # RAY_JOB_STOP_WAIT_TIME_S: Ray's stop kills the job 3 s after its SIGTERM unless told to wait,
                # and a trainer finishes its step and checkpoints first (the job's supervisor reads it)
                "runtime_env": {"env_vars": {**{k: str(v) for k, v in spec.environment.items()},
                                             "PYTHONPATH": str(spec.code_dir),
                                             "RAY_JOB_STOP_WAIT_TIME_S": str(int(spec.stop_grace_seconds))}},
                # one node: the driver is the trainer and takes the run's resources; several: the driver only
                # places one bundle per node (rl/ray_launch.py), which take them
                "entrypoint_num_cpus": 1 if one_node else 0, "entrypoint_num_gpus": spec.gpus if one_node else 0,
                "metadata": {"evolab_run": str(spec.run_id)}}
        return self._call("POST", "", body)["submission_id"]

    def find(self, name: str) -> str | None:
        return name if self._call("GET", name, missing_ok=True) is not None else None

    def state(self, job_id: str) -> JobState:
        job = self._call("GET", job_id, missing_ok=True)
        if job is None:
            return JobState("unknown", reason=f"Ray no longer knows job {job_id}")
        status, message = job.get("status", ""), job.get("message") or ""
        if status == "PENDING":
            return JobState("pending", reason=message)
        if status == "RUNNING":
            return JobState("running")
        if status in ENDS:
            reason = f"{job.get('error_type')}: {message}" if job.get("error_type") else message
            return JobState("ended", reason=reason, end=ENDS[status], exit_code=job.get("driver_exit_code"))
        return JobState("unknown", reason=f"Ray says {status}")

    def stop(self, job_id: str) -> None:
        self._call("POST", f"{job_id}/stop", missing_ok=True)

    kill = stop  # Ray's stop ends the driver (SIGKILL after its own grace); there is nothing harder to ask for

    def log_tail(self, job_id: str, spec_log) -> str:
        logs = self._call("GET", f"{job_id}/logs", missing_ok=True) or {}
        return log_tail(logs.get("logs") or "")
