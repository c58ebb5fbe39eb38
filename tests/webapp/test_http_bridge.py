"""webapp/http_bridge.py: Django's WSGI handler on a thread pool inside daphne. A client that goes
away mid-stream (a cancelled download) must not keep a thread: daphne drops what is sent to a closed
connection and cancels the request's task 10 s later, and the bridge then stops the response."""
import asyncio
import threading

from webapp.http_bridge import WSGIBridge


def endless_app(closed: threading.Event):
    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])

        def body():
            try:
                while True:
                    yield b"x" * 65536
            finally:
                closed.set()  # the response's close(): Django ends the request here
        return body()
    return app


def scope():
    return {"type": "http", "method": "GET", "path": "/", "raw_path": b"/", "query_string": b"", "headers": [],
            "http_version": "1.1", "scheme": "http", "server": ("127.0.0.1", 80), "client": ("127.0.0.1", 1), "root_path": ""}


async def receive():
    return {"type": "http.request", "body": b"", "more_body": False}


def test_a_response_whose_client_went_away_stops_and_frees_its_thread():
    async def scenario():
        closed = threading.Event()
        bridge = WSGIBridge(endless_app(closed), workers=1)

        async def gone_client(message):  # as daphne after a disconnect: accepted and dropped
            await asyncio.sleep(0)

        task = asyncio.ensure_future(bridge(scope(), receive, gone_client))
        await asyncio.sleep(0.3)
        task.cancel()  # daphne's application_close_timeout after the disconnect
        try:
            await task
        except asyncio.CancelledError:
            pass
        # waited for in a thread: the bridge's thread hands its chunks to this loop, which must not be blocked
        assert await asyncio.to_thread(closed.wait, 5), "the response kept streaming to nobody"

        # and the only thread serves the next request
        sent = []

        async def client(message):
            sent.append(message)

        def small(environ, start_response):
            start_response("200 OK", [])
            return [b"ok"]

        bridge.app = small
        await asyncio.wait_for(bridge(scope(), receive, client), timeout=5)
        assert [m.get("body") for m in sent if m["type"] == "http.response.body"] == [b"ok", b""]

    asyncio.run(scenario())
