"""Bodies that hide trouble: text that is not UTF-8, and YAML aliases that expand without end.

kube-apiserver reads JSON with Go's encoding/json, which turns each byte of an invalid UTF-8
sequence inside a string, and each escaped unpaired surrogate, into U+FFFD: creates and the
JSON-based patches store U+FFFD and answer as usual. YAML bodies (create, update, apply) go
through go-yaml, whose reader refuses such bytes: 400 with its text. Never a 500, and a refused
request changes nothing.

YAML aliases are bounded as go-yaml bounds them (CVE-2019-11253): a "billion laughs" of a few
hundred bytes is refused before anything is expanded, with go-yaml's text, so it costs no more
than any small body; a document with a few aliases is read as usual.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.integration.harness import ServerThread
from tests.integration.kinds import CONFIG_MAP
from tests.integration.wire import Reply, call, create, get

CM = CONFIG_MAP.collection()
JSON_TYPE = {"Content-Type": "application/json"}


@pytest.fixture
def seeded(server: ServerThread) -> Iterator[ServerThread]:
    create(server, CM, CONFIG_MAP.obj("existing"))
    yield server


def bad_request(message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "BadRequest", "code": 400}


def _stored(server: ServerThread, name: str) -> dict[str, Any]:
    obj: dict[str, Any] = get(server, CONFIG_MAP.item(name))
    return obj


def test_json_create_stores_invalid_utf8_as_replacement_characters(seeded: ServerThread) -> None:
    body = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bytes",'
            b'"annotations":{"cut":"\xe2\x82"}},'
            b'"data":{"k":"x\xffy","surrogate":"\\ud800\\u0041","overlong":"\xc0\xaf"}}')
    reply = call(seeded, "POST", CM, body, JSON_TYPE)
    assert reply.status == 201, reply.body
    for obj in (reply.json, _stored(seeded, "bytes")):
        # one U+FFFD per byte of a bad sequence, as Go's utf8.DecodeRune
        assert obj["data"] == {"k": "x\ufffdy", "surrogate": "\ufffdA",
                               "overlong": "\ufffd\ufffd"}
        assert obj["metadata"]["annotations"] == {"cut": "\ufffd\ufffd"}


@pytest.mark.parametrize(("media_type", "body", "key"), [
    ("application/merge-patch+json", b'{"data":{"m":"\xfe\xe2\x82"}}', "m"),
    ("application/strategic-merge-patch+json", b'{"data":{"s":"\xfe\xe2\x82"}}', "s"),
    ("application/json-patch+json", b'[{"op":"add","path":"/data/j","value":"\xfe\xe2\x82"}]',
     "j"),
    ("application/merge-patch+json", b'{"data":{"u":"\\udfff\\ud800"}}', "u"),
])
def test_json_patches_store_invalid_utf8_as_replacement_characters(
        seeded: ServerThread, media_type: str, body: bytes, key: str) -> None:
    reply = call(seeded, "PATCH", CONFIG_MAP.item("existing"), body,
                 {"Content-Type": media_type})
    assert reply.status == 200, reply.body
    expected = "\ufffd\ufffd" if key == "u" else "\ufffd\ufffd\ufffd"
    assert reply.json["data"][key] == expected
    assert _stored(seeded, "existing")["data"][key] == expected


def _unchanged(server: ServerThread, reply: Reply, status: int) -> dict[str, Any]:
    assert reply.status == status, reply.body
    assert _stored(server, "existing")["data"] == {"key": "one"}
    assert [i["metadata"]["name"] for i in get(server, CM)["items"]] == ["existing"]
    status_object: dict[str, Any] = reply.status_object()
    return status_object


def test_a_json_update_with_a_bad_key_is_invalid_not_an_error(seeded: ServerThread) -> None:
    obj = get(seeded, CONFIG_MAP.item("existing"))
    body = json.dumps({**obj, "data": {"KEY": "v"}}).encode().replace(b"KEY", b"\xffk")
    status = _unchanged(seeded, call(seeded, "PUT", CONFIG_MAP.item("existing"), body,
                                     JSON_TYPE), 422)
    assert status["message"].startswith(
        'ConfigMap "existing" is invalid: data[\ufffdk]: Invalid value: "\ufffdk": ')


def test_a_delete_body_with_invalid_utf8_is_read_not_an_error(seeded: ServerThread) -> None:
    body = b'{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"\xff"}'
    status = _unchanged(seeded, call(seeded, "DELETE", CONFIG_MAP.item("existing"), body,
                                     JSON_TYPE), 422)
    assert status["details"]["causes"] == [{
        "reason": "FieldValueNotSupported",
        "message": 'Unsupported value: "\ufffd": supported values: "Foreground", '
                   '"Background", "Orphan", "nil"',
        "field": "propagationPolicy"}]


def test_a_byte_outside_a_string_is_a_syntax_error(seeded: ServerThread) -> None:
    body = b'{"apiVersion":"v1","kind":\xe2\x82}'
    status = _unchanged(seeded, call(seeded, "POST", CM, body, JSON_TYPE), 400)
    # Go names the byte as a rune; the summary shows the body as Go's JSON encoder writes it
    assert status == bad_request(
        "the object provided is unrecognized (must be of type ConfigMap): couldn't get "
        "version/kind; json parse error: invalid character 'â' looking for beginning of value "
        '({"apiVersion":"v1","kind":\ufffd\ufffd})')


YAML_BODY = b'apiVersion: v1\nkind: ConfigMap\nmetadata: {name: y}\ndata: {k: "x\xffy"}\n'


@pytest.mark.parametrize(("body", "problem"), [
    (YAML_BODY, "invalid leading UTF-8 octet"),
    (YAML_BODY.replace(b"\xff", b"\xe2\x82"), "invalid trailing UTF-8 octet"),
    (YAML_BODY.replace(b"\xff", b"\xed\xa0\x80"), "invalid Unicode character"),
    (YAML_BODY.replace(b"\xff", b"\xc0\xaf"), "invalid length of a UTF-8 sequence"),
    (YAML_BODY.replace(b"\xff", b"\x07"), "control characters are not allowed"),
    (YAML_BODY.replace(b"\xff", b"") + b"# \xe2\x82", "incomplete UTF-8 octet sequence"),
])
def test_yaml_bodies_that_are_not_utf8_get_go_yamls_reader_error(
        seeded: ServerThread, body: bytes, problem: str) -> None:
    status = _unchanged(seeded, call(seeded, "POST", CM, body,
                                     {"Content-Type": "application/yaml"}), 400)
    # create.go transformDecodeError: the YAML serializer's error, then the body's first bytes
    assert status == bad_request(
        f"the object provided is unrecognized (must be of type ConfigMap): yaml: {problem} "
        f"({body[:30].hex()} ...)")


def test_an_apply_body_is_yaml_so_invalid_utf8_is_refused(seeded: ServerThread) -> None:
    body = (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"existing"},'
            b'"data":{"key":"\xff"}}')
    reply = call(seeded, "PATCH", CONFIG_MAP.item("existing"), body,
                 {"Content-Type": "application/apply-patch+yaml"},
                 params={"fieldManager": "test"})
    status = _unchanged(seeded, reply, 400)
    assert status == bad_request("error decoding YAML: error converting YAML to JSON: yaml: "
                                 "invalid leading UTF-8 octet")


# The CVE-2019-11253 shape: eight levels of nine aliases each (43 million strings) in 385 bytes.
LAUGHS = b"""apiVersion: v1
kind: ConfigMap
metadata: {name: laughs}
data:
  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
  b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
  c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
  d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
  e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
  f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
  g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
  h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
