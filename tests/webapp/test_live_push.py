"""webapp.live: a run's pushes are appended to its stream over one long-lived Redis connection per process."""
import redis
from django.conf import settings

from tests.factories import RunStream
from webapp.live import push


def connections_received() -> int:
    return int(redis.Redis.from_url(settings.REDIS_URL).info("stats")["total_connections_received"])


def test_many_pushes_reuse_one_redis_connection():
    push(10_001, [{"type": "warm-up"}])  # the first push may open the connection
    before = connections_received()
    for n in range(30):
        push(10_001, [{"type": "metrics", "step": n}])
    # one connection for the INFO calls themselves, none for the pushes (each push used to open one)
    assert connections_received() - before <= 2


def test_a_push_is_one_entry_of_the_runs_stream_in_order():
    stream = RunStream(10_002)
    push(10_002, [{"type": "metrics", "step": 7}, {"type": "metrics", "step": 8}])
    push(10_002, [{"type": "metrics", "step": 9}])
    assert stream.receive() == [{"type": "metrics", "step": 7}, {"type": "metrics", "step": 8}]
    assert stream.receive() == [{"type": "metrics", "step": 9}]


def test_a_value_json_cannot_carry_is_sent_as_null():
    stream = RunStream(10_003)
    push(10_003, [{"type": "metrics", "step": 1, "values": {"loss": float("nan"), "kl": float("inf"), "x": 0.5}}])
    assert stream.receive() == [{"type": "metrics", "step": 1, "values": {"loss": None, "kl": None, "x": 0.5}}]


def test_a_runs_stream_keeps_only_its_latest_pushes_and_expires_when_idle(settings):
    settings.LIVE_STREAM_MAXLEN = 3
    for n in range(10):
        push(10_004, [{"type": "metrics", "step": n}])
    client = redis.Redis.from_url(settings.REDIS_URL)
    key = RunStream(10_004).key
    assert client.xlen(key) == 3
    assert 0 < client.ttl(key) <= settings.LIVE_STREAM_IDLE_SECONDS
