"""Watch clients reading one stub stream, timed in their own process (``Worker``).

``DecodeRunner.watch(client=...)`` reads ``count`` events of the stub's Pod watch with one
client library and returns the seconds from starting the watch to the last event decoded
(configuration loading is not timed). The reference, ``raw``, reads the socket, de-chunks,
splits lines and decodes each with msgspec into kubewire's generated ``Pod`` model.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec

NAMESPACE = "bench"
START_RV = "1"


class _Event(msgspec.Struct):
    type: str
    object: Any


def _raw_decoder() -> msgspec.json.Decoder[Any]:
    from kubewire.models.core_v1 import Pod

    event = msgspec.defstruct("PodEvent", [("type", str), ("object", Pod)])
    return msgspec.json.Decoder(event)


async def read_raw(port: int, kubeconfig: str, count: int) -> float:
    decoder = _raw_decoder()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    started = time.perf_counter()
    writer.write(b"GET /api/v1/namespaces/%b/pods?watch=1&resourceVersion=%b HTTP/1.1\r\n"
                 b"Host: 127.0.0.1\r\nAccept: application/json\r\n\r\n"
                 % (NAMESPACE.encode(), START_RV.encode()))
    await reader.readuntil(b"\r\n\r\n")
    seen = 0
    pending = b""
    try:
        while seen < count:
            size = int((await reader.readuntil(b"\r\n"))[:-2], 16)
            data = await reader.readexactly(size + 2)
            lines = (pending + data[:-2]).split(b"\n")
            pending = lines.pop()
            for line in lines:
                decoder.decode(line)
                seen += 1
    finally:
        writer.close()
        await writer.wait_closed()
    return time.perf_counter() - started


async def read_kubewire(port: int, kubeconfig: str, count: int) -> float:
    from kubewire.client import Api, create_client
    from kubewire.models.core_v1 import Pod

    async with await create_client(kubeconfig) as client:
        started = time.perf_counter()
        stream = Api(Pod, client=client, namespace=NAMESPACE).watch(resource_version=START_RV)
        seen = 0
        try:
            async for event in stream:
                assert event.object.metadata is not None
                seen += 1
                if seen >= count:
                    break
        finally:
            await stream.aclose()
        return time.perf_counter() - started


async def read_lightkube(port: int, kubeconfig: str, count: int) -> float:
    from lightkube import AsyncClient, KubeConfig
    from lightkube.resources.core_v1 import Pod

    async with AsyncClient(KubeConfig.from_file(kubeconfig)) as client:
        started = time.perf_counter()
        seen = 0
        stream = client.watch(Pod, namespace=NAMESPACE, resource_version=START_RV)
        async with contextlib.aclosing(stream):  # type: ignore[type-var]
            async for _, _pod in stream:
                seen += 1
                if seen >= count:
                    break
        return time.perf_counter() - started


async def read_kubernetes_asyncio(port: int, kubeconfig: str, count: int) -> float:
    from kubernetes_asyncio import config, watch
    from kubernetes_asyncio.client import ApiClient, Configuration, CoreV1Api

    configuration = Configuration()
    await config.load_kube_config(config_file=kubeconfig, client_configuration=configuration)
    async with ApiClient(configuration) as api:
        core = CoreV1Api(api)
        started = time.perf_counter()
        w = watch.Watch()
        seen = 0
        try:
            async for _event in w.stream(core.list_namespaced_pod, NAMESPACE,
                                         resource_version=START_RV):
                seen += 1
                if seen >= count:
                    break
        finally:
            w.stop()
            await w.close()
        return time.perf_counter() - started


async def read_kubernetes(port: int, kubeconfig: str, count: int) -> float:
    """The official synchronous client (blocking is fine: nothing else runs here)."""
    from kubernetes import client, config, watch

    api = config.new_client_from_config(config_file=kubeconfig)  # type: ignore[no-untyped-call]
    try:
        core = client.CoreV1Api(api)
        started = time.perf_counter()
        w = watch.Watch()  # type: ignore[no-untyped-call]
        events = w.stream(  # type: ignore[no-untyped-call]
            core.list_namespaced_pod, NAMESPACE, resource_version=START_RV,
            _request_timeout=120)
        for seen, _event in enumerate(events, 1):
            if seen >= count:
                w.stop()  # type: ignore[no-untyped-call]
                break
        return time.perf_counter() - started
    finally:
        api.close()


async def read_kr8s(port: int, kubeconfig: str, count: int) -> float:
    import kr8s.asyncio

    api = await kr8s.asyncio.api(kubeconfig=kubeconfig)
    started = time.perf_counter()
    seen = 0
    stream = api.watch("pods", namespace=NAMESPACE, since=START_RV)
    try:
        async for _event in stream:
            seen += 1
            if seen >= count:
                break
    finally:
        await stream.aclose()
    return time.perf_counter() - started


READERS: dict[str, Callable[[int, str, int], Awaitable[float]]] = {
    "raw": read_raw, "kubewire": read_kubewire, "lightkube": read_lightkube,
    "kubernetes": read_kubernetes, "kubernetes_asyncio": read_kubernetes_asyncio,
    "kr8s": read_kr8s}


class DecodeRunner:
    async def watch(self, client: str, port: int, kubeconfig: str, count: int,
                    timeout_s: float) -> float:
        return await asyncio.wait_for(READERS[client](port, kubeconfig, count), timeout_s)

    async def aclose(self) -> None:
        return None
