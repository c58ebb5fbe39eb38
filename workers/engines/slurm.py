"""Slurm (DESIGN §4.9): each run is one job of its nodes × GPUs, submitted with `sbatch` (the worker's Slurm client
and SLURM_CONF; slurmrestd is not supported, docs/cluster-engines.md says why). The job's script is
rl.launch.batch_script: #SBATCH lines from the run's and the worker's options (checked there, rl.sbatch_options), the
trainer (or one launcher per node through srun), resumed from its checkpoint when Slurm requeues the job. Evolab's
own options (the job's name, size, files, directory, environment, requeue) are on sbatch's command line, where they
win over any #SBATCH line.

State: `scontrol show job` while Slurm remembers the job (MinJobAge after its end), then `sacct` (the accounting
database, or the job completion log of a cluster without one). Stop: SIGTERM to every process of the job
(`scancel --full --signal=TERM`: the trainer checkpoints and exits), `scancel` to end it or take it out of the
queue."""
import re
import shlex
import subprocess

from rl.launch import batch_script, slurm_job_options
from rl.params import FieldError

from .base import Engine, EngineError, JobSpec, JobState, file_tail

COMMAND_TIMEOUT_S = 30
# Slurm's job states (squeue/scontrol/sacct spellings) by what they mean for a run
PENDING = {"PENDING", "CONFIGURING", "REQUEUED", "REQUEUE_HOLD", "REQUEUE_FED", "RESV_DEL_HOLD", "SPECIAL_EXIT"}
RUNNING = {"RUNNING", "COMPLETING", "SUSPENDED", "STOPPED", "SIGNALING", "STAGE_OUT", "RESIZING"}
ENDS = {"COMPLETED": "completed", "FAILED": "failed", "CANCELLED": "cancelled", "TIMEOUT": "timeout",
        "NODE_FAIL": "node_fail", "PREEMPTED": "preempted", "OUT_OF_MEMORY": "out_of_memory", "BOOT_FAIL": "failed",
        "DEADLINE": "timeout"}


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
        try:
            text = batch_script(
                job_name=spec.name, run_dir=spec.run_dir, config_path=spec.config_path, code_dir=spec.code_dir,
                python=spec.python, nodes=spec.nodes, gpus=spec.gpus, resume=spec.resume, options=spec.options,
                environment=spec.environment, log_path=spec.log_path, accelerate_config=spec.accelerate_config)
        except FieldError as exc:  # a run stored before its options were refused (resumed now): never to sbatch
            raise EngineError(f"{exc.field}: {exc}") from None
        script = spec.run_dir / f"{spec.name}.sbatch"
        script.write_text(text)
        return self.submit_script(script, spec)

    def submit_script(self, script, spec: JobSpec) -> str:
        """sbatch of a written script with Evolab's own options on the command line, where they win over whatever
        the script's #SBATCH lines say (rl.launch.slurm_job_options); the job's id."""
        own = slurm_job_options(job_name=spec.name, nodes=spec.nodes, gpus=spec.gpus, log_path=spec.log_path,
                                code_dir=spec.code_dir)
        out = self._run("sbatch", "--parsable", *own, str(script)).stdout.strip()
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
