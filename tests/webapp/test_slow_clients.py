"""A download read slowly must not be buffered whole in the web server (webapp/http_bridge.py).

daphne writes whatever the application sends into Twisted's buffer without waiting for the socket,
so a 2 GB export read over a slow link (or by a client that stopped reading) sat in daphne's memory
as fast as the database produced it. The bridge now waits while Twisted says the socket's buffer is
full, which holds the thread, which holds the response's generator: a response is produced as fast
as its client reads it. A client that reads nothing for EVOLAB_HTTP_STALL_SECONDS is disconnected,
so a stalled download does not keep one of the server's threads forever."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.waiting import assert_stays, wait_until
from tests.webapp.slow_client_app import CHUNK, CHUNKS

ROOT = Path(__file__).resolve().parents[2]
TOTAL = len(CHUNK) * CHUNKS
STALL_SECONDS = 3


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def server_log(tmp_path_factory):
    return tmp_path_factory.mktemp("daphne") / "daphne.log"


@pytest.fixture(scope="module")
def server(server_log):
    port = free_port()
    env = {**os.environ, "EVOLAB_HTTP_STALL_SECONDS": str(STALL_SECONDS)}
    log = open(server_log, "wb")
    process = subprocess.Popen([sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port),
                                "tests.webapp.slow_client_app:application"], cwd=ROOT, env=env,
                               stdout=log, stderr=subprocess.STDOUT)

    def accepts() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            assert process.poll() is None, "daphne did not start"
            return False

    wait_until(accepts, 60, every=0.2, what="daphne to accept connections")
    yield port
    process.terminate()
    process.wait(timeout=20)
    log.close()


def server_state(port) -> dict:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        s.sendall(b"GET /state HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return json.loads(data.split(b"\r\n\r\n", 1)[1])


def open_download(port) -> tuple[socket.socket, int]:
    """A connection asking for the 100 MiB body, and how many bytes its first read received."""
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 65536)  # a slow link: little in flight
    s.connect(("127.0.0.1", port))
    s.settimeout(30)
    s.sendall(b"GET /download HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    return s, len(s.recv(65536))  # the headers and the first bytes


def read_all(s: socket.socket) -> int:
    """Bytes received until the server closed the connection (or cut it: a reset ends the count too)."""
    got = 0
    try:
        while chunk := s.recv(1 << 20):
            got += len(chunk)
    except ConnectionResetError:
        pass
    return got


def test_a_client_that_reads_slowly_is_sent_only_what_it_reads(server):
    before = server_state(server)["produced"]
    download, first = open_download(server)
    # the client reads nothing until the server has stopped producing (the same count three samples running:
    # the response is held by the full socket), within the stall limit, past which the server disconnects it
    produced, steady, deadline = -1, 0, time.monotonic() + STALL_SECONDS - 0.5
    while steady < 3:
        assert time.monotonic() < deadline, "the server went on producing for a client that read nothing"
        time.sleep(0.2)
        now = server_state(server)["produced"] - before
        steady, produced = (steady + 1 if now == produced else 0), now
    # what the socket buffers and the bridge's queue hold, not the 100 MiB body
    assert produced < 24 * 2**20, f"{produced / 2**20:.0f} MiB produced for a client that read 64 KiB"
    received = first + read_all(download)
    download.close()
    assert received > TOTAL  # the whole body (and its headers) still arrives once the client reads


def test_a_client_that_stops_reading_is_disconnected_and_frees_its_thread(server):
    closed = server_state(server)["closed"]
    downloads = [open_download(server) for _ in range(2)]  # as many as the server has download threads
    wait_until(lambda: server_state(server)["closed"] >= closed + 2, STALL_SECONDS + 15, every=0.2,
               what="both stalled downloads to be cut (a stalled download kept its thread)",
               last=lambda: server_state(server))
    for download, first in downloads:
        assert first + read_all(download) < TOTAL  # the connection was cut, short of the whole body
        download.close()
    # both threads serve the next download whole
    download, first = open_download(server)
    assert first + read_all(download) > TOTAL
    download.close()


def test_a_client_that_goes_away_mid_download_stops_the_response_at_once(server):
    state = server_state(server)
    download, _ = open_download(server)
    time.sleep(0.5)
    download.close()  # a cancelled download: the rest of the body is never produced
    # well before daphne's own cancel (10 s) or the stall limit
    wait_until(lambda: server_state(server)["closed"] != state["closed"], 5, every=0.1,
               what="the response to end after its client left", last=lambda: server_state(server))
    produced = server_state(server)["produced"] - state["produced"]
    assert produced < 24 * 2**20, f"{produced / 2**20:.0f} MiB produced for a client that left"


def test_a_client_that_goes_away_leaves_no_traceback_in_the_log(server, server_log):
    # a closed browser tab is the most ordinary way to end a request, not an error of the application
    state = server_state(server)
    download, _ = open_download(server)
    time.sleep(0.5)
    download.close()
    wait_until(lambda: server_state(server)["closed"] != state["closed"], 5, every=0.1,
               what="the response to end after its client left", last=lambda: server_state(server))

    def no_traceback() -> bool:
        log = server_log.read_text()
        assert "Traceback" not in log and "Exception inside application" not in log, log[-2000:]
        return True

    assert_stays(no_traceback, 0.5, what="a log without a traceback")  # daphne writes its log after the app returns


def test_stalled_downloads_leave_the_other_requests_their_threads(server):
    closed = server_state(server)["closed"]
    stalled = [open_download(server)[0] for _ in range(2)]  # every download thread held by a client not reading
    started = time.monotonic()
    server_state(server)  # another request: before, it waited for a stalled download to be cut (the stall limit)
    assert time.monotonic() - started < 1.5
    # then the stall limit frees them as before
    wait_until(lambda: server_state(server)["closed"] >= closed + 2, STALL_SECONDS + 15, every=0.2,
               what="both stalled downloads to be cut (a stalled download kept its thread)",
               last=lambda: server_state(server))
    for download in stalled:
        download.close()
