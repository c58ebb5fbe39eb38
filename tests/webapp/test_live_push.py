"""webapp.live: pushes reach a run's watchers over one long-lived Redis connection per process."""
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.conf import settings

from webapp.live import push, run_group_name


def connections_received() -> int:
    return int(redis.Redis.from_url(settings.REDIS_URL).info("stats")["total_connections_received"])


def test_many_pushes_reuse_one_redis_connection():
    push(10_001, [{"type": "warm-up"}])  # the first push may open the connection
    before = connections_received()
    for n in range(30):
        push(10_001, [{"type": "metrics", "step": n}])
    # one connection for the INFO calls themselves, none for the pushes (each push used to open one)
    assert connections_received() - before <= 2


def test_a_push_reaches_a_receiver_on_another_event_loop():
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group_name(10_002), channel)
    push(10_002, [{"type": "metrics", "step": 7}])
    message = async_to_sync(layer.receive)(channel)
    assert message == {"type": "run.messages", "frames": ['{"type": "metrics", "step": 7}']}


def test_a_value_json_cannot_carry_is_sent_as_null():
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(run_group_name(10_003), channel)
    push(10_003, [{"type": "metrics", "step": 1, "values": {"loss": float("nan"), "kl": float("inf"), "x": 0.5}}])
    message = async_to_sync(layer.receive)(channel)
    assert message["frames"] == ['{"type": "metrics", "step": 1, "values": {"loss": null, "kl": null, "x": 0.5}}']
