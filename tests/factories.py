"""Small builders for test data."""
from contextlib import contextmanager

from webapp.prompts.models import PromptSet
from webapp.prompts.parsing import PromptRow, ParsedPromptSet


def make_team(name="lab", **members):
    """A team with members given as username=role; users are created when missing."""
    from django.contrib.auth import get_user_model

    from webapp.accounts.models import Membership, Team

    team, _ = Team.objects.get_or_create(name=name)
    for username, role in members.items():
        user, _ = get_user_model().objects.get_or_create(username=username)
        Membership.objects.update_or_create(team=team, user=user, defaults={"role": role})
    return team


def team_of(user):
    """The user's only team, made (with the user as admin) when they have none."""
    from webapp.accounts.models import Membership, Team

    team = Team.objects.of(user).first()
    if team is None:
        team, _ = Team.objects.get_or_create(name=f"team-{user.username}")
        Membership.objects.create(team=team, user=user, role=Membership.ADMIN)
    return team


def make_prompt_set(owner, rows=None, name="arith", team=None):
    rows = rows or [("p1", "What is 2 + 3?", "5"), ("p2", "What is 7 - 4?", "3")]
    parsed = ParsedPromptSet(
        rows=[PromptRow(id=i, prompt=p, label=label, position=n) for n, (i, p, label) in enumerate(rows, 1)],
        format="json",
    )
    return PromptSet.create_from_parsed(name=name, owner=owner, team=team or team_of(owner), filename=f"{name}.json",
                                        parsed=parsed)


def event_log(steps=2, prompts=("p1", "p2"), group_size=4, start_seq=0, start_step=1):
    """A trainer-shaped event log (DESIGN §4.2) for ingestion tests."""
    events, seq, t = [], start_seq, 1_700_000_000.0

    def add(**e):
        nonlocal seq, t
        events.append({"seq": seq, "time": t, **e})
        seq += 1
        t += 0.5

    if start_seq == 0:
        add(type="status", state="running", message="")
    for step in range(start_step, start_step + steps):
        for pid in prompts:
            rollouts = [
                {
                    "index": i,
                    "text": f"{i} + 1 = {i + 1}. The answer is \\boxed{{{5 if i % 2 else 6}}}.",
                    "answer": "5" if i % 2 else "6",
                    "valid": True,
                    "in_majority": bool(i % 2),
                    "reward": 1.0 if i % 2 else 0.0,
                    "advantage": 0.87 if i % 2 else -0.87,
                    "length": 20 + i,
                    "used_for_training": i < group_size // 2,
                    "entropy": 0.5,
                    "extra": {},
                }
                for i in range(group_size)
            ]
            add(type="group", step=step, prompt_id=pid, majority_answer="5", similarity=None, rollouts=rollouts)
        add(type="metrics", step=step, values={"entropy": 1.0 / step, "response_length/mean": 20.0 + step,
                                                 "reward/mean": 0.5, "majority_ratio": 0.5, "label_accuracy": 0.5})
    add(type="checkpoint", step=start_step + steps - 1, path=f"checkpoints/step-{start_step + steps - 1}")
    add(type="status", state="succeeded", message="")
    return events


def migrate_to(targets):
    """Migrate the test database to `targets` ([(app, migration)]) and return the apps of that state."""
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    executor.loader.build_graph()
    executor.migrate(targets)
    return executor.loader.project_state(targets).apps


@contextmanager
def migrated_from(targets):
    """The test database at a past migration state `targets`, with that state's apps; migrated to the latest after."""
    try:
        yield migrate_to(targets)
    finally:
        migrate_to_latest()


def run_in(apps):
    """A run (with its user, team and prompt set) made through the models of a past migration state."""
    user = apps.get_model("auth", "User").objects.create(username="ada")
    team = apps.get_model("accounts", "Team").objects.create(name="t")
    prompt_set = apps.get_model("prompts", "PromptSet").objects.create(name="s", owner=user, format="json", team=team)
    return apps.get_model("runs", "Run").objects.create(name="r", method="ttrl", prompt_set=prompt_set, max_steps=9,
                                                         created_by=user, team=team)


def migrate_to_latest():
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    migrate_to(MigrationExecutor(connection).loader.graph.leaf_nodes())


