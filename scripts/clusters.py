"""A local cluster engine on this machine's loopback addresses only, for trying Evolab's cluster launchers (README,
"Run on a cluster") and for the tests (tests/e2e/test_slurm_engine.py, test_ray_engine.py):

    .venv/bin/python scripts/clusters.py ray     # a Ray head on 127.0.0.2 and a second node on 127.0.0.3
    .venv/bin/python scripts/clusters.py slurm   # as root: munged, slurmctld and two slurmd nodes

Each prints the variables a worker needs and runs until Ctrl-C or SIGTERM, then stops its daemons and removes its
folder. Slurm: Debian's slurm-wlm and munge, every daemon a child of this process, its state, spool, logs and munge
key in a temporary folder that SLURM_CONF names (the system's /etc/slurm untouched). Ray: the `ray` package from
PyPI, usage reports off and no cloud metadata probe.

Daemons run in the foreground as children of this process, which is made a child subreaper: a container's PID 1
may reap no orphan, and a daemon's stray child (a job step that daemonized) must not be left a zombie."""
import ctypes
import functools
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
SLURM_BINARIES = ("munged", "slurmctld", "slurmd", "sbatch", "squeue", "scontrol", "scancel", "sacct", "sinfo")


def free_port(host="127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


def become_subreaper() -> None:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def reap_orphans() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _start_time(pid: int) -> str | None:
    """The process's start time (in clock ticks since boot), which tells it from a later one given the same pid."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def process_tree(roots: list[int]) -> dict[int, str]:
    """Each process under `roots`, them included, with its start time."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    children.setdefault(int(f.read().rsplit(")", 1)[1].split()[1]), []).append(int(entry))
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(), list(roots)
    while frontier:
        pid = frontier.pop()
        if pid not in found:
            found.add(pid)
            frontier.extend(children.get(pid, ()))
    return {pid: start for pid in found if (start := _start_time(pid)) is not None}


def kill_tree(processes: list[subprocess.Popen], timeout: float = 10.0) -> None:
    """SIGKILL, at once, these children (each the leader of a process group of its own), their groups and every
    process under them, those that left the group for a session of their own included; then wait until each is
    gone (reaped: this process is their subreaper). For a throwaway cluster, whose state nobody reads again."""
    tree = process_tree([p.pid for p in processes if p.poll() is None])
    for process in processes:
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for pid, start in tree.items():
        if _start_time(pid) == start:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    for process in processes:
        process.wait()
    deadline = time.monotonic() + timeout
    while True:
        reap_orphans()
        if not any(_start_time(pid) == start for pid, start in tree.items()) or time.monotonic() > deadline:
            return
        time.sleep(0.02)


# What a cluster's daemons and jobs may ask for names: loopback, where nothing answers (or a local cache does)
LOOPBACK_RESOLV_CONF = "nameserver 127.0.0.1\noptions timeout:1 attempts:1\n"


@functools.cache
def _mount_namespaces_allowed() -> bool:
    return os.geteuid() == 0 and shutil.which("unshare") is not None and subprocess.run(
        ["unshare", "--mount", "true"], capture_output=True).returncode == 0


def with_loopback_resolver(argv: list[str], folder: Path) -> list[str]:
    """argv, run where the machine's nameserver is out of reach: in a mount namespace of its own, which its children
    (the jobs) inherit, /etc/resolv.conf is one naming loopback, so a name /etc/hosts cannot answer fails here
    instead of leaving the machine. Every address the daemons and jobs are given is a loopback one, yet they look
    names up: torch's c10d store asks for the name of each peer, 127.0.0.1 included (accepted as ::ffff:127.0.0.1,
    which glibc sends to the nameserver), munged its host's. Unchanged where mount namespaces are not allowed."""
    if not _mount_namespaces_allowed():
        return list(argv)
    resolv_conf = folder / "resolv.conf"
    resolv_conf.write_text(LOOPBACK_RESOLV_CONF)
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c",
            'mount --bind "$0" /etc/resolv.conf && exec "$@"', str(resolv_conf), *argv]


def slurm_missing() -> str | None:
    missing = [b for b in SLURM_BINARIES if shutil.which(b) is None]
    if missing:
        return (f"Slurm's {', '.join(missing)} not installed: `make test` installs Debian's slurm-wlm and munge when "
                f"it runs as root (apt-get install slurm-wlm munge)")
    return None


