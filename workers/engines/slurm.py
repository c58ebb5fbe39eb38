"""Slurm (DESIGN §4.9): each run is one job of its nodes × GPUs, submitted with `sbatch` (the worker's Slurm client
and SLURM_CONF), or through slurmrestd when SLURMRESTD_URL and a token (SLURM_JWT) are set. The job's script is
rl.launch.batch_script: #SBATCH lines from the run's and the worker's options (checked there), the trainer (or
one launcher per node through srun), resumed from its checkpoint when Slurm requeues the job.

State: `scontrol show job` while Slurm remembers the job (MinJobAge after its end), then `sacct` (the accounting
database, or the job completion log of a cluster without one). Stop: SIGTERM to every process of the job
(`scancel --full --signal=TERM`: the trainer checkpoints and exits), `scancel` to end it or take it out of the
queue."""
import json
import re
import shlex
import subprocess
import urllib.error
import urllib.request

from django.conf import settings

from rl.launch import batch_script

from .base import Engine, EngineError, JobSpec, JobState, file_tail

COMMAND_TIMEOUT_S = 30
# Slurm's job states (squeue/scontrol/sacct spellings) by what they mean for a run
PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
ENDS = {"COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "cancelled", "TIMEOUT": "timeout",
        "NODE_FAIL": "node_fail", "PREEMPTED": "preempted", "OUT_OF_MEMORY": "out_of_memory", "BOOT_FAIL": "failed",
        "DEADLINE": "timeout"}


def slurm_engine() -> Engine:
    if settings.SLURMRESTD_URL:
        return SlurmRest(settings.SLURMRESTD_URL, settings.SLURM_JWT, settings.SLURMRESTD_API)
    return SlurmCli()


def _state_of(word: str, reason: str, exit_code: int | None) -> JobState:
    word = (word or "").upper().split()[0] if word else ""
    word = word.rstrip("+")  # sacct's "CANCELLED+" / "CANCELLED by 0"
    if word in PENDING:
        return JobState("pending", reason=reason)
    if word in RUNNING:
        return JobState("running", reason=reason)
    if word in ENDS:
        return JobState("ended", reason=reason, end=ENDS[word], exit_code=exit_code)
    return JobState("unknown", reason=f"Slurm says {word or 'nothing'}")


class SlurmCli(Engine):
    name, title = "slurm", "Slurm"

    def _run(self, *argv, check=True) -> subprocess.CompletedProcess:
        try:
            done = subprocess.run(list(argv), capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S)
        except FileNotFoundError:
            raise EngineError(f"{argv[0]} is not installed on this worker (Slurm's client commands are needed "
                              f"for EVOLAB_TRAINER_LAUNCHER=slurm)") from None
        except subprocess.TimeoutExpired:
            raise EngineError(f"{argv[0]} did not answer within {COMMAND_TIMEOUT_S} s") from None
        if check and done.returncode != 0:
            raise EngineError(f"{shlex.join(argv[:2])} failed: {(done.stderr or done.stdout).strip()[:500]}")
        return done

    def submit(self, spec: JobSpec) -> str:
        script = spec.run_dir / f"{spec.name}.sbatch"
        script.write_text(batch_script(
            job_name=spec.name, run_dir=spec.run_dir, config_path=spec.config_path, code_dir=spec.code_dir,
            python=spec.python, nodes=spec.nodes, gpus=spec.gpus, resume=spec.resume, options=spec.options,
            environment=spec.environment, log_path=spec.log_path, accelerate_config=spec.accelerate_config))
        out = self._run("sbatch", "--parsable", str(script)).stdout.strip()
        return out.split(";")[0]  # "id;cluster" on a federation

    def find(self, name: str) -> str | None:
        out = self._run("squeue", "--noheader", "--states=all", f"--name={name}", "--format=%i", check=False).stdout
        ids = out.split()
        return ids[-1] if ids else None

    def state(self, job_id: str) -> JobState:
        shown = self._run("scontrol", "--oneliner", "show", "job", job_id, check=False)
        if shown.returncode == 0 and "JobState=" in shown.stdout:
            fields = dict(re.findall(r"(\w+)=(\S*)", shown.stdout))
            exit_code = int(fields.get("ExitCode", "0:0").split(":")[0] or 0)
            reason = fields.get("Reason", "")
            return _state_of(fields.get("JobState", ""), "" if reason == "None" else reason, exit_code)
        return self._accounted(job_id)

    def _accounted(self, job_id: str) -> JobState:
        """A job Slurm's controller has forgotten: the accounting database, or the job completion log."""
        for argv in (["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", job_id,
                      "--format=State,ExitCode,Reason"],
                     ["sacct", "--completion", "--noheader", "--parsable2", "--jobs", job_id,
                      "--format=State,ExitCode"]):
            done = self._run(*argv, check=False)
            rows = [line.split("|") for line in done.stdout.splitlines() if line.strip()]
            if done.returncode == 0 and rows:
                state, code = rows[-1][0], rows[-1][1] if len(rows[-1]) > 1 else "0:0"
                reason = rows[-1][2] if len(rows[-1]) > 2 else ""
                return _state_of(state, reason, int(code.split(":")[0] or 0))
        return JobState("unknown", reason=f"Slurm no longer knows job {job_id}")

    def stop(self, job_id: str) -> None:
        state = self.state(job_id)
        if state.phase == "running":
            self._run("scancel", "--full", "--signal=TERM", job_id, check=False)
        elif state.phase != "ended":
            self._run("scancel", job_id, check=False)

    def kill(self, job_id: str) -> None:
        self._run("scancel", job_id, check=False)

    def log_tail(self, job_id: str, spec_log) -> str:
        return file_tail(spec_log)


