"""What RBAC authorization adds to a list and a watch start, with 1,000 bindings (issue 19).

Two ``kubewire serve`` processes, plain HTTP with a token file (so requests are authenticated
and authorized), the same objects in each: one with ``--authorization-mode RBAC``, the
reference with ``--authorization-mode AlwaysAllow``. Each holds ``bindings`` bindings for other
users (half ClusterRoleBindings, half RoleBindings in the measured namespace, each to
``view``) and the RoleBinding that grants the measured user ``view`` in that namespace, which
holds a few Pods. Per repetition and side (interleaved, rotated: ``bench.stats``), after a
warm-up, the measured user sends

- ``lists`` GETs of the namespace's Pods on one keep-alive connection, and
- ``watches`` watch starts (a new connection, ``?watch=1`` from the list's resourceVersion,
  closed once the response headers are in),

and the server's process CPU (``/proc``) is divided by the requests. The ratio RBAC /
AlwaysAllow is the issue's target: <= 1.10.

    python -m bench.authz [--smoke] [--repeats 9]
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Self

from bench import report
from bench.servers import ServerProcess, kubewire_serve_argv, process_cpu_seconds
from bench.stats import interleaved_rounds, row
from bench.wire import CONTROL_TIMEOUT_S, USER_AGENT, pod_manifest, pods_path

NAME = "authz"
NAMESPACE = "bench"
TARGET = 1.10
GROUP = "rbac.authorization.k8s.io"
ADMIN_TOKEN = "bench-admin-token"
USER_TOKEN = "bench-alice-token"
SIDES = ("RBAC", "AlwaysAllow")


@dataclass
class AuthzOptions:
    bindings: int = 1000
    pods: int = 5
    lists: int = 8000
    watches: int = 4000
    warm_up: int = 200
    # a difference of a few percent on a shared machine: more repetitions than the others
    repeats: int = 9

    @classmethod
    def smoke(cls) -> Self:
        return cls(bindings=20, lists=50, watches=20, warm_up=10, repeats=1)


default_options = AuthzOptions
SMOKE = AuthzOptions.smoke()


class Client:
    """One keep-alive connection with a bearer token."""

    def __init__(self, port: int, token: str) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CONTROL_TIMEOUT_S)
        self.headers = {"Authorization": f"Bearer {token}", "User-Agent": USER_AGENT,
                        "Accept": "application/json", "Content-Type": "application/json"}

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, bytes]:
        data = None if body is None else json.dumps(body).encode()
        self.conn.request(method, path, body=data, headers=self.headers)
        response = self.conn.getresponse()
        return response.status, response.read()

    def close(self) -> None:
        self.conn.close()


def binding(name: str, user: str, namespace: str = "") -> tuple[str, dict[str, Any]]:
    meta: dict[str, Any] = {"name": name}
    path = f"/apis/{GROUP}/v1/clusterrolebindings"
    kind = "ClusterRoleBinding"
    if namespace:
        meta["namespace"] = namespace
        path = f"/apis/{GROUP}/v1/namespaces/{namespace}/rolebindings"
        kind = "RoleBinding"
    return path, {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": meta,
                  "roleRef": {"apiGroup": GROUP, "kind": "ClusterRole", "name": "view"},
                  "subjects": [{"kind": "User", "apiGroup": GROUP, "name": user}]}


def seed(port: int, opts: AuthzOptions) -> None:
    """The namespace, its Pods, the other users' bindings and the measured user's."""
    admin = Client(port, ADMIN_TOKEN)
    try:
        objects: list[tuple[str, dict[str, Any]]] = [
            ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                    "metadata": {"name": NAMESPACE}})]
        objects += [(pods_path(NAMESPACE), pod_manifest(NAMESPACE, name=f"p-{i}"))
                    for i in range(opts.pods)]
        for i in range(opts.bindings):
            namespace = NAMESPACE if i % 2 else ""
            objects.append(binding(f"other-{i}", f"other-{i}", namespace))
        objects.append(binding("alice-view", "alice", NAMESPACE))
        for path, body in objects:
            status, answer = admin.call("POST", path, body)
            if status != 201:
                raise RuntimeError(f"seeding {path}: {status} {answer[:300]!r}")
    finally:
        admin.close()


def list_cpu_us(server: ServerProcess, opts: AuthzOptions) -> tuple[float, str]:
    """Server CPU µs per list of the namespace's Pods, and the list's resourceVersion."""
    client = Client(server.port, USER_TOKEN)
    path = pods_path(NAMESPACE)
    try:
        for _ in range(opts.warm_up):
            client.call("GET", path)
        before = process_cpu_seconds(server.pid)
        for _ in range(opts.lists):
            status, body = client.call("GET", path)
            if status != 200:
                raise RuntimeError(f"{server.name} list: {status} {body[:300]!r}")
        after = process_cpu_seconds(server.pid)
    finally:
        client.close()
    return 1e6 * (after - before) / opts.lists, json.loads(body)["metadata"]["resourceVersion"]


def watch_start(port: int, path: str) -> None:
    """Open a watch, wait for its response head, close the connection."""
    request = (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: {USER_AGENT}\r\n"
               f"Authorization: Bearer {USER_TOKEN}\r\nAccept: application/json\r\n\r\n")
    with socket.create_connection(("127.0.0.1", port), timeout=CONTROL_TIMEOUT_S) as sock:
        sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            data = sock.recv(65536)
            if not data:
                break
            head += data
    if not head.startswith(b"HTTP/1.1 200"):
        raise RuntimeError(f"watch {path}: {head[:300]!r}")


def watch_cpu_us(server: ServerProcess, opts: AuthzOptions, rv: str) -> float:
    path = f"{pods_path(NAMESPACE)}?watch=1&resourceVersion={rv}"
    for _ in range(opts.warm_up // 4):
        watch_start(server.port, path)
    before = process_cpu_seconds(server.pid)
    for _ in range(opts.watches):
        watch_start(server.port, path)
    after = process_cpu_seconds(server.pid)
    return 1e6 * (after - before) / opts.watches


def start(mode: str, data_dir: Path, stack: contextlib.ExitStack) -> ServerProcess:
    data_dir.mkdir(parents=True)
    tokens = data_dir / "tokens.csv"
    tokens.write_text(f'{ADMIN_TOKEN},bench-admin,1,"system:masters"\n'
                      f"{USER_TOKEN},alice,2\n")
    argv = [*kubewire_serve_argv(data_dir), "--token-auth-file", str(tokens),
            "--authorization-mode", mode]
    return stack.enter_context(ServerProcess(mode, argv)).wait_ready()


def run(opts: AuthzOptions) -> dict[str, Any]:
    with contextlib.ExitStack() as stack:
        data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-authz-")))
        servers = {mode: start(mode, data_dir / mode, stack) for mode in SIDES}
        for server in servers.values():
            seed(server.port, opts)

        def one_round(side: str, _: int) -> dict[str, Any]:
            listed, rv = list_cpu_us(servers[side], opts)
            return {"list": listed, "watch": watch_cpu_us(servers[side], opts, rv)}

        samples = interleaved_rounds(SIDES, [opts.bindings], opts.repeats, one_round)
    by_side = samples[opts.bindings]
    rows = []
    for key, what in (("list", f"list of {opts.pods} Pods"), ("watch", "watch start")):
        one = row(f"{opts.bindings + 1} bindings, {what}: server CPU per request", "µs",
                  [s[key] for s in by_side["RBAC"]], [s[key] for s in by_side["AlwaysAllow"]])
        one["target"] = f"<= {TARGET}"
        one["met"] = one["ratio"]["median"] <= TARGET
        rows.append(one)
    return {"name": NAME, "title": "Authorization: RBAC vs AlwaysAllow (issue 19)",
            "reference": "the same server with --authorization-mode AlwaysAllow",
            "command": "python -m bench.authz", "repeats": opts.repeats, "rows": rows,
            "notes": [f"Both servers hold {opts.bindings} bindings of other users to view "
                      "(half ClusterRoleBindings, half RoleBindings in the measured namespace) "
                      "and the measured user's RoleBinding to view; plain HTTP with bearer "
                      "tokens (--token-auth-file).",
                      f"Per side and repetition: {opts.lists} lists on one keep-alive "
                      f"connection and {opts.watches} watch starts (a connection each, closed "
                      f"at the response head), after {opts.warm_up} warm-up lists; server "
                      "process CPU from /proc/<pid>/stat."]}


if __name__ == "__main__":
    report.main(__doc__, SMOKE, default_options, run)
