"""A TLS ``kubewire serve`` subprocess with three token users and an ABAC policy.

The users: ``admin`` (``system:masters``: never throttled), ``good`` (the well-behaved client;
may do everything, but meets every limit) and ``attacker`` (may touch ConfigMaps only, so an
impersonation is refused, and meets every limit). Requests go over real TLS, as in production:
several attacks are about what happens before or around authentication.

``HostileServer`` starts the real CLI (``python -m kubewire.cli serve``, ``Limits`` fields set by
their flags), waits until it is ready, and knows the pids of the server and of its writer child
(for RSS and for SIGSTOP).
"""

from __future__ import annotations

import contextlib
import http.client
import json
import os
import re
import secrets
import signal
import ssl
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.api_only import API_ONLY

HOST = "127.0.0.1"
ROOT = Path(__file__).resolve().parents[3]  # the checkout: ``-m tests...`` resolves from here
START_TIMEOUT_S = 60.0
STOP_GRACE_S = 5.0  # a server whose loop an attack blocked never handles SIGTERM
NAMESPACE = "hostile"
_READY = re.compile(r"kubewire ready: https://[^:]+:(\d+) ")
ABAC = "abac.authorization.kubernetes.io/v1beta1"


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()


ADMIN = User("admin", ("system:masters",))
GOOD = User("good", ("hostile:good",))
ATTACKER = User("attacker")
USERS = (ADMIN, GOOD, ATTACKER)
POLICIES = (
    {"group": "hostile:good", "namespace": "*", "resource": "*", "apiGroup": "*",
     "nonResourcePath": "*"},
    {"user": "attacker", "namespace": "*", "resource": "configmaps", "apiGroup": ""},
)


@dataclass(frozen=True, slots=True)
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    def json(self) -> dict[str, object]:
        value = json.loads(self.body)
        assert isinstance(value, dict), self.body[:200]
        return value


class HostileServer:
    """``start()`` waits until ``/readyz`` answers; ``stop()`` always ends it (SIGKILL at worst).

    ``args`` are extra ``kubewire serve`` flags; ``limits`` are ``Limits`` fields (by name) for
    which there is no flag.
    """

    def __init__(self, data_dir: Path, args: Sequence[str] = (),
                 limits: Mapping[str, float] | None = None) -> None:
        self.data_dir = data_dir
        self.args = list(args)
        self.limits = dict(limits or {})
        self.tokens = {user.name: secrets.token_urlsafe(24) for user in USERS}
        self.port = 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data_dir.parent / f"{data_dir.name}.log"

    # --- life -----------------------------------------------------------------------------------

    def command(self) -> list[str]:
        flags = ["--data-dir", str(self.data_dir), "--host", HOST, "--port", "0",
                 "--log-level", "WARNING",
                 "--token-auth-file", str(self.data_dir / "tokens.csv"),
                 "--authorization-policy-file", str(self.data_dir / "policy.jsonl"), *self.args]
        for name, value in self.limits.items():  # ``Limits`` fields by their flags
            flags += [f"--{name.replace('_', '-')}", f"{value:g}"]
        return [sys.executable, "-m", "kubewire.cli", "serve", *API_ONLY, *flags]

    def _write_access_files(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        lines = [f'{self.tokens[u.name]},{u.name},{u.name},"{",".join(u.groups)}"\n'
                 for u in USERS]
        (self.data_dir / "tokens.csv").write_text("".join(lines))
        policy = "".join(json.dumps({"apiVersion": ABAC, "kind": "Policy", "spec": spec}) + "\n"
                         for spec in POLICIES)
        (self.data_dir / "policy.jsonl").write_text(policy)

    def start(self) -> HostileServer:
        self._write_access_files()
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(
            [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, cwd=ROOT, env=env)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited with {self.proc.returncode}: "
                                   f"{self.log_tail()}")
            found = _READY.search(self.log_tail())
            if found and self._ready(int(found.group(1))):
                self.port = int(found.group(1))
                return self
            time.sleep(0.05)
        self.stop()
        raise TimeoutError(f"server did not become ready: {self.log_tail()}")

    def _ready(self, port: int) -> bool:
        self.port = port
        try:
            return self.call("GET", "/readyz", timeout=2).status == 200
        except OSError:
            return False

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def writer_pid(self) -> int | None:
        """The writer child: the server's only child process."""
        children: list[int] = []
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{self.pid}/task").iterdir():
                children += [int(p) for p in (task / "children").read_text().split()]
        return children[0] if children else None

    def signal_server(self, sig: signal.Signals) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def signal_writer(self, sig: signal.Signals) -> None:
        pid = self.writer_pid()
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def kill(self) -> None:
        """SIGKILL (the writer child exits when its pipe closes)."""
        if self.proc is not None and self.proc.poll() is None:
            self.signal_writer(signal.SIGCONT)  # a stopped writer would never see the EOF
            self.proc.kill()
            self.proc.wait(30)

    def stop(self) -> None:
        """SIGTERM, then SIGKILL after ``STOP_GRACE_S`` (an attack may have blocked the loop)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.signal_writer(signal.SIGCONT)
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None

    def __enter__(self) -> HostileServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def log_tail(self) -> str:
        try:
            return self.log.read_text(errors="replace")[-3000:]
        except OSError:
            return ""

    # --- clients ----------------------------------------------------------------------------------

    @property
    def ca_file(self) -> Path:
        return self.data_dir / "pki" / "ca.crt"

    def ssl_context(self, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if cert is not None:
            ctx.load_cert_chain(*cert)
        return ctx

    def auth(self, user: User | None) -> dict[str, str]:
        return {} if user is None else {"Authorization": f"Bearer {self.tokens[user.name]}"}

    def call(self, method: str, path: str, user: User | None = ADMIN, body: object = None,
             headers: Mapping[str, str] | None = None, timeout: float = 30.0,
             context: ssl.SSLContext | None = None) -> Reply:
        """One request on a new TLS connection; raises ``OSError`` (``ssl.SSLError`` for a
        refused handshake) without an answer."""
        conn = http.client.HTTPSConnection(HOST, self.port, timeout=timeout,
                                           context=context or self.ssl_context())
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        try:
            conn.request(method, path, body=data,
                         headers={"Accept": "application/json",
                                  "Content-Type": "application/json", **self.auth(user),
                                  **(headers or {})})
            resp = conn.getresponse()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        except http.client.HTTPException as exc:
            raise OSError(f"no answer: {exc!r}") from exc
        finally:
            conn.close()

    def seed(self, configmaps: int = 1, payload_bytes: int = 64) -> None:
        """Namespace ``hostile`` with ConfigMaps ``cm-0``... (the probe reads ``cm-0``)."""
        reply = self.call("POST", "/api/v1/namespaces", body={"metadata": {"name": NAMESPACE}})
        assert reply.status == 201, reply
        for i in range(configmaps):
            reply = self.call("POST", f"/api/v1/namespaces/{NAMESPACE}/configmaps",
                              body={"metadata": {"name": f"cm-{i}", "labels": {"app": "web"}},
                                    "data": {"payload": "x" * payload_bytes}})
            assert reply.status == 201, reply