"""
EXCESSIVE = "yaml: document contains excessive aliasing"


@pytest.mark.parametrize(("method", "path"), [("POST", CM),
                                              ("PUT", CONFIG_MAP.item("existing"))])
def test_a_billion_laughs_is_refused_before_expansion(seeded: ServerThread, method: str,
                                                      path: str) -> None:
    body = LAUGHS.replace(b"name: laughs", b"name: existing") if method == "PUT" else LAUGHS
    # Within the client's 10 s timeout; expanding it took ~25 s and 1.15 GB.
    reply = call(seeded, method, path, body, {"Content-Type": "application/yaml"})
    status = _unchanged(seeded, reply, 400)
    assert status == bad_request(
        f"the object provided is unrecognized (must be of type ConfigMap): {EXCESSIVE} "
        f"({body[:30].hex()} ...)")


def test_a_billion_laughs_apply_is_refused_before_expansion(seeded: ServerThread) -> None:
    body = LAUGHS.replace(b"name: laughs", b"name: existing")
    reply = call(seeded, "PATCH", CONFIG_MAP.item("existing"), body,
                 {"Content-Type": "application/apply-patch+yaml"},
                 params={"fieldManager": "test"})
    status = _unchanged(seeded, reply, 400)
    assert status == bad_request(
        f"error decoding YAML: error converting YAML to JSON: {EXCESSIVE}")


def test_a_few_aliases_are_fine(seeded: ServerThread) -> None:
    body = b"""apiVersion: v1
