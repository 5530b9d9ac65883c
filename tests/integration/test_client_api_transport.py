"""The client's transport against the real server: kubeconfig → requests → typed errors."""

from __future__ import annotations

import asyncio
import json

import pytest

from kubewire.client.client import create_client
from kubewire.client.errors import AlreadyExists, NotFound, TransportError
from kubewire.client.transport import Request
from tests.integration.harness import ServerThread


async def test_create_client_from_server_kubeconfig(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        assert client.namespace == "default"
        body = await client.request(Request("GET", "/api/v1/namespaces/default"))
        assert json.loads(body)["metadata"]["name"] == "default"


async def test_error_answers_become_typed_status_errors(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        with pytest.raises(NotFound) as missing:
            await client.request(Request("GET", "/api/v1/namespaces/default/pods/nope"))
        assert missing.value.to_status()["details"] == {"name": "nope", "kind": "pods"}
        assert str(missing.value) == 'pods "nope" not found'
        pod = json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                          "spec": {"containers": [{"name": "c", "image": "i"}]}}).encode()
        await client.request(Request("POST", "/api/v1/namespaces/default/pods", body=pod))
        with pytest.raises(AlreadyExists) as twice:
            await client.request(Request("POST", "/api/v1/namespaces/default/pods", body=pod))
        assert twice.value.code == 409


async def test_stopped_server_is_transport_error(server: ServerThread) -> None:
    async with await create_client(server.kubeconfig) as client:
        server.stop()
        with pytest.raises(TransportError):
            await client.request(Request("GET", "/api/v1/namespaces"))


async def test_the_transport_names_the_loop_its_connections_belong_to(
        server: ServerThread) -> None:
    client = await create_client(server.kubeconfig)
    assert client.transport.loop is None  # nothing opened yet
    await client.transport.request(Request("GET", "/version"))
    assert client.transport.loop is asyncio.get_running_loop()
    await client.close()
    assert client.transport.loop is None
