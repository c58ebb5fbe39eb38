"""A real HTTP webhook receiver on 127.0.0.1 for the tests: records every POST and answers
with the status codes it is given (then 200), and `headers`, `body` and `reason` when given."""
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Receiver:
    def __init__(self, statuses=(), headers=None, body=None, reason=None):
        self.statuses = list(statuses)
        self.received = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.received.append({"path": self.path, "body": json.loads(body), "headers": dict(self.headers)})
                status = receiver.statuses.pop(0) if receiver.statuses else 200
                self.send_response(status, reason)
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body if body is not None else b"ok" if status < 400 else b"try again")

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()
