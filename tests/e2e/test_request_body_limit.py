"""A request body over the limit is refused with a JSON 413 before the web server reads it, signed in
or not, declared (Content-Length) or streamed (chunked): the real daphne, over a raw socket."""
import json
import socket

import pytest
from django.conf import settings

pytestmark = pytest.mark.e2e


def read_response(sock) -> tuple[int, dict]:
    data = b""
    while b"\r\n\r\n" not in data or len(data.split(b"\r\n\r\n", 1)[1]) < _length(data):
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    return int(head.split()[1]), json.loads(body)


def _length(data: bytes) -> int:
    for line in data.split(b"\r\n\r\n", 1)[0].split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value)
    return 0


def test_a_declared_body_over_the_limit_is_refused_before_any_of_it_is_sent(live_stack):
    with socket.create_connection(("127.0.0.1", live_stack.port), timeout=10) as sock:
        sock.sendall(b"POST /api/prompt-sets HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 500000000\r\n\r\n")
        status, body = read_response(sock)  # no byte of the 500 MB was sent
    assert status == 413
    assert "500,000,000 bytes" in body["error"] and f"{settings.REQUEST_BODY_MAX_BYTES:,}" in body["error"]
    assert body["field"] == "body"


def test_a_streamed_body_is_refused_once_it_passes_the_limit(live_stack):
    piece = b"x" * (1024 * 1024)
    with socket.create_connection(("127.0.0.1", live_stack.port), timeout=10) as sock:
        sock.sendall(b"POST /accounts/login/ HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n")
        sent = 0
        while sent <= settings.REQUEST_BODY_MAX_BYTES:
            sock.sendall(b"%x\r\n%s\r\n" % (len(piece), piece))
            sent += len(piece)
        status, body = read_response(sock)
    assert status == 413 and "still coming" in body["error"]


def test_the_server_answers_normally_afterwards(live_stack):
    import requests

    assert requests.get(f"{live_stack.url}/healthz", timeout=10).status_code == 200
    small = requests.post(f"{live_stack.url}/api/prompt-sets", data=b"{}", timeout=10,
                          headers={"Content-Type": "application/json"})
    assert small.status_code in (401, 403)  # read and answered by the application, not refused for its size