class LocalCluster:
    """A cluster of daemons, children of this process, with its state and logs in a folder of its own."""

    def __init__(self, name: str):
        self.root = Path(tempfile.mkdtemp(prefix=f"evolab-{name}-"))
        self.processes: list[subprocess.Popen] = []

    def _wait(self, ready, timeout, what) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [p.name for p in self.processes if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                logs = "".join(p.read_text(errors="replace")[-2000:] for p in (self.root / "log").glob("*"))
                raise RuntimeError(f"no {what} ({'exited: ' + ', '.join(dead) if dead else 'timed out'}):\n{logs}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Kills every daemon at once, every process of theirs with them (Ray's job drivers, in sessions of their
        own, included): the cluster is thrown away, its state in its folder, so nothing is lost (slurmctld takes
        seconds to save it on SIGTERM; `ray start --block` stops its node gracefully on SIGTERM, but takes 10 s
        and more per node to)."""
        kill_tree(self.processes)
        shutil.rmtree(self.root, ignore_errors=True)


class SlurmCluster(LocalCluster):
    """munged, slurmctld and slurmd n1 and n2 (one CPU each, NodeAddr 127.0.0.1), jobs' completion logged to a
    file (sacct -c) and remembered for an hour (MinJobAge), requeue allowed."""

    def __init__(self):
        super().__init__("slurm")
        self.conf = self.root / "slurm.conf"

    @property
    def env(self) -> dict:
        return {"SLURM_CONF": str(self.conf)}

    def start(self, timeout: float = 60.0) -> "SlurmCluster":
        become_subreaper()
        root = self.root
        os.chmod(root, 0o755)
        munge = root / "munge"
        munge.mkdir(mode=0o711)
        os.chmod(munge, 0o711)  # munged wants the socket's folder executable by all, not writable by others
        (munge / "munge.key").write_bytes(os.urandom(128))
        os.chmod(munge / "munge.key", 0o400)
        for folder in ("state", "spool/n1", "spool/n2", "log"):
            (root / folder).mkdir(parents=True)
        ctld, n1, n2 = free_port(), free_port(), free_port()
        self.conf.write_text(f"""ClusterName=evolabtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={ctld}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket={munge}/munge.socket
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc={root}/log/jobcomp.txt
ReturnToService=2
MinJobAge=3600
KillWait=10
SchedulerParameters=sched_interval=2
StateSaveLocation={root}/state
SlurmdSpoolDir={root}/spool/%n
SlurmctldPidFile={root}/slurmctld.pid
SlurmdPidFile={root}/slurmd-%n.pid
SlurmctldLogFile={root}/log/slurmctld.log
SlurmdLogFile={root}/log/slurmd-%n.log
MailProg=/bin/true
NodeName=n1 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n1} CPUs=1 RealMemory=4000 State=UNKNOWN
NodeName=n2 NodeHostname=localhost NodeAddr=127.0.0.1 Port={n2} CPUs=1 RealMemory=4000 State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
""")
        env = {**os.environ, **self.env}
        self._start(env, "munged", "-F", f"--key-file={munge}/munge.key", f"--socket={munge}/munge.socket",
                    f"--pid-file={munge}/munged.pid", f"--log-file={munge}/munged.log", f"--seed-file={munge}/munged.seed")
        self._wait(lambda: (munge / "munge.socket").exists(), timeout, "munged's socket")
        self._start(env, "slurmctld", "-D", "-i", "-f", str(self.conf))
        self._start(env, "slurmd", "-D", "-N", "n1", "-f", str(self.conf))
        self._start(env, "slurmd", "-D", "-N", "n2", "-f", str(self.conf))
        self._wait(lambda: self.sinfo() == "idle 2", timeout, "two idle Slurm nodes")
        return self

    def _start(self, env, *argv) -> None:
        log = open(self.root / "log" / f"{argv[0]}-{len(self.processes)}.out", "wb")
        process = subprocess.Popen(with_loopback_resolver(list(argv), self.root), env=env, stdout=log,
                                   stderr=subprocess.STDOUT, start_new_session=True)
        process.name = argv[0]
        self.processes.append(process)

    def sinfo(self) -> str:
        return self.run("sinfo", "--noheader", "--format=%T %D").stdout.strip()

    def run(self, *argv) -> subprocess.CompletedProcess:
        return subprocess.run(list(argv), env={**os.environ, **self.env}, capture_output=True, text=True, timeout=30)



def ray_binary() -> str:
    """The `ray` command of the venv the tests run in (PyPI's ray, a requirement)."""
    import sys

    return str(Path(sys.executable).with_name("ray"))


class RayCluster(LocalCluster):
    """A Ray head on 127.0.0.2 and a second node on 127.0.0.3, one CPU each, both `ray start --block` children of
    this process. Kept on loopback: every address and port given, usage stats off and their report URL pointed at
    a closed loopback port, and a HOME holding a ray_bootstrap_config.yaml (Ray then believes it is on a cluster it
    launched itself and does not probe cloud metadata addresses). Worker ports sit below Ray's default range so the
    two nodes' workers do not collide."""

    HEAD, SECOND = "127.0.0.2", "127.0.0.3"

    def __init__(self):
        super().__init__("ray")
        self.home = self.root / "home"
        self.dashboard_port = free_port(self.HEAD)
        self.gcs_port = free_port(self.HEAD)

    @property
    def address(self) -> str:
        """The Jobs REST API's address, RAY_ADDRESS for the worker."""
        return f"http://{self.HEAD}:{self.dashboard_port}"

    @property
    def env(self) -> dict:
        """What every process that talks to the cluster is started with (the worker included)."""
        return {"RAY_USAGE_STATS_ENABLED": "0", "RAY_USAGE_STATS_REPORT_URL": "http://127.0.0.1:9/usage",
                "RAY_USAGE_STATS_PROMPT_ENABLED": "0", "HOME": str(self.home), "RAY_ADDRESS": self.address,
                # a job waiting for resources it will never get fails after this (Ray's default is 15 minutes)
                "RAY_JOB_START_TIMEOUT_SECONDS": "600"}

    def _ports(self, host: str, first_worker: int) -> list[str]:
        return ["--node-ip-address", host, "--node-manager-port", str(free_port(host)),
                "--object-manager-port", str(free_port(host)), "--metrics-export-port", str(free_port(host)),
                "--dashboard-agent-listen-port", str(free_port(host)),
                "--dashboard-agent-grpc-port", str(free_port(host)),
                "--runtime-env-agent-port", str(free_port(host)),
                "--min-worker-port", str(first_worker), "--max-worker-port", str(first_worker + 199)]

    def start(self, timeout: float = 120.0) -> "RayCluster":
        become_subreaper()
        self.home.mkdir()
        (self.home / "ray_bootstrap_config.yaml").write_text("cluster_name: evolab-test\nprovider:\n  type: local\n")
        env = {**os.environ, **self.env}
        env.pop("RAY_ADDRESS")  # the head is not yet there to join
        first = 20000 + (os.getpid() % 30) * 400  # below the kernel's ephemeral ports, which free_port() hands out
        self._start(env, "head", "--head", "--port", str(self.gcs_port), "--dashboard-host", self.HEAD,
                    "--dashboard-port", str(self.dashboard_port), "--ray-client-server-port",
                    str(free_port(self.HEAD)), "--temp-dir", str(self.root / "t"), "--num-cpus", "1",
                    "--num-gpus", "0", "--disable-usage-stats", *self._ports(self.HEAD, first))
        # the second node starts once the head is up, job API and all: started beside it, on two cores, both come up
        # slower and the first job waits longer (measured: 9 s more for the first test, setup and call)
        self._wait(self._head_answers, timeout, "Ray's job API")
        self._start(env, "second", "--address", f"{self.HEAD}:{self.gcs_port}", "--num-cpus", "1", "--num-gpus", "0",
                    "--disable-usage-stats", *self._ports(self.SECOND, first + 200))
        self._wait(lambda: self.alive_nodes() == 2, timeout, "two live Ray nodes")
        return self

    def _start(self, env, name, *argv) -> None:
        (self.root / "log").mkdir(exist_ok=True)
        log = open(self.root / "log" / f"ray-{name}.out", "wb")
        process = subprocess.Popen(with_loopback_resolver([ray_binary(), "start", "--block", *argv], self.root),
                                   env=env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True)
        process.name = name
        self.processes.append(process)

    def get(self, path: str):
        import json
        import urllib.request

        with urllib.request.urlopen(self.address + path, timeout=10) as response:
            return json.loads(response.read())

    def _head_answers(self) -> bool:
        try:
            self.get("/api/jobs/")
            return True
        except OSError:
            return False

    def alive_nodes(self) -> int:
        try:
            nodes = self.get("/nodes?view=summary")["data"]["summary"]
        except (OSError, KeyError, ValueError):
            return 0
        return sum(1 for node in nodes if node.get("raylet", {}).get("state") == "ALIVE")

    def job(self, submission_id: str) -> dict:
        return self.get(f"/api/jobs/{submission_id}")



def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="scripts/clusters.py", description="a local Slurm or Ray cluster on loopback")
    parser.add_argument("engine", choices=("slurm", "ray"))
    engine = parser.parse_args(argv).engine
    if engine == "slurm" and slurm_missing():
        parser.error(slurm_missing())
    cluster = SlurmCluster() if engine == "slurm" else RayCluster()
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(True))
    cluster.start()
    try:
        if engine == "slurm":
            print(f"A Slurm cluster of two nodes (n1, n2) is up. For a worker, and for sbatch/squeue/scancel:\n\n"
                  f"  export EVOLAB_TRAINER_LAUNCHER=slurm SLURM_CONF={cluster.conf}\n", flush=True)
        else:
            print(f"A Ray cluster of two nodes ({cluster.HEAD}, {cluster.SECOND}) is up; its dashboard is at "
                  f"{cluster.address}. For a worker:\n\n"
                  f"  export EVOLAB_TRAINER_LAUNCHER=ray RAY_ADDRESS={cluster.address}\n", flush=True)
        print("Ctrl-C stops it.", flush=True)
        while not stop:
            time.sleep(0.5)
            reap_orphans()
    except KeyboardInterrupt:
        pass
    finally:
        cluster.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
