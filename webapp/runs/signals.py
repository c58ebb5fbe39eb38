"""What the runs app tells the apps built on it, which it never imports (tests/test_layers.py)."""
from django.dispatch import Signal

# A run is being deleted (webapp/runs/actions.py::delete_run), inside its transaction, before its rollouts, groups
# and events go in a statement each: a receiver removes what it keeps of them that no cascade reaches (the
# explorer's text index). Sent with `run`.
run_deleting = Signal()
