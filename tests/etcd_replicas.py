"""Replicas for tests: several ``kubewire serve`` subprocesses on one etcd, one API.

``LaggingLink`` is a TCP relay to an etcd member that hands on everything etcd sends ``delay_s``
late: a replica connected through it learns of other replicas' writes late (its change feed
lags), which makes the moments where a replica's cache is behind etcd last long enough to test.

``Replicas`` starts ``n`` real ``kubewire serve --insecure-http`` processes, each with its own
``--data-dir`` and port, all on the same ``--etcd-servers`` and ``--etcd-prefix`` (so they are
replicas of one API), at the same moment (threads) or one after another; it can SIGKILL one and
start it again on its data dir and port. ``etcd_history`` reads what etcd holds for a set of
plurals as the change log the reliability checks compare with (every revision's event, with the
previous value of a delete), straight from etcd's watch history.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import queue
import socket
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kubewire.storage.etcd.client import DELETE, EtcdClient, EtcdConfig, prefix_end
from tests.reliability.proc import MARKER, ServerProcess


class Replicas:
    """``n`` servers on ``endpoints`` under ``prefix``; ``extra`` args go to every one."""

    def __init__(self, root: Path, endpoints: Sequence[str], n: int = 2, *,
                 prefix: str = "/registry", extra: Sequence[str] = (), tls: bool = False) -> None:
        self.servers = [ServerProcess(root / f"replica-{i}", "--etcd-servers", ",".join(endpoints),
                                      "--etcd-prefix", prefix, *extra, tls=tls)
                        for i in range(n)]

    def __getitem__(self, i: int) -> ServerProcess:
        return self.servers[i]

    def __len__(self) -> int:
        return len(self.servers)

    @property
    def ports(self) -> list[int]:
        return [s.port for s in self.servers]

    def start(self, together: bool = True) -> Replicas:
        """Start every server (at the same moment when ``together``) and wait for ``/readyz``."""
        if not together:
            for server in self.servers:
                server.start()
            return self
        errors: list[BaseException] = []

        def start(server: ServerProcess) -> None:
            try:
                server.start()
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=start, args=(s,)) for s in self.servers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            self.stop()
            raise errors[0]
        return self

    def alive(self) -> list[ServerProcess]:
        return [s for s in self.servers if s.proc is not None and s.proc.poll() is None]

    def stop(self) -> None:
        for server in self.servers:
            server.stop()

    def logs(self) -> str:
        return "\n".join(s.log_tail() for s in self.servers)

    def __enter__(self) -> Replicas:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def log_problems(server: ServerProcess) -> list[str]:
    """Lines of a server's whole log that say something went wrong (errors, tracebacks)."""
    try:
        text = server._log.read_text(errors="replace")
    except OSError:
        return []
    return [line for line in text.splitlines()
            if " ERROR " in line or " CRITICAL " in line or line.startswith("Traceback")]


def etcd_revision(endpoints: Sequence[str]) -> int:
    """etcd's current revision (a quorum read)."""
    async def read() -> int:
        async with EtcdClient(EtcdConfig(endpoints, timeout=10)) as client:
            return (await client.range(b"\x00", b"\x00", limit=1, keys_only=True)).revision
    return asyncio.run(read())


def etcd_newest(endpoints: Sequence[str], prefix: str) -> int:
    """The newest mod_revision among the keys under ``prefix`` (0: none)."""
    async def read() -> int:
        async with EtcdClient(EtcdConfig(endpoints, timeout=10)) as client:
            found = await client.range(prefix.encode(), prefix_end(prefix.encode()),
                                       keys_only=True)
            return max((int(kv.mod_revision) for kv in found.kvs), default=0)
    return asyncio.run(read())


def etcd_keys(endpoints: Sequence[str], prefix: str) -> list[str]:
    """The keys under ``prefix``, in order."""
    async def read() -> list[str]:
        async with EtcdClient(EtcdConfig(endpoints, timeout=10)) as client:
            found = await client.range(prefix.encode(), prefix_end(prefix.encode()),
                                       keys_only=True)
            return [kv.key.decode() for kv in found.kvs]
    return asyncio.run(read())


