"""A run's Slurm options (DESIGN §4.9; docs/security.md, "Slurm options"), checked before they reach its job.

`partition`, `account` and `time_limit` have formats of their own. `sbatch` holds further options, written as #SBATCH
lines of the job's script, and sbatch reads those as getopt_long reads a command line: any unique prefix of a long
option's name is that option (`--outp` is `--output`, `--arr` is `--array`, `--chdi` is `--chdir`). Comparing names
exactly let such abbreviations through. So each name is resolved as sbatch resolves it, against the table of sbatch's
options (SBATCH_OPTIONS), and the option it resolves to must be on the allow-list (ALLOWED); it is then written under
its full name, which every sbatch reads alike (a newer sbatch, with more options, might find a prefix ambiguous).

Evolab's own options (the job's name, size, files, directory, environment and requeue: SET_BY_EVOLAB) are on sbatch's
command line (rl.launch.slurm_job_options), where they win over #SBATCH lines: a run may not give them at all.
"""

from __future__ import annotations

import re

from rl.params import FieldError

# whether a long option takes a value (getopt_long's has_arg): none, one (`--name=value`, or the next word), or one
# given only as `--name=value`
NONE, VALUE, MAYBE = "no_argument", "required_argument", "optional_argument"

# sbatch's long options in Debian's Slurm 22.05 (slurm-wlm 22.05.8): the entries of `common_options` in Slurm's
# src/common/slurm_opt.c that sbatch takes, in that order (getopt_long searches them in order). Some are
# undocumented (--batch, --kill-on-invalid-dep, --test-only, ...), yet sbatch takes them, and their prefixes, from
# #SBATCH lines. tests/rl/test_sbatch_options.py holds this table against the installed sbatch.
SBATCH_OPTIONS = {
    "account": VALUE, "acctg-freq": VALUE, "array": VALUE, "batch": VALUE, "begin": VALUE, "bb": VALUE, "bbf": VALUE,
    "cluster-constraint": VALUE, "chdir": VALUE, "cluster": VALUE, "clusters": VALUE, "comment": VALUE,
    "container": VALUE, "context": VALUE, "contiguous": NONE, "constraint": VALUE, "core-spec": VALUE,
    "cores-per-socket": VALUE, "cpu-freq": VALUE, "cpus-per-gpu": VALUE, "cpus-per-task": VALUE, "deadline": VALUE,
    "delay-boot": VALUE, "dependency": VALUE, "distribution": VALUE, "error": VALUE, "exclude": VALUE,
    "exclusive": MAYBE, "export": VALUE, "export-file": VALUE, "extra-node-info": VALUE, "get-user-env": MAYBE,
    "gid": VALUE, "gpu-bind": VALUE, "gpu-freq": VALUE, "gpus": VALUE, "gpus-per-node": VALUE,
    "gpus-per-socket": VALUE, "gpus-per-task": VALUE, "gres": VALUE, "gres-flags": VALUE, "help": NONE,
    "hint": VALUE, "hold": NONE, "ignore-pbs": NONE, "input": VALUE, "job-name": VALUE, "kill-on-invalid-dep": VALUE,
    "licenses": VALUE, "mail-type": VALUE, "mail-user": VALUE, "mcs-label": VALUE, "mem": VALUE, "mem-bind": VALUE,
    "mem-per-cpu": VALUE, "mem-per-gpu": VALUE, "mincpus": VALUE, "network": VALUE, "nice": MAYBE, "no-kill": MAYBE,
    "no-requeue": NONE, "nodefile": VALUE, "nodelist": VALUE, "nodes": VALUE, "ntasks": VALUE,
    "ntasks-per-core": VALUE, "ntasks-per-gpu": VALUE, "ntasks-per-node": VALUE, "ntasks-per-socket": VALUE,
    "ntasks-per-tres": VALUE, "open-mode": VALUE, "output": VALUE, "overcommit": NONE, "oversubscribe": NONE,
    "parsable": NONE, "partition": VALUE, "power": VALUE, "prefer": VALUE, "priority": VALUE, "profile": VALUE,
    "propagate": MAYBE, "qos": VALUE, "quiet": NONE, "reboot": NONE, "requeue": NONE, "reservation": VALUE,
    "signal": VALUE, "sockets-per-node": VALUE, "spread-job": NONE, "switches": VALUE, "tasks-per-node": VALUE,
    "test-only": NONE, "thread-spec": VALUE, "threads-per-core": VALUE, "time": VALUE, "time-min": VALUE,
    "tmp": VALUE, "uid": VALUE, "use-min-nodes": NONE, "verbose": NONE, "version": NONE, "usage": NONE, "wait": NONE,
    "wait-all-nodes": VALUE, "wckey": VALUE, "wrap": VALUE,
}
# one option under two names (one getopt `val`): a prefix matching both would not be ambiguous to getopt_long
SAME_OPTION = {"tasks-per-node": "ntasks-per-node"}