kind: ConfigMap
metadata:
  name: aliased
  labels: &labels {app: web, tier: front}
  annotations:
    <<: *labels
    tier: back
data: {a: &v shared, b: *v, first: &v one, again: &v two, c: *v}
"""
    reply = call(seeded, "POST", CM, body, {"Content-Type": "application/yaml"})
    assert reply.status == 201, reply.body
    stored = _stored(seeded, "aliased")
    # as in go-yaml, an anchor named again replaces the earlier one for later aliases
    assert stored["data"] == {"a": "shared", "b": "shared", "first": "one", "again": "two",
                              "c": "two"}
    assert stored["metadata"]["labels"] == {"app": "web", "tier": "front"}
    assert stored["metadata"]["annotations"] == {"app": "web", "tier": "back"}


def test_a_strategic_merge_patch_that_fails_prints_what_go_decoded(
        seeded: ServerThread) -> None:
    body = b'{"metadata":{"labels":{"x":"\xff"}},"data":{"k":5}}'
    reply = call(seeded, "PATCH", CONFIG_MAP.item("existing"), body,
                 {"Content-Type": "application/strategic-merge-patch+json"})
    status = _unchanged(seeded, reply, 422)
    # applyPatchToObject's %+v of the patch map, as json.Unmarshal decoded it
    assert status["message"] == (' "" is invalid: patch: Invalid value: '
                                 '"map[data:map[k:5] metadata:map[labels:map[x:\ufffd]]]": '
                                 "cannot convert int64 to string")


def test_a_query_value_and_a_user_agent_that_are_not_utf8_read_as_go_reads_them(
        seeded: ServerThread) -> None:
    """``fieldManager=%FF%E2%82`` names a manager of three U+FFFD (Go: one per byte; Python's
    decoder gives two), and a User-Agent's bytes name the default manager the same way."""
    body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"by-query"},"data":{"k":"v"}}'
    reply = call(seeded, "POST", f"{CM}?fieldManager=%FF%E2%82", body, JSON_TYPE)
    assert reply.status == 201, reply.body
    assert [e["manager"] for e in reply.json["metadata"]["managedFields"]] == ["\ufffd" * 3]
    agent = b"k\xff\xc3\xa9/1.0".decode("latin-1")  # the raw bytes, as http.client sends them
    body = b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"by-agent"},"data":{"k":"v"}}'
    reply = call(seeded, "POST", CM, body, {**JSON_TYPE, "User-Agent": agent})
    assert reply.status == 201, reply.body
    assert [e["manager"] for e in reply.json["metadata"]["managedFields"]] == ["k\ufffd\u00e9"]
