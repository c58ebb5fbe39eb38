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

daphne also writes whatever it is sent into Twisted's buffer without waiting for the socket, so a
large export read over a slow link sat in daphne's memory as fast as the database produced it
(+170 MB for a 128 MB CSV read at 6 MB/s). Here the bridge registers itself with daphne's request
as a Twisted push producer: while Twisted says the socket's buffer is full, the next chunk waits,
a2wsgi's queue fills, and the thread, and so the response's generator, waits with it. A client that
reads nothing for EVOLAB_HTTP_STALL_SECONDS is disconnected, so it cannot hold a thread forever.
"""
import asyncio
import concurrent.futures
import functools
import re
import threading

from a2wsgi.wsgi import WSGIMiddleware, WSGIResponder
from django.conf import settings
from twisted.internet.interfaces import IPushProducer
from zope.interface import implementer

WAIT_SECONDS = 0.5  # how often a thread waiting to hand over a chunk checks that its request is still there


class ClientGone(ConnectionError):
    """The request's client went away: the response stops."""


class _Responder(WSGIResponder):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.gone = threading.Event()

    async def __call__(self, scope, receive, send):
        flow = _SocketFlow.of(send, on_gone=self.gone.set)
        try:
            await super().__call__(scope, receive, flow.send if flow else send)
        except ClientGone:
            # A closed tab or a cancelled download: the response has stopped and there is no one to tell.
            # Left to propagate, daphne logged it as the application's error, with a traceback.
            pass
        finally:
            self.gone.set()  # done or cancelled: nothing will read the queue again
            if flow:
                flow.release()

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


@implementer(IPushProducer)
class _SocketFlow:
    """Paces a response's body to its socket: Twisted calls pauseProducing when the connection's
    write buffer is full and resumeProducing when it has drained (on the event loop's thread)."""

    def __init__(self, request, send, on_gone):
        self.request, self._send, self._on_gone = request, send, on_gone
        self.writable = asyncio.Event()
        self.writable.set()

    @classmethod
    def of(cls, send, on_gone):
        """The flow of daphne's request behind `send` (daphne's send is
        functools.partial(server.handle_reply, request)), or None under another server;
        on_gone is called when the connection is lost."""
        request = send.args[0] if isinstance(send, functools.partial) and send.args else None
        return cls(request, send, on_gone) if hasattr(request, "registerProducer") else None

    def pauseProducing(self):
        self.writable.clear()

    def resumeProducing(self):
        self.writable.set()

    def stopProducing(self):
        # The connection is gone: the response stops now (its thread's next chunk raises ClientGone)
        # rather than when daphne cancels the request 10 s later, producing for nobody meanwhile.
        self._on_gone()
        self.writable.set()

    async def send(self, message):
        if message["type"] == "http.response.body":
            if not message.get("more_body"):
                self.release()  # Twisted wants no producer left once the request finishes
            elif self._register() and not self.writable.is_set():
                try:
                    await asyncio.wait_for(self.writable.wait(), settings.HTTP_STALL_SECONDS)
                except asyncio.TimeoutError:
                    channel = getattr(self.request, "channel", None)
                    if channel is not None:
                        channel.transport.abortConnection()  # daphne then tells the application it is gone
                    return
        await self._send(message)

    def _register(self) -> bool:
        """Registered with the request (once, at the first chunk of a body that streams)."""
        if self.request.producer is self:
            return True
        channel = getattr(self.request, "channel", None)
        if channel is None or self.request.finished or self.request.producer is not None:
            return False  # the connection is gone (or someone else paces it): send as daphne would
        self.request.registerProducer(self, True)
        if getattr(channel, "_waitingForTransport", False):  # already full: Twisted says so only on change
            self.writable.clear()
        return True

    def release(self):
        if self.request.producer is self and getattr(self.request, "channel", None) is not None:
            self.request.unregisterProducer()


# The downloads (webapp/runs/api_views.py's exports): the responses that stream for as long as their client reads
EXPORT_PATH = re.compile(r"/api/runs/[^/]+/(?:metrics|rollouts)/export/?")


class WSGIBridge(WSGIMiddleware):
    """a2wsgi's WSGIMiddleware with _Responder for HTTP. Downloads run on threads of their own: a download whose
    client reads slowly or not at all holds its thread until it reads (or settings.HTTP_STALL_SECONDS cut it), and on the pages'
    threads eight stalled downloads held all eight while every other request waited behind them. Downloads past
    `download_workers` at once wait for one of theirs."""

    def __init__(self, app, workers: int = 10, send_queue_size: int = 2, download_workers: int = 4,
                 is_download=EXPORT_PATH.fullmatch):
        # A chunk handed over waits whole in the queue behind a slow client: two keep the socket busy,
        # a2wsgi's default of 10 held 20 MB of an export when its chunks were pages of ~2 MB.
        super().__init__(app, workers=workers, send_queue_size=send_queue_size)
        self.download_executor = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="download",
                                                                       max_workers=download_workers)
        self.is_download = is_download

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            executor = self.download_executor if self.is_download(scope["path"]) else self.executor
            return await _Responder(self.app, executor, self.send_queue_size)(scope, receive, send)
        return await super().__call__(scope, receive, send)