class LaggingLink:
    """``127.0.0.1:port`` relays to ``target_port``; what comes back is delayed by ``delay_s``
    (each chunk by the same delay, so the lag stays constant under load)."""

    def __init__(self, target_port: int, delay_s: float) -> None:
        self.target_port = target_port
        self.delay_s = delay_s
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._sockets: list[socket.socket] = []
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                return
            self._sockets += [client, upstream]
            threading.Thread(target=self._pump, args=(client, upstream, 0.0),
                             daemon=True).start()
            threading.Thread(target=self._pump, args=(upstream, client, self.delay_s),
                             daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket, delay_s: float) -> None:
        chunks: queue.Queue[tuple[float, bytes]] = queue.Queue()

        def send() -> None:
            while True:
                at, data = chunks.get()
                if not data:
                    break
                time.sleep(max(0.0, at + delay_s - time.monotonic()))
                try:
                    sink.sendall(data)
                except OSError:
                    break
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)

        sender = threading.Thread(target=send, daemon=True)
        sender.start()
        while True:
            try:
                data = source.recv(65536)
            except OSError:
                data = b""
            chunks.put((time.monotonic(), data))
            if not data:
                return

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        for sock in self._sockets:
            with contextlib.suppress(OSError):
                sock.close()


@dataclass(frozen=True)
class Event:
    """One etcd event under the prefix, as kube's watch would show it."""

    revision: int
    type: str  # ADDED, MODIFIED, DELETED
    plural: str
    key: str  # namespace/name
    marker: str | None  # the reliability writers' annotation (a delete: the last state's)


def etcd_history(endpoints: Sequence[str], plurals: Iterable[str], *,
                 prefix: str = "/registry", since: int = 0) -> tuple[list[Event], int]:
    """Every event etcd kept after ``since`` for the namespaced ``plurals`` (kube's key layout:
    ``<prefix>/<plural>/<namespace>/<name>``), in revision order, and etcd's revision then."""
    return asyncio.run(_history(endpoints, tuple(plurals), prefix.rstrip("/") + "/", since))


async def _history(endpoints: Sequence[str], plurals: tuple[str, ...], prefix: str,
                   since: int) -> tuple[list[Event], int]:
    out: list[Event] = []
    async with EtcdClient(EtcdConfig(endpoints, timeout=10)) as client:
        root = prefix.encode()
        target = (await client.range(root, prefix_end(root), limit=1, keys_only=True)).revision
        if target <= since:
            return out, target
        # every key (as the store's feed): each revision is an event, so the replay knows
        # when it reached ``target``
        async with asyncio.timeout(60), client.watch(
                b"\x00", b"\x00", start_revision=since + 1, prev_kv=True) as watch:
            async for response in watch:
                for event in response.events:
                    kv = event.kv
                    if not kv.key.startswith(root):
                        continue
                    plural, _, rest = kv.key.decode()[len(prefix):].partition("/")
                    if plural in plurals and rest.count("/") == 1:
                        out.append(_event_of(event, plural, rest))
                if response.events and response.events[-1].kv.mod_revision >= target:
                    break
    return [e for e in out if e.revision <= target], target


def _event_of(event: object, plural: str, key: str) -> Event:
    kv = event.kv  # type: ignore[attr-defined]
    if event.type == DELETE:  # type: ignore[attr-defined]
        prev = event.prev_kv if event.HasField("prev_kv") else None  # type: ignore[attr-defined]
        return Event(int(kv.mod_revision), "DELETED", plural, key,
                     _marker(prev.value) if prev is not None else None)
    kind = "ADDED" if kv.create_revision == kv.mod_revision else "MODIFIED"
    return Event(int(kv.mod_revision), kind, plural, key, _marker(kv.value))


def _marker(value: bytes) -> str | None:
    obj = json.loads(value)
    marker = ((obj.get("metadata") or {}).get("annotations") or {}).get(MARKER)
    return marker if isinstance(marker, str) else None
