"""Request bodies larger than REQUEST_BODY_MAX_BYTES are refused before they are read.

daphne hands a request to the application only once its whole body has arrived (Twisted spools it to
a temporary file), then queues all of it in memory at once: one 500 MB POST, even unsigned, took the
server from 0.66 GB to 7 GB. No size check in Django or in an ASGI middleware runs before that. So
this hooks daphne's request where Twisted reports the body's length (Content-Length) and where each
piece of a chunked body arrives: past the limit, a 413 with a JSON error is written at once, the
rest of the body is read and dropped without being kept (so the client, still sending, reads the
answer instead of a connection reset) and the connection is closed after LINGER_SECONDS.

webapp/asgi.py installs it in the web server's process (daphne imports the application from there).
"""
import json
import logging

log = logging.getLogger(__name__)

LINGER_SECONDS = 5.0


def install(limit: int) -> None:
    from daphne.http_protocol import WebRequest

    if getattr(WebRequest, "evolab_body_limit", None) is not None:
        WebRequest.evolab_body_limit = limit
        return
    WebRequest.evolab_body_limit = limit
    got_length, handle_chunk, received = WebRequest.gotLength, WebRequest.handleContentChunk, WebRequest.requestReceived

    def gotLength(self, length):
        self.evolab_body_bytes, self.evolab_refused = 0, False
        if length is not None and length > self.evolab_body_limit:
            _refuse(self, f"the request body is {length:,} bytes")
        got_length(self, 0 if self.evolab_refused else length)

    def handleContentChunk(self, data):
        if self.evolab_refused:
            return  # read and dropped
        self.evolab_body_bytes += len(data)
        if self.evolab_body_bytes > self.evolab_body_limit:
            _refuse(self, f"the request body is over {self.evolab_body_bytes:,} bytes and still coming")
            return
        handle_chunk(self, data)

    def requestReceived(self, command, path, version):
        if getattr(self, "evolab_refused", False):
            return  # answered already; the application never sees it
        received(self, command, path, version)

    WebRequest.gotLength, WebRequest.handleContentChunk = gotLength, handleContentChunk
    WebRequest.requestReceived = requestReceived


def _refuse(request, what: str) -> None:
    from twisted.internet import reactor

    request.evolab_refused = True
    limit = request.evolab_body_limit
    body = json.dumps({"error": f"{what}; this server accepts request bodies of at most {limit:,} bytes "
                                f"(EVOLAB_PROMPT_FILE_MAX_BYTES sets the upload limit)", "field": "body"}).encode()
    transport = request.channel.transport
    transport.write(b"HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\n"
                    b"Connection: close\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
    transport.loseWriteConnection()
    reactor.callLater(LINGER_SECONDS, transport.abortConnection)
    log.warning("refused a request body: %s", what)
