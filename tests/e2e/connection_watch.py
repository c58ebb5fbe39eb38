"""What leaves this machine while a test cluster runs: every socket of the test session's processes, read from
/proc (tests/e2e/test_slurm_engine.py, test_ray_engine.py)."""
import functools
import ipaddress
import os
import threading
from pathlib import Path


def _descendants(roots: list[int]) -> set[int]:
    """The processes under `roots`, them included, but for a browser's tree (_is_browser_driver)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    parents[int(entry)] = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    found, frontier = set(roots), list(roots)
    while frontier:
        pid = frontier.pop()
        children = [child for child, parent in parents.items()
                    if parent == pid and child not in found and not _is_browser_driver(child)]
        found.update(children)
        frontier.extend(children)
    return found


def _is_browser_driver(pid: int) -> bool:
    """Playwright's driver, under which a test's Chromium runs. The browser is not a cluster: its network service
    connects UDP sockets to 2001:4860:4860::8888 and 8.8.8.8 to learn which source address it would use, a
    connect that sends nothing (strace shows no datagram), and its names resolve to loopback only
    (tests/e2e/conftest.py CHROMIUM_ARGS)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"run-driver" in argv and any(b"playwright" in part for part in argv)


def _socket_inodes(pids: set[int]) -> dict[str, int]:
    """Each socket's inode, with the process that holds it."""
    inodes = {}
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    target = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if target.startswith("socket:["):
                    inodes[target[8:-1]] = pid
        except OSError:
            continue
    return inodes


def _command(pid: int) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return f"pid {pid} (gone)"
    return f"pid {pid}: " + " ".join(part.decode(errors="replace") for part in argv if part)[:200]


def _address(hex_address: str) -> str:
    return _host(hex_address.split(":")[0])


@functools.lru_cache(maxsize=4096)
def _host(host: str) -> str:
    raw = bytes.fromhex(host)
    if len(raw) == 4:
        return str(ipaddress.IPv4Address(raw[::-1]))
    words = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
    address = ipaddress.IPv6Address(words)
    return str(address.ipv4_mapped or address)


@functools.lru_cache(maxsize=4096)
def _loopback(address: str) -> bool:
    parsed = ipaddress.ip_address(address)
    return parsed.is_loopback or parsed.is_unspecified


class ConnectionWatch:
    """Samples, every `every` seconds while it runs, each TCP and UDP socket of the given processes and their
    descendants, and notes the remote address of every one that has one: `outside` lists those not on loopback,
    `seen` loopback peers that were seen (so a watch that saw nothing cannot pass for one that saw no harm; once
    there is one, it grows only in samples that found a peer off loopback on this machine)."""

    def __init__(self, roots, every: float = 0.1):
        self.roots, self.every = roots, every
        self.outside: set[str] = set()
        self.seen: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def sample(self) -> None:
        connected = []  # every socket on this machine that has a peer: (inode, address, port, table)
        for table in ("tcp", "tcp6", "udp", "udp6"):
            try:
                lines = Path(f"/proc/net/{table}").read_text().splitlines()[1:]
            except OSError:
                continue
            for line in lines:
                fields = line.split()
                if len(fields) < 10:
                    continue
                port = int(fields[2].split(":")[1], 16)
                if port == 0:
                    continue  # a listening or unconnected socket
                connected.append((fields[9], _address(fields[2]), port, table))
        # Which of them belong to the watched processes takes reading every descriptor of each (most of a sample's
        # cost, ten times a second, beside the trainers): needed only when some peer is off loopback, and until a
        # loopback peer of theirs has been seen. A sample with every peer on loopback has nothing else to tell.
        if self.seen and all(_loopback(remote) for _, remote, _, _ in connected):
            return
        inodes = _socket_inodes(_descendants(list(self.roots())))
        for inode, remote, port, table in connected:
            if inode not in inodes:
                continue
            if _loopback(remote):
                self.seen.add(f"{remote}:{port} ({table})")
            else:  # named with its process, so that a failure says who left (a name lookup, most often)
                self.outside.add(f"{remote}:{port} ({table}) from {_command(inodes[inode])}")

    def assert_only_loopback(self) -> None:
        """What the watched processes connected to: loopback peers only, and some were seen."""
        self.sample()
        assert self.seen, "the connection watch saw no connection at all: it cannot have watched"
        assert not self.outside, f"connections left loopback: {sorted(self.outside)}"


CANARY = r"""
import socket, sys, time
connection = socket.create_connection((sys.argv[1], int(sys.argv[2])))
print("connected", flush=True)
time.sleep(600)
"""


def loopback_canary(url: str):
    """A process holding one connection to the live server (`url`) while it lives: watched beside short-lived
    processes whose own loopback connections a sample may miss, it shows the watch reads this machine's sockets."""
    import subprocess
    import sys
    from urllib.parse import urlsplit

    address = urlsplit(url)
    canary = subprocess.Popen([sys.executable, "-c", CANARY, address.hostname, str(address.port)],
                              stdout=subprocess.PIPE, text=True)
    assert canary.stdout.readline().strip() == "connected"
    return canary
