"""The `shared` cache (settings.CACHES: Redis, seen by every process), one backend per process.

Django's `caches["shared"]` makes a backend per thread and, under ASGI, per request: each made its own Redis
connection pool, so every request that touched the cache opened a connection (a fifth of an MLflow log call's time
in the web process, issue 37). This one is made once per process, a forked child making its own; redis-py's pool is
thread-safe."""
import os
import threading

from django.core.cache import caches

_lock = threading.Lock()
_backend = {}


def shared_cache():
    pid = os.getpid()
    with _lock:
        if pid not in _backend:
            _backend.clear()
            _backend[pid] = caches.create_connection("shared")
        return _backend[pid]
