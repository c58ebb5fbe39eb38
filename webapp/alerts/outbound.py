"""Outbound HTTP for webhooks, which any team admin points anywhere: never at the deployment's own network.

- destination_problem(url): why a URL may not be saved (a literal internal address, or a name that resolves to
  one now; a name that does not resolve now is checked again at delivery);
- post_json(url, payload): one POST to the address the name resolves to at that moment, after checking it
  (a name can resolve elsewhere later: the address connected to is the one checked), within one time limit
  for the whole exchange, never following a redirect; the result is the status and a short sanitised reason,
  never the body.

Internal means loopback, private, shared (100.64/10), link-local (the cloud metadata address), multicast,
reserved or unspecified, IPv4-mapped IPv6 included. WEBHOOK_ALLOWED_NETWORKS lists networks a deployment
allows anyway (an internal chat relay).
"""
import http.client
import ipaddress
import json
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

REASON_MAX = 60  # characters of the answer's reason phrase kept for the admin


class Refused(Exception):
    """The destination is not allowed: retrying will not help."""


@dataclass
class Answer:
    status: int
    reason: str  # printable, at most REASON_MAX characters


def address_problem(address: str) -> str | None:
    """Why `address` (an IP literal) may not be called, or None."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])  # an IPv6 zone id ("fe80::1%eth0") is not part of it
    if any(ip in ipaddress.ip_network(net, strict=False) for net in settings.WEBHOOK_ALLOWED_NETWORKS):
        return None
    mapped = ip.ipv4_mapped if ip.version == 6 else None
    checked = mapped or ip
    if not checked.is_global or checked.is_multicast or checked.is_reserved or checked.is_unspecified:
        return f"{address} is not a public address"
    return None


def _target(url: str) -> tuple[str, int, bool, str]:
    """host, port, whether HTTPS, and the path with its query."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise Refused(f"{url[:200]!r} is not an http(s) URL")
    https = parts.scheme == "https"
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return parts.hostname, parts.port or (443 if https else 80), https, path


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.split("%", 1)[0])
        return True
    except ValueError:
        return False


def resolve(host: str, port: int) -> list[str]:
    """Every address `host` resolves to now (socket.gaierror when it does not)."""
    return list(dict.fromkeys(info[4][0] for info in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)))


def checked_addresses(host: str, port: int) -> list[str]:
    """The addresses to connect to, all allowed; Refused naming the first that is not."""
    addresses = [host] if _is_ip(host) else resolve(host, port)
    for address in addresses:
        problem = address_problem(address)
        if problem:
            raise Refused(problem if address == host else f"{problem} ({host} resolves to it)")
    return addresses


def destination_problem(url: str) -> str | None:
    """Why a webhook may not point at `url` now, or None (a name that does not resolve now is allowed: the
    address is checked again at each delivery)."""
    try:
        checked_addresses(*_target(url)[:2])
    except Refused as exc:
        # the admin of a deployment whose chat relay is internal needs to know the switch exists
        return (f"{exc}: webhooks may not call this deployment's own network unless EVOLAB_WEBHOOK_ALLOWED_NETWORKS "
                "lists it (for example 10.0.0.0/8 or 127.0.0.1/32, comma-separated)")
    except (socket.gaierror, UnicodeError):
        return None
    return None


# What a delivery's row says went wrong, in the admin's words: the kinds of network failure, never a Python exception
# with its errno (the deliveries table shows it in a narrow column).
_REASONS = (
    (ConnectionRefusedError, "connection refused"),
    (http.client.RemoteDisconnected, "the endpoint closed the connection without answering"),  # before its base
    (ConnectionResetError, "the endpoint reset the connection"),
    (ConnectionError, "the connection broke off"),
    (ssl.SSLCertVerificationError, "its TLS certificate is not trusted"),
    (ssl.SSLError, "the TLS handshake failed"),
    (http.client.HTTPException, "the answer was not HTTP"),
)


def short_reason(exc: BaseException) -> str:
    """A short reason for a failed delivery (post_json's OSError and HTTPException): what happened, not which
    exception said so."""
    for kind, reason in _REASONS:
        if isinstance(exc, kind):
            return reason
    if isinstance(exc, Unresolved):
        return str(exc)
    strerror = getattr(exc, "strerror", None)  # "Network is unreachable", "No route to host", ...
    if strerror:
        return _printable(strerror[:1].lower() + strerror[1:])
    return "network error"


class Unresolved(OSError):
    """The webhook's host name does not resolve (now)."""


def _printable(text: str) -> str:
    return "".join(c for c in text if c.isprintable() and c.isascii())[:REASON_MAX].strip()


def post_json(url: str, payload: dict, timeout: float, user_agent: str) -> Answer:
    """POST `payload` as JSON to `url`; Refused for a destination not allowed, TimeoutError when the whole
    exchange took longer than `timeout` seconds, OSError or http.client.HTTPException for the rest."""
    host, port, https, path = _target(url)
    deadline = time.monotonic() + timeout
    try:
        addresses = checked_addresses(host, port)
    except socket.gaierror:
        raise Unresolved(f"{host[:100]} does not resolve") from None
    sock = None
    for address in addresses:  # the first that answers
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        try:
            sock = socket.create_connection((address, port), timeout=remaining)
            break
        except OSError:
            if address == addresses[-1]:
                raise
    if sock is None:
        raise TimeoutError(f"timed out after {timeout:g} s")
    # One limit for the whole exchange: a per-read timeout lets an endpoint that sends a byte now and then hold
    # the worker for ever, so the socket is shut down when the time is up, wherever the exchange is.
    expired = threading.Event()

    def cut():
        expired.set()
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    timer = threading.Timer(max(0.0, deadline - time.monotonic()), cut)
    timer.start()
    try:
        if https:
            sock = ssl.create_default_context().wrap_socket(sock, server_hostname=host)
        connection = http.client.HTTPConnection(host, port)  # Host header from the URL; the socket is the checked one
        connection.sock = sock
        body = json.dumps(payload).encode()
        connection.request("POST", path, body=body, headers={"Content-Type": "application/json",
                                                             "User-Agent": user_agent})
        response = connection.getresponse()  # http.client never follows a redirect
        response.read(65536)  # a bounded read so the endpoint sees its answer taken; the body is not kept
        return Answer(status=response.status, reason=_printable(response.reason or ""))
    except (OSError, http.client.HTTPException, ssl.SSLError):
        if expired.is_set():
            raise TimeoutError(f"timed out after {timeout:g} s") from None
        raise
    finally:
        timer.cancel()
        sock.close()
