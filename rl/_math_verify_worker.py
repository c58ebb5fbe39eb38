"""Child process that runs math-verify comparisons for rl.answers.

It is a separate process because some inputs (for example ``10^{10^{10}}``) make
SymPy compute a huge integer inside one C call: neither signals nor threads can
interrupt that, only killing the process can. The parent sends one JSON line
``[a, b]`` per comparison on stdin and reads one JSON line back: ``true``,
``false`` or ``null`` (math-verify could not parse or compare).

This file is run as a script and imports nothing from ``rl`` so that it starts
quickly and never pulls Django or torch in.
"""

import json
import logging
import os
import sys


def _die_with_parent() -> None:
    # On Linux, ask the kernel to kill us when the parent goes away, so that a
    # comparison stuck in C never outlives the trainer that asked for it.
    try:
        import ctypes
        import signal

        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        libc.prctl(pr_set_pdeathsig, signal.SIGKILL)
    except Exception:  # not Linux, or no libc: stdin EOF still ends the loop
        pass


def main() -> None:
    _die_with_parent()
    parent = int(sys.argv[1]) if len(sys.argv) > 1 else None
    if parent is not None and os.getppid() != parent:
        return  # the parent died before prctl took effect
    logging.disable(logging.CRITICAL)  # math-verify warns about disabled timeouts
    from math_verify import parse, verify

    # Warm up (imports SymPy's parser) before saying ready, so that the parent's
    # per-comparison time limit never has to cover our start-up.
    verify(parse("\\boxed{1/2}", parsing_timeout=None), parse("\\boxed{0.5}", parsing_timeout=None), timeout_seconds=None)
    sys.stdout.write("ready\n")
    sys.stdout.flush()

    for line in sys.stdin:
        try:
            a, b = json.loads(line)
            # Timeouts off: they use signal.alarm, and the parent enforces its own.
            gold = parse("\\boxed{" + a + "}", parsing_timeout=None)
            pred = parse("\\boxed{" + b + "}", parsing_timeout=None)
            if not gold or not pred:
                result = None
            else:
                result = bool(verify(gold, pred, timeout_seconds=None))
        except Exception:
            result = None
        sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