# What a run may ask of Slurm beyond partition, account and time: the shape of its allocation (which nodes, what
# hardware, how much of each node), when and how urgently it is scheduled (within what Slurm's limits already allow
# the account), and notes and mail. None changes what runs, where it reads or writes, who it runs as, how many jobs
# there are, or how Evolab follows the job. docs/security.md says why each of the others is refused.
ALLOWED = frozenset({
    # which nodes and what hardware
    "constraint", "prefer", "nodelist", "exclude", "contiguous", "switches", "reservation", "exclusive",
    # how much of each node, and how it is bound
    "mem", "mem-per-cpu", "mem-per-gpu", "cpus-per-task", "cpus-per-gpu", "mincpus", "tmp", "sockets-per-node",
    "cores-per-socket", "threads-per-core", "extra-node-info", "hint", "gres-flags", "gpu-bind", "gpu-freq",
    "cpu-freq", "mem-bind",
    # when, and how urgently
    "qos", "nice", "begin", "deadline", "time-min", "licenses", "signal",
    # notes and mail
    "comment", "mail-type", "mail-user",
})
# Evolab's, on sbatch's command line (rl.launch.slurm_job_options), and the options that would undo them: the job's
# name, its nodes, tasks and GPUs, its files, its directory and environment, whether Slurm requeues it, sbatch's output
SET_BY_EVOLAB = frozenset({
    "job-name", "nodes", "ntasks", "ntasks-per-node", "gpus", "gpus-per-node", "gres", "output", "error", "input",
    "open-mode", "chdir", "export", "requeue", "no-requeue", "parsable",
})
# the options that are fields of their own
OWN_FIELDS = {"partition": "partition", "account": "account", "time": "time_limit"}
# Slurm reads a node list that holds a / from the file it names
NODE_LISTS = ("nodelist", "exclude")
# sbatch reads these itself in an #SBATCH line: quotes group words, \ escapes, # starts a comment
SBATCH_LINE_SYNTAX = "\"'\\#"

# matched whole (fullmatch): `$` also matches before a final newline, and "gpu\n" became a blank line in the script
_SLURM_NAME = re.compile(r"[A-Za-z0-9_.,-]{1,64}")
_SLURM_TIME = re.compile(r"(\d{1,4}-)?\d{1,5}(:\d{1,2}){0,2}")
_SLURM_OPTION = re.compile(r"--([a-z][a-z0-9-]*)(?:=([\x21-\x7e]{1,200}))?")


def resolve_sbatch_option(given: str) -> str:
    """The name of the sbatch option that `--given` is, found as getopt_long finds it: the option of exactly that
    name, else the one option whose name starts with it. A ValueError says why when there is none, or several."""
    if given in SBATCH_OPTIONS:
        return given
    found = [name for name in SBATCH_OPTIONS if name.startswith(given)]
    if not found:
        raise ValueError(f"sbatch has no option --{given}")
    if len({(SAME_OPTION.get(name, name), SBATCH_OPTIONS[name]) for name in found}) > 1:
        raise ValueError(f"--{given} is ambiguous in sbatch: {', '.join('--' + name for name in found)}; "
                         f"write the option's full name")
    return found[0]


