import pytest

from tests.factories import make_prompt_set, searchable_events


@pytest.fixture
def signed_in(client, user):
    """The test client signed in as `user` (ada)."""
    client.force_login(user)
    return client


@pytest.fixture
def searched_run(user):
    """An EVOL-RL run holding searchable_events' 24 rollouts (the rollout search and export tests)."""
    from webapp.runs.models import Run
    from webapp.runs.ingestion import ingest_events

    run = Run.objects.create(name="r", method="evol_rl", prompt_set=make_prompt_set(user), max_steps=10, created_by=user)
    ingest_events(run, searchable_events())
    return run
