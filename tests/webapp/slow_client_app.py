"""An ASGI app for tests/webapp/test_slow_clients.py, served by a real daphne: webapp/http_bridge.py's
WSGIBridge around a WSGI app that streams a large body and reports, on another path, how much of it
it has produced and whether the response was closed. /download runs on the bridge's download threads."""
import json
import threading

from webapp.http_bridge import WSGIBridge

CHUNK = b"x" * 65536
CHUNKS = 1600  # 100 MiB: far more than the socket buffers between the server and a client can hold

state = {"produced": 0, "closed": 0}
lock = threading.Lock()


def app(environ, start_response):
    if environ["PATH_INFO"] == "/state":
        with lock:
            body = json.dumps(state).encode()
        start_response("200 OK", [("Content-Type", "application/json"), ("Content-Length", str(len(body)))])
        return [body]
    start_response("200 OK", [("Content-Type", "application/octet-stream"),
                              ("Content-Length", str(len(CHUNK) * CHUNKS))])

    def body():
        try:
            for _ in range(CHUNKS):
                with lock:
                    state["produced"] += len(CHUNK)
                yield CHUNK
        finally:
            with lock:
                state["closed"] += 1  # the response's close(): Django ends its request here
    return body()


application = WSGIBridge(app, workers=2, download_workers=2, is_download=lambda path: path == "/download")