class SlurmRest(Engine):
    """slurmrestd's OpenAPI (v0.0.38 by default, EVOLAB_SLURMRESTD_API): the same jobs, over HTTP, authenticated by
    a JWT (SLURM_JWT, e.g. from `scontrol token`) for the user SLURMRESTD_USER."""

    name, title = "slurm", "Slurm"

    def __init__(self, url: str, token: str, api: str = "v0.0.38"):
        if not token:
            raise EngineError("SLURMRESTD_URL is set but SLURM_JWT is not: slurmrestd needs a token "
                              "(`scontrol token`)")
        self.base, self.token, self.api = url.rstrip("/"), token, api

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            f"{self.base}/slurm/{self.api}/{path}", method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"X-SLURM-USER-NAME": settings.SLURMRESTD_USER, "X-SLURM-USER-TOKEN": self.token,
                     "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=COMMAND_TIMEOUT_S) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            try:
                errors = json.loads(text).get("errors") or []
            except ValueError:
                errors = []
            raise EngineError(f"slurmrestd answered {exc.code} to {method} {path}: "
                              f"{'; '.join(e.get('error', str(e)) for e in errors) or text[:300]}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise EngineError(f"slurmrestd at {self.base} cannot be reached: {exc}") from None

    def submit(self, spec: JobSpec) -> str:
        if spec.options.get("sbatch"):
            raise EngineError("extra sbatch options need sbatch; slurmrestd takes partition, account and "
                              "time_limit only (unset SLURMRESTD_URL or drop the options)")
        script = batch_script(
            job_name=spec.name, run_dir=spec.run_dir, config_path=spec.config_path, code_dir=spec.code_dir,
            python=spec.python, nodes=spec.nodes, gpus=spec.gpus, resume=spec.resume, options={},
            environment=spec.environment, log_path=spec.log_path, accelerate_config=spec.accelerate_config)
        job = {"name": spec.name, "nodes": spec.nodes, "tasks_per_node": 1, "tasks": spec.nodes,
               "current_working_directory": str(spec.code_dir), "standard_output": str(spec.log_path),
               "requeue": True, "environment": {"PATH": "/usr/local/bin:/usr/bin:/bin", **spec.environment}}
        if spec.gpus:
            job["gpus_per_node"] = f"gpu:{spec.gpus}"
        for name in ("partition", "account"):
            if spec.options.get(name):
                job[name] = spec.options[name]
        if spec.options.get("time_limit"):
            job["time_limit"] = _minutes(spec.options["time_limit"])
        answer = self._call("POST", "job/submit", {"script": script, "job": job})
        if answer.get("errors"):
            raise EngineError(f"slurmrestd refused the job: {answer['errors']}")
        return str(answer["job_id"])

    def find(self, name: str) -> str | None:
        jobs = [j for j in self._call("GET", "jobs").get("jobs", []) if j.get("name") == name]
        return str(jobs[-1]["job_id"]) if jobs else None

    def state(self, job_id: str) -> JobState:
        try:
            jobs = self._call("GET", f"job/{job_id}").get("jobs") or []
        except EngineError as exc:
            if "Invalid job id" in str(exc):
                return JobState("unknown", reason=f"Slurm no longer knows job {job_id}")
            raise
        if not jobs:
            return JobState("unknown", reason=f"Slurm no longer knows job {job_id}")
        job = jobs[0]
        reason = job.get("state_reason") or ""
        raw = job.get("exit_code")
        exit_code = raw >> 8 if isinstance(raw, int) else None  # the wait status, as waitpid gives it
        return _state_of(str(job.get("job_state", "")), "" if reason == "None" else reason, exit_code)

    def stop(self, job_id: str) -> None:
        if self.state(job_id).phase == "running":
            self._call("DELETE", f"job/{job_id}?signal=SIGTERM")
        else:
            self._call("DELETE", f"job/{job_id}")

    def kill(self, job_id: str) -> None:
        self._call("DELETE", f"job/{job_id}?signal=SIGKILL")

    def log_tail(self, job_id: str, spec_log) -> str:
        return file_tail(spec_log)


def _minutes(limit: str) -> int:
    """Slurm's time formats (M, M:S, H:M:S, D-H, D-H:M, D-H:M:S) as whole minutes, rounded up."""
    days, _, rest = limit.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
        total = int(days) * 1440 * 60 + hours * 3600 + minutes * 60 + seconds
    elif len(parts) == 1:
        total = parts[0] * 60
    elif len(parts) == 2:
        total = parts[0] * 60 + parts[1]
    else:
        total = parts[0] * 3600 + parts[1] * 60 + parts[2]
    return max(1, -(-total // 60))
