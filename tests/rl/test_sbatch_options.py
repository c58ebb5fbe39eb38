"""rl.sbatch_options' table of sbatch's long options, held against the sbatch installed here (Debian's slurm-wlm
22.05): every name in the table is one of sbatch's, taking a value as the table says; every option sbatch documents is
in the table; and every prefix of every name resolves as sbatch's getopt_long resolves it (the option, ambiguous, or
none). Skipped where Slurm's client is not installed (`make test` installs it when it runs as root).

sbatch is given a slurm.conf of its own whose controller is a bound, never listening, loopback port: it reads its
options and fails at once to reach a controller, so nothing is ever submitted and no daemon is needed."""
import re
import shutil
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest

from rl.sbatch_options import MAYBE, NONE, SBATCH_OPTIONS, VALUE, resolve_sbatch_option

pytestmark = pytest.mark.skipif(shutil.which("sbatch") is None,
                                reason="Slurm's sbatch is not installed (apt-get install slurm-client)")


@pytest.fixture(scope="module")
def sbatch(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sbatch")
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))  # bound, not listening: a connection to it is refused at once
    (folder / "slurm.conf").write_text(f"ClusterName=probe\nSlurmctldHost=localhost(127.0.0.1)\n"
                                       f"SlurmctldPort={closed.getsockname()[1]}\nMessageTimeout=1\n")
    (folder / "job.sh").write_text("#!/bin/bash\ntrue\n")

    def run(*argv) -> str:
        done = subprocess.run(["sbatch", *argv], capture_output=True, text=True, timeout=30, cwd=folder,
                              stdin=subprocess.DEVNULL, env={"SLURM_CONF": str(folder / "slurm.conf"),
                                                             "PATH": "/usr/bin:/bin"})
        return done.stdout + done.stderr

    run.script = str(folder / "job.sh")
    yield run
    closed.close()


def sbatch_reads(sbatch, given: str):
    """What sbatch takes `--given` for: the option's name, ("ambiguous", its possibilities) or None (no option)."""
    said = sbatch(f"--{given}")
    if f"unrecognized option '--{given}'" in said:
        return None
    ambiguous = re.search(rf"option '--{re.escape(given)}' is ambiguous; possibilities:(.*)", said)
    if ambiguous:
        return "ambiguous", sorted(re.findall(r"'--([a-z0-9-]+)'", ambiguous.group(1)))
    needs = re.search(r"option '--([a-z0-9-]+)' requires an argument", said)
    if needs:
        return needs.group(1)
    takes_none = re.search(r"option '--([a-z0-9-]+)' doesn't allow an argument", sbatch(f"--{given}=x"))
    if takes_none:
        return takes_none.group(1)
    # an option whose value may be left out: `-v` lists the options sbatch set (before it tries the controller)
    defined = sbatch("-v", f"--{given}", sbatch.script).split("defined options", 1)[1]
    return next(name for name in re.findall(r"sbatch: ([a-z][a-z0-9-]*) +: ", defined) if name != "verbose")


def test_every_option_in_the_table_is_one_of_sbatchs_taking_a_value_as_the_table_says(sbatch):
    for name, takes in SBATCH_OPTIONS.items():
        alone, with_value = sbatch(f"--{name}"), sbatch(f"--{name}=x")
        assert "unrecognized option" not in alone and "ambiguous" not in alone, (name, alone)
        assert (f"option '--{name}' requires an argument" in alone) == (takes == VALUE), (name, takes, alone)
        assert (f"option '--{name}' doesn't allow an argument" in with_value) == (takes == NONE), (name, takes)
        if takes == MAYBE:  # taken alone, without swallowing the next word as its value
            assert sbatch(f"--{name}", "--usage").startswith("Usage: sbatch"), name


def test_every_option_sbatch_documents_is_in_the_table(sbatch):
    documented = set(re.findall(r"--([a-z][a-z0-9-]+)", sbatch("--help") + sbatch("--usage")))
    assert len(documented) > 80 and documented <= set(SBATCH_OPTIONS), sorted(documented - set(SBATCH_OPTIONS))


def ours(given: str):
    try:
        return resolve_sbatch_option(given)
    except ValueError as refused:
        said = str(refused)
        if "ambiguous" in said:
            return "ambiguous", sorted(re.findall(r"--([a-z0-9-]+)", said.split(":", 1)[1]))
        assert "has no option" in said, said
        return None


def test_every_abbreviation_resolves_as_sbatch_resolves_it(sbatch):
    prefixes = sorted({name[:end] for name in SBATCH_OPTIONS for end in range(1, len(name) + 1)} | {"x", "out-"})
    with ThreadPoolExecutor(4) as pool:
        theirs = dict(zip(prefixes, pool.map(lambda given: sbatch_reads(sbatch, given), prefixes)))
    differ = {given: (ours(given), theirs[given]) for given in prefixes if ours(given) != theirs[given]}
    assert not differ, differ
    assert theirs["outp"] == "output" and theirs["arr"] == "array" and theirs["x"] is None  # the test tells them apart