def _sbatch_option(option) -> str:
    """One extra option, checked and written under its full name, or a FieldError naming engine_options.sbatch."""
    def refuse(message: str):
        return FieldError("engine_options.sbatch", message)

    match = _SLURM_OPTION.fullmatch(option) if isinstance(option, str) else None
    if match is None:
        raise refuse(f"sbatch option {option!r} is not of the form --name or --name=value (printable, no spaces)")
    given, value = match.groups()
    try:
        found = resolve_sbatch_option(given)
    except ValueError as exc:
        raise refuse(f"sbatch option {option!r}: {exc}") from None
    name = SAME_OPTION.get(found, found)
    if given == name:
        said = f"sbatch option --{name} is an option that"
    else:  # what sbatch would read it as
        said = f"sbatch option --{given} is Slurm's --{name}, which"
    if name in OWN_FIELDS:
        raise refuse(f"{said} a run gives as engine_options.{OWN_FIELDS[name]}")
    if name in SET_BY_EVOLAB:
        raise refuse(f"{said} Evolab sets itself")
    if name not in ALLOWED:
        raise refuse(f"{said} a run may not set; it may set {', '.join('--' + each for each in sorted(ALLOWED))}")
    if value is None and SBATCH_OPTIONS[name] == VALUE:
        # alone, it would take the next #SBATCH word as its value
        raise refuse(f"sbatch option --{given} needs a value: --{name}=VALUE")
    if value is not None and SBATCH_OPTIONS[name] == NONE:
        raise refuse(f"sbatch option --{given} takes no value, not {value!r}")
    if value is not None and set(value) & set(SBATCH_LINE_SYNTAX):
        raise refuse(f"sbatch option {option!r}: sbatch reads quotes, \\ and # in an #SBATCH line itself; "
                     f"leave them out of the value")
    if name in NODE_LISTS and "/" in value:
        raise refuse(f"sbatch option {option!r} names a file (Slurm reads a node list holding a / from the file "
                     f"it names): give the nodes' names")
    return f"--{name}" + ("" if value is None else f"={value}")


def slurm_options(options: dict | None) -> dict:
    """A run's (or a worker's) Slurm options, checked: `partition` and `account` (names), `time_limit` (Slurm's
    formats: minutes, H:M:S, D-H...), `sbatch` (up to 20 further options from ALLOWED, `--name` or `--name=value`
    each, printable, no spaces, abbreviations resolved as sbatch resolves them and written in full). They become
    #SBATCH lines of the job's script, which its shell reads as comments: never run, never unquoted.
    A FieldError names the option that is wrong, as `engine_options.<option>` (a run's field)."""
    options = dict(options or {})
    unknown = sorted(set(options) - {"partition", "account", "time_limit", "sbatch"})
    if unknown:
        raise FieldError(f"engine_options.{unknown[0]}",
                         f"unknown Slurm option {unknown[0]!r}: expected partition, account, time_limit or sbatch")
    clean = {}
    for name in ("partition", "account"):
        value = options.get(name)
        if value in (None, ""):
            continue
        if not isinstance(value, str) or not _SLURM_NAME.fullmatch(value):
            raise FieldError(f"engine_options.{name}",
                             f"{name} must be a Slurm name (letters, digits, _ . , -), not {value!r}")
        clean[name] = value
    value = options.get("time_limit")
    if value not in (None, ""):
        if not isinstance(value, str) or not _SLURM_TIME.fullmatch(value):
            raise FieldError("engine_options.time_limit",
                             f"time_limit must be in Slurm's format (minutes, H:M:S, D-H:M:S), not {value!r}")
        clean["time_limit"] = value
    extra = options.get("sbatch") or []
    if isinstance(extra, str):
        extra = extra.split()
    if not isinstance(extra, list) or len(extra) > 20:
        raise FieldError("engine_options.sbatch",
                         "sbatch must be a list of at most 20 options such as '--constraint=a100'")
    if extra:
        clean["sbatch"] = [_sbatch_option(option) for option in extra]
    return clean
