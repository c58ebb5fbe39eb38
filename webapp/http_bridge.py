"""HTTP through Django's WSGI handler on a pool of threads inside daphne (a2wsgi), made safe for
clients that go away mid-response.

a2wsgi hands each chunk of a response from its thread to the event loop through a bounded queue.
When a client disconnects (a cancelled export download), daphne silently drops what is sent to the
closed connection and, application_close_timeout (10 s) later, cancels the request's task; a2wsgi's
task then stops reading the queue while the thread keeps producing into it, and once the queue is
full the thread waits forever, holding a database connection. Eight cancelled downloads took every
thread and the server stopped answering. Here the thread gives up instead: a send it cannot hand
over once the request's task is gone raises ClientGone inside the response's iteration, Django
closes the response (its generator's cleanup runs) and the thread is free.
"""
import asyncio
import concurrent.futures
import threading

from a2wsgi.wsgi import WSGIMiddleware, WSGIResponder

WAIT_SECONDS = 0.5  # how often a thread waiting to hand over a chunk checks that its request is still there


class ClientGone(ConnectionError):
    """The request's client went away: the response stops."""


class _Responder(WSGIResponder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gone = threading.Event()

    async def __call__(self, scope, receive, send):
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.gone.set()  # done or cancelled: nothing will read the queue again

    def send(self, message):
        if self.gone.is_set():
            raise ClientGone("the client went away")
        future = asyncio.run_coroutine_threadsafe(self.send_queue.put(message), loop=self.loop)
        while True:
            try:
                return future.result(timeout=WAIT_SECONDS)
            except concurrent.futures.TimeoutError:
                if self.gone.is_set():
                    future.cancel()
                    raise ClientGone("the client went away") from None


class WSGIBridge(WSGIMiddleware):
    """a2wsgi's WSGIMiddleware with _Responder for HTTP."""

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            return await _Responder(self.app, self.executor, self.send_queue_size)(scope, receive, send)
        return await super().__call__(scope, receive, send)