SEARCH_WORDS = ["carry the one", "subtract seven", "multiply both sides", "the answer is boxed"]


def searchable_events():
    """Group events of 3 steps × 2 prompts × 4 rollouts whose fields vary enough to sort and filter
    on: some rewards missing, some rollouts invalid or untrained, a novelty extra on most."""
    def rollout(step, p, i):
        reward = None if (step + i) % 5 == 0 else float((step * 7 + i * 3) % 4) / 4
        return {"index": i, "text": f"step {step}: {SEARCH_WORDS[i % 4]} \\boxed{{{step + i}}}",
                "answer": str((step + i) % 3), "valid": i != 3, "in_majority": i % 2 == 0, "reward": reward,
                "advantage": None if reward is None else reward - 0.5, "length": 100 + (step * 13 + i * 7 + p * 5) % 17,
                "used_for_training": i < 3, "entropy": 0.1,
                "extra": {"novelty": round(((step + p + i) * 0.37) % 1, 3)} if i != 2 else {}}

    events, seq = [], 0
    for step in (1, 2, 3):
        for p, prompt in enumerate(("p1", "p2")):
            events.append({"seq": seq, "time": 1.7e9 + seq, "type": "group", "step": step, "prompt_id": prompt,
                           "majority_answer": "0", "similarity": None, "rollouts": [rollout(step, p, i) for i in range(4)]})
            seq += 1
    return events


def search_every_page(client, run, **params):
    """(every result, number of pages) of GET /api/runs/{id}/rollouts/search, following next_cursor."""
    results, cursor, pages = [], None, 0
    while True:
        response = client.get(f"/api/runs/{run.pk}/rollouts/search", {**params, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.content
        body = response.json()
        results += body["results"]
        pages += 1
        cursor = body["next_cursor"]
        if cursor is None:
            return results, pages


def live_messages(channel_message: dict) -> list[dict]:
    """The messages of one channel-layer event of a run's or team's group (webapp/live.py sends them
    as JSON frames, encoded once for every watcher)."""
    import json

    return [json.loads(frame) for frame in channel_message["frames"]]


class RunStream:
    """Reads the pushes made to a run's live stream (webapp/live.py) after this reader was made, as a web
    server process's hub does: `receive()` is the next push's messages."""

    def __init__(self, run_id: int):
        import redis
        from django.conf import settings

        from webapp.live import run_stream_key

        self.redis, self.key = redis.Redis.from_url(settings.REDIS_URL), run_stream_key(run_id)
        last = self.redis.xrevrange(self.key, count=1)
        self.after = last[0][0] if last else b"0-0"

    def receive(self, timeout_ms: int = 5000) -> list[dict]:
        import json

        answer = self.redis.xread({self.key: self.after}, count=1, block=timeout_ms)
        assert answer, "nothing was pushed to the run"
        ((_, ((entry_id, fields),)),) = answer
        self.after = entry_id
        return [json.loads(frame) for frame in fields[b"frames"].decode().split("\n")]


class TeamListener:
    """Receives the live messages sent to a team's group (ws/teams/{id}/: the run list, the alerts page) after this
    listener was made, through the channel layer as a web server's socket does: `receive()` is the next event's."""

    def __init__(self, team_id: int):
        from asgiref.sync import async_to_sync
        from channels.layers import get_channel_layer

        from webapp.live import team_group_name

        self.layer = get_channel_layer()
        self.channel = async_to_sync(self.layer.new_channel)()
        async_to_sync(self.layer.group_add)(team_group_name(team_id), self.channel)

    def receive(self, timeout: float = 5) -> list[dict]:
        import asyncio

        from asgiref.sync import async_to_sync

        async def one():
            return await asyncio.wait_for(self.layer.receive(self.channel), timeout=timeout)

        return live_messages(async_to_sync(one)())


def signed_in(django_user_model, username):
    """A test client signed in as the existing user `username`."""
    from django.test import Client

    client = Client()
    client.force_login(django_user_model.objects.get(username=username))
    return client


def charts_of(run) -> dict:
    """The run's stored series as the pages read them: {name: {"steps", "values", "times"}}."""
    from webapp.runs.queries import metric_series_of_runs

    return metric_series_of_runs([run.pk])[run.pk]
