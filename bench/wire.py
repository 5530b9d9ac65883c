"""What the benchmarks put on the wire: ~2 KB Pods and their watch event lines, and requests.

kubewire's stored Pod gains defaults, a uid and managedFields on create; ``POD_PAD_BYTES`` was
chosen so the event line it sends was about ``EVENT_BYTES``. Since issue 14 the stored Pod also
carries kube's admission defaults (the service-account token volume, default tolerations), and
the line is ~2.9 KB. The fan-out benchmarks therefore capture kubewire's line in each run
(``watched_line``) and have the reference servers send that line, byte for byte: the readers'
cost per byte depends on what the bytes are (their marker search skips a run of padding faster
than JSON), so a limit measured on other bytes of the same size is not the limit for these.
"""

from __future__ import annotations

import http.client
import json
import ssl
from typing import Any

EVENT_BYTES = 2048
POD_PAD_BYTES = 785  # annotation padding (kubewire's ADDED line: ~2.9 KB, see above)
PATCHED_POD_PAD_BYTES = 490  # makes a merge-patched Pod (issue 15's workload) ~2.5 KB
MERGE_PATCH = "application/merge-patch+json"
USER_AGENT = "kubewire-bench"
EVENT_MARKER = b'\n{"type":"'  # once per event: lines follow a chunk-size line or a line
CONTROL_TIMEOUT_S = 30.0


def pod_manifest(namespace: str, *, name: str = "", generate_name: str = "",
                 pad_bytes: int = POD_PAD_BYTES) -> dict[str, Any]:
    meta: dict[str, Any] = {"namespace": namespace, "labels": {"app": "bench"},
                            "annotations": {"bench/pad": "x" * pad_bytes}}
    if name:
        meta["name"] = name
    else:
        meta["generateName"] = generate_name or "bench-"
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"containers": [{"name": "c", "image": "registry.example/app:1.0"}]}}


def pods_path(namespace: str) -> str:
    return f"/api/v1/namespaces/{namespace}/pods"


def post_request(path: str, body: bytes, *, method: str = "POST",
                 content_type: str = "application/json", user_agent: str = USER_AGENT) -> bytes:
    """A keep-alive HTTP/1.1 POST (or ``method``) of JSON ``body``."""
    return (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: {user_agent}\r\n"
            f"Content-Type: {content_type}\r\nAccept: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def merge_patch_request(path: str, seq: int, user_agent: str = USER_AGENT) -> bytes:
    """A merge PATCH that changes one annotation to ``seq`` (a new value each time, so every
    PATCH is a real change: a PATCH that changes nothing writes nothing and sends no event).
    The server names the PATCH's field manager after ``user_agent``'s product (before "/")."""
    body = b'{"metadata":{"annotations":{"bench/seq":"%d"}}}' % seq
    return post_request(path, body, method="PATCH", content_type=MERGE_PATCH,
                        user_agent=user_agent)


def get_request(path: str) -> bytes:
    return (f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: {USER_AGENT}\r\n"
            f"Accept: application/json\r\n\r\n").encode()


def event_line(name: str, namespace: str = "bench", size: int = EVENT_BYTES) -> bytes:
    """An ADDED Pod event line of exactly ``size`` bytes (the reference servers' payload)."""
    obj = pod_manifest(namespace, name=name, pad_bytes=0)
    obj["status"] = {"phase": "Pending"}
    head = b'{"type":"ADDED","object":'
    bare = head + json.dumps(obj, separators=(",", ":")).encode() + b"}\n"
    obj["metadata"]["annotations"]["bench/pad"] = "x" * max(0, size - len(bare))
    return head + json.dumps(obj, separators=(",", ":")).encode() + b"}\n"


def request(port: int, method: str, path: str, body: Any = None,
            context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    """One blocking request from the benchmark process (setup and control, never measured);
    over TLS with ``context``. A PATCH body is a JSON merge patch; bytes are sent as they are."""
    conn = (http.client.HTTPConnection("127.0.0.1", port, timeout=CONTROL_TIMEOUT_S)
            if context is None else
            http.client.HTTPSConnection("127.0.0.1", port, timeout=CONTROL_TIMEOUT_S,
                                        context=context))
    try:
        data = (None if body is None else body if isinstance(body, bytes)
                else json.dumps(body).encode())
        content_type = MERGE_PATCH if method == "PATCH" else "application/json"
        headers = {"Content-Type": content_type, "User-Agent": USER_AGENT}
        conn.request(method, path, body=data, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def create_namespace(port: int, name: str) -> None:
    status, body = request(port, "POST", "/api/v1/namespaces",
                           {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    if status not in (201, 409):
        raise RuntimeError(f"creating namespace {name}: {status} {body[:300]!r}")


def current_revision(port: int, namespace: str) -> str:
    """The Pods collection's resourceVersion now: a watch from it sends only later events."""
    status, body = request(port, "GET", pods_path(namespace) + "?limit=1")
    if status != 200:
        raise RuntimeError(f"listing pods: {status} {body[:300]!r}")
    return str(json.loads(body)["metadata"]["resourceVersion"])


def watched_line(port: int, namespace: str, name: str, revision: str) -> bytes:
    """The first event line kubewire sends a watch of Pod ``name`` from ``revision``: the
    exact bytes its watchers get for that write."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=CONTROL_TIMEOUT_S)
    try:
        conn.request("GET", f"{pods_path(namespace)}?watch=1&resourceVersion={revision}"
                     f"&fieldSelector=metadata.name%3D{name}", headers={"User-Agent": USER_AGENT})
        return conn.getresponse().readline()
    finally:
        conn.close()
