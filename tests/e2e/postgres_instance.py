"""A PostgreSQL server of a test's own: its own data directory and port, so a fault test can stop
and start it without touching the database the other tests use. Debian's server binaries; initdb
refuses root, so as root it runs as the `postgres` user."""
import glob
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from scripts.stack import free_port

BIN = sorted(glob.glob("/usr/lib/postgresql/*/bin"))[-1:] or [None]
BIN = BIN[0]


def available() -> str | None:
    """None when a server can be started here, else why not."""
    if BIN is None or not os.path.exists(os.path.join(BIN, "pg_ctl")):
        return "no PostgreSQL server binaries (/usr/lib/postgresql/*/bin)"
    if os.geteuid() == 0 and (shutil.which("runuser") is None or _no_postgres_user()):
        return "running as root without runuser and a postgres user"
    return None


def _no_postgres_user() -> bool:
    import pwd

    try:
        pwd.getpwnam("postgres")
        return False
    except KeyError:
        return True


class PostgresInstance:
    def __init__(self):
        self.root = Path(tempfile.mkdtemp(prefix="evolab-pg-"))
        self.data, self.log = self.root / "data", self.root / "server.log"
        self.port = free_port()
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres", "postgres")

    def _run(self, *command: str) -> None:
        prefix = ["runuser", "-u", "postgres", "--"] if os.geteuid() == 0 else []
        result = subprocess.run(prefix + [os.path.join(BIN, command[0]), *command[1:]], capture_output=True, text=True)
        if result.returncode:
            raise RuntimeError(f"{command[0]} failed: {result.stderr or result.stdout}")

    def init(self, database: str = "evolab") -> str:
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", "postgres", "--no-sync")
        self.start()
        self._run("createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", database)
        return f"postgres://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> None:
        options = f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off"
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self) -> None:
        """A fast shutdown: every connection is cut, as in a crash or a failover."""
        self._run("pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def remove(self) -> None:
        try:
            self.stop()
        except RuntimeError:
            pass
        shutil.rmtree(self.root, ignore_errors=True)
