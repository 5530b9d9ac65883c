"""Large API responses are gzipped for clients that accept it, as kube-apiserver does.

kube's deferredResponseWriter compresses an object response over 128 KiB at level 1 when
Accept-Encoding names gzip; small answers, watches and clients that did not ask stay plain.
"""

from __future__ import annotations

import gzip
import json

from tests.integration.harness import ServerThread
from tests.integration.wire import call, create

CONFIGMAPS = "/api/v1/namespaces/default/configmaps"


def big_configmap(name: str, size: int) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name},
            "data": {"blob": "x" * size}}


def test_large_get_and_list_are_gzipped_when_accepted(server: ServerThread) -> None:
    create(server, CONFIGMAPS, big_configmap("big", 200 * 1024))
    plain = call(server, "GET", f"{CONFIGMAPS}/big")
    assert "content-encoding" not in plain.headers
    for path in (f"{CONFIGMAPS}/big", CONFIGMAPS):
        packed = call(server, "GET", path, headers={"Accept-Encoding": "gzip, deflate"})
        assert packed.headers["content-encoding"] == "gzip"
        assert packed.headers["vary"] == "Accept-Encoding"
        assert int(packed.headers["content-length"]) == len(packed.body) < 100 * 1024
        unpacked = json.loads(gzip.decompress(packed.body))
        if path.endswith("/big"):
            assert unpacked == plain.json
        else:
            assert [i["metadata"]["name"] for i in unpacked["items"]] == ["big"]
    refused = call(server, "GET", f"{CONFIGMAPS}/big", headers={"Accept-Encoding": "gzip;q=0"})
    assert "content-encoding" not in refused.headers
    not_gzip = call(server, "GET", f"{CONFIGMAPS}/big", headers={"Accept-Encoding": "xgzipx"})
    assert "content-encoding" not in not_gzip.headers


def test_small_answers_stay_plain(server: ServerThread) -> None:
    create(server, CONFIGMAPS, big_configmap("small", 1024))
    reply = call(server, "GET", f"{CONFIGMAPS}/small", headers={"Accept-Encoding": "gzip"})
    assert "content-encoding" not in reply.headers
    assert reply.json["data"]["blob"] == "x" * 1024
