"""The long scenarios (`make scenarios`): a worker killed or shut down mid-run, its database or Redis going away,
two hosts sharing run directories, cancels and resumes through the API and by SIGTERM, the default launch trained to
its end. Each takes a minute or more of real training, so they live here rather than in `make test` (its 30-minute
budget on two cores) or `make test-fast`; `.ci/run` runs them after `make test`. They use the suite's fixtures, by
name: one definition of the live stack and its users, the tests' own."""
from tests.conftest import flushes_retry_a_deadlock, live_stack  # noqa: F401
from tests.e2e.conftest import api, live_user  # noqa: F401
