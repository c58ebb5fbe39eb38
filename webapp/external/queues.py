"""The queues of the work a run trained elsewhere asks of the workers: grouping its reported rollouts (light:
database and answer checks) and embedding them for its heatmaps (heavy: a model, best on a GPU host). Apart,
so heatmaps that lag on a CPU never hold up the groups, and a deployment can send them where a GPU is."""
from django.conf import settings


def external_queue() -> str:
    return settings.QUEUE_PREFIX + "external"


def embeddings_queue() -> str:
    return settings.QUEUE_PREFIX + "embeddings"
