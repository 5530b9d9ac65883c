"""The client-decode stub: one watch stream of N realistic ~5 KB Pod events, pre-serialized.

``GET .../pods?watch...`` from a resourceVersion below the last event streams every later
event as fast as the client reads (coalesced chunks of ``EVENTS_PER_CHUNK`` lines), then keeps
the stream open with nothing more to say; from the last one, it only holds the stream. Any other
GET answers an empty PodList at resourceVersion 1 (clients that list before watching).

    python -m bench.stub_server --port 0 --events 20000
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
from urllib.parse import parse_qs, urlsplit

import msgspec

from bench.worker import new_event_loop, ready_until_signalled

EVENTS_PER_CHUNK = 64
FIRST_REVISION = 2
HOLD_S = 300.0  # how long a caught-up watch is held open (clients close theirs first)
EMPTY_LIST = (b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"1"},'
              b'"items":[]}')
HEAD = (b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n")


def realistic_pod(i: int) -> dict[str, object]:
    """A Deployment-made Pod as kube-apiserver stores it: ~5 KB of JSON."""
    name = f"web-7d4b9c8f6d-{i:05d}"
    meta = {"name": name, "generateName": "web-7d4b9c8f6d-", "namespace": "bench",
            "uid": f"6f1c2a4e-0000-4000-8000-{i:012d}", "resourceVersion": str(FIRST_REVISION + i),
            "creationTimestamp": "2026-01-01T00:00:00Z",
            "labels": {"app": "web", "pod-template-hash": "7d4b9c8f6d", "tier": "frontend"},
            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet",
                                 "name": "web-7d4b9c8f6d", "uid": "0c8b0e4e-1111-4111-8111-1",
                                 "controller": True, "blockOwnerDeletion": True}],
            "managedFields": [{"manager": "kube-controller-manager", "operation": "Update",
                               "apiVersion": "v1", "time": "2026-01-01T00:00:00Z",
                               "fieldsType": "FieldsV1",
                               "fieldsV1": {"f:metadata": {"f:generateName": {},
                                                           "f:labels": {".": {}, "f:app": {}}},
                                            "f:spec": {"f:containers": {}}}}]}
    containers = [{"name": cname, "image": f"registry.example/{cname}:1.{i % 7}",
                   "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
                   "env": [{"name": f"VAR_{k}", "value": f"value-{k}"} for k in range(6)],
                   "resources": {"limits": {"cpu": "500m", "memory": "256Mi"},
                                 "requests": {"cpu": "100m", "memory": "128Mi"}},
                   "volumeMounts": [{"name": "kube-api-access", "readOnly": True,
                                     "mountPath": "/var/run/secrets/kubernetes.io/sa"}],
                   "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080,
                                                 "scheme": "HTTP"},
                                     "periodSeconds": 10, "timeoutSeconds": 1,
                                     "successThreshold": 1, "failureThreshold": 3},
                   "terminationMessagePath": "/dev/termination-log",
                   "terminationMessagePolicy": "File", "imagePullPolicy": "IfNotPresent"}
                  for cname in ("app", "sidecar")]
    spec = {"containers": containers, "restartPolicy": "Always",
            "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
            "serviceAccountName": "default", "serviceAccount": "default",
            "nodeName": f"node-{i % 50}", "securityContext": {}, "schedulerName":
            "default-scheduler", "enableServiceLinks": True, "priority": 0,
            "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                             "effect": "NoExecute", "tolerationSeconds": 300}],
            "volumes": [{"name": "kube-api-access", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt",
                               "items": [{"key": "ca.crt", "path": "ca.crt"}]}}]}}]}
    conditions = [{"type": t, "status": "True", "lastProbeTime": None,
                   "lastTransitionTime": "2026-01-01T00:00:05Z"}
                  for t in ("PodReadyToStartContainers", "Initialized", "Ready",
                            "ContainersReady", "PodScheduled")]
    status = {"phase": "Running", "conditions": conditions, "hostIP": "10.0.0.7",
              "hostIPs": [{"ip": "10.0.0.7"}], "podIP": f"10.244.{i % 250}.{i % 200 + 2}",
              "podIPs": [{"ip": f"10.244.{i % 250}.{i % 200 + 2}"}],
              "startTime": "2026-01-01T00:00:01Z", "qosClass": "Burstable",
              "containerStatuses": [{"name": c["name"], "ready": True, "restartCount": 0,
                                     "image": c["image"], "imageID": "registry.example@sha256:"
                                     + "ab" * 32, "containerID": "containerd://" + "cd" * 32,
                                     "started": True, "state": {"running": {
                                         "startedAt": "2026-01-01T00:00:04Z"}}}
                                    for c in containers]}
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


def event_lines(count: int) -> list[bytes]:
    encode = msgspec.json.encode
    return [b'{"type":"ADDED","object":%b}\n' % encode(realistic_pod(i)) for i in range(count)]


async def handle(lines: list[bytes], reader: asyncio.StreamReader,
                 writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
        while True:
            head = await reader.readuntil(b"\r\n\r\n")
            target = head.split(b" ", 2)[1].decode()
            url = urlsplit(target)
            query = parse_qs(url.query)
            if query.get("watch", ["false"])[0].lower() in ("1", "true"):
                rv = int(query.get("resourceVersion", ["1"])[0] or 1)
                await stream(lines[max(0, rv - FIRST_REVISION + 1):], writer)
                return
            body, content_type = answer(url.path, head)
            writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: %b\r\n"
                         b"Content-Length: %d\r\n\r\n%b" % (content_type, len(body), body))
            await writer.drain()
    writer.close()


def answer(path: str, head: bytes) -> tuple[bytes, bytes]:
    """``/version`` and discovery as kubewire answers them (kr8s asks first), else the list."""
    from kubewire.resources import REGISTRY
    from kubewire.server.app import version_info
    from kubewire.server.discovery.documents import discovery_response

    if path.rstrip("/") == "/version":
        return msgspec.json.encode(version_info()), b"application/json"
    accept = ""
    for line in head.decode("latin-1").split("\r\n"):
        if line.lower().startswith("accept:"):
            accept = line.split(":", 1)[1].strip()
    found = discovery_response(REGISTRY, path, accept, "127.0.0.1")
    if found is not None:
        return found[1], found[2].encode()
    return EMPTY_LIST, b"application/json"


async def stream(lines: list[bytes], writer: asyncio.StreamWriter) -> None:
    writer.write(HEAD)
    for start in range(0, len(lines), EVENTS_PER_CHUNK):
        data = b"".join(lines[start:start + EVENTS_PER_CHUNK])
        writer.write(b"%x\r\n%b\r\n" % (len(data), data))
        await writer.drain()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(writer.wait_closed(), HOLD_S)
    writer.close()


async def serve(port: int, events: int) -> None:
    lines = event_lines(events)
    server = await asyncio.start_server(lambda r, w: handle(lines, r, w), "127.0.0.1", port)
    await ready_until_signalled(server.sockets[0].getsockname()[1])
    server.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--events", type=int, default=20_000)
    args = parser.parse_args()
    loop = new_event_loop()
    with contextlib.closing(loop):
        loop.run_until_complete(serve(args.port, args.events))


if __name__ == "__main__":
    main()
