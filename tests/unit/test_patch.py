"""server/patch.py: RFC 6902 / RFC 7386 vectors and kube-apiserver's Status for every failure."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.server.patch.json_patch import (
    MAX_JSON_PATCH_OPERATIONS,
    PATCH_REJECTED_MESSAGE,
    apply_json_patch,
    apply_merge_patch,
    json_equal,
)
from kubewire.status import StatusError


def _ops(*ops: dict[str, Any]) -> bytes:
    return json.dumps(list(ops)).encode()


def _status_of(call: Any, *args: Any) -> dict[str, Any]:
    with pytest.raises(StatusError) as info:
        call(*args)
    return info.value.to_status()


def _bad_request(message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": "BadRequest", "code": 400}


REJECTED = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": PATCH_REJECTED_MESSAGE, "reason": "Invalid", "details": {}, "code": 422}


# --- RFC 6902 appendix A ------------------------------------------------------------------------

RFC6902_OK = [
    ("A.1 add member", {"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}],
     {"baz": "qux", "foo": "bar"}),
    ("A.2 add element", {"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}],
     {"foo": ["bar", "qux", "baz"]}),
    ("A.3 remove member", {"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}],
     {"foo": "bar"}),
    ("A.4 remove element", {"foo": ["bar", "qux", "baz"]}, [{"op": "remove", "path": "/foo/1"}],
     {"foo": ["bar", "baz"]}),
    ("A.5 replace", {"baz": "qux", "foo": "bar"},
     [{"op": "replace", "path": "/baz", "value": "boo"}], {"baz": "boo", "foo": "bar"}),
    ("A.6 move value", {"foo": {"bar": "baz", "waldo": "fred"}, "qux": {"corge": "grault"}},
     [{"op": "move", "from": "/foo/waldo", "path": "/qux/thud"}],
     {"foo": {"bar": "baz"}, "qux": {"corge": "grault", "thud": "fred"}}),
    ("A.7 move element", {"foo": ["all", "grass", "cows", "eat"]},
     [{"op": "move", "from": "/foo/1", "path": "/foo/3"}],
     {"foo": ["all", "cows", "eat", "grass"]}),
    ("A.8 test success", {"baz": "qux", "foo": ["a", 2, "c"]},
     [{"op": "test", "path": "/baz", "value": "qux"}, {"op": "test", "path": "/foo/1", "value": 2}],
     {"baz": "qux", "foo": ["a", 2, "c"]}),
    ("A.10 add nested member", {"foo": "bar"},
     [{"op": "add", "path": "/child", "value": {"grandchild": {}}}],
     {"foo": "bar", "child": {"grandchild": {}}}),
    ("A.11 unrecognised members ignored", {"foo": "bar"},
     [{"op": "add", "path": "/baz", "value": "qux", "xyz": 123}], {"foo": "bar", "baz": "qux"}),
    ("A.14 ~ escape ordering", {"/": 9, "~1": 10}, [{"op": "test", "path": "/~01", "value": 10}],
     {"/": 9, "~1": 10}),
    ("A.16 add array value", {"foo": ["bar"]},
     [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}], {"foo": ["bar", ["abc", "def"]]}),
    ("copy", {"a": {"b": [1]}}, [{"op": "copy", "from": "/a/b", "path": "/c"}],
     {"a": {"b": [1]}, "c": [1]}),
    ("~1 escapes a slash", {"metadata": {"labels": {}}},
     [{"op": "add", "path": "/metadata/labels/app.kubernetes.io~1name", "value": "web"}],
     {"metadata": {"labels": {"app.kubernetes.io/name": "web"}}}),
    ("empty patch", {"a": 1}, [], {"a": 1}),
    ("replace the whole document", {"a": 1}, [{"op": "replace", "path": "", "value": {"b": 2}}],
     {"b": 2}),
    ("test the whole document", {"a": 1}, [{"op": "test", "path": "", "value": {"a": 1}}],
     {"a": 1}),
    ("test null against a missing member", {"a": 1},
     [{"op": "test", "path": "/b", "value": None}], {"a": 1}),
    # evanphx/json-patch v4 quirks that kube-apiserver exhibits
    ("negative index counts from the end", {"a": [1, 2, 3]},
     [{"op": "remove", "path": "/a/-1"}], {"a": [1, 2]}),
    ("add at -1 appends", {"a": [1, 2]}, [{"op": "add", "path": "/a/-1", "value": 9}],
     {"a": [1, 2, 9]}),
    ("replace of a missing member adds it", {"a": 1},
     [{"op": "replace", "path": "/b", "value": 2}], {"a": 1, "b": 2}),
    ("copy from a missing member copies null", {"a": 1},
     [{"op": "copy", "from": "/x", "path": "/b"}], {"a": 1, "b": None}),
    ("add without value adds null", {"a": 1}, [{"op": "add", "path": "/b"}], {"a": 1, "b": None}),
    ("leading zero index", {"a": [1, 2]}, [{"op": "remove", "path": "/a/01"}], {"a": [1]}),
]


@pytest.mark.parametrize(("doc", "patch", "expected"), [c[1:] for c in RFC6902_OK],
                         ids=[c[0] for c in RFC6902_OK])
def test_json_patch_applies(doc: dict[str, Any], patch: list[Any], expected: Any) -> None:
    before = copy.deepcopy(doc)
    assert apply_json_patch(doc, json.dumps(patch).encode()) == expected
    assert doc == before  # input untouched


def test_json_patch_null_body_is_an_empty_patch() -> None:
    assert apply_json_patch({"a": 1}, b"null") == {"a": 1}


def test_json_patch_copy_is_deep() -> None:
    out = apply_json_patch({"a": {"b": 1}}, _ops({"op": "copy", "from": "/a", "path": "/c"},
                                                 {"op": "add", "path": "/c/b", "value": 2}))
    assert out == {"a": {"b": 1}, "c": {"b": 2}}


RFC6902_FAIL = [
    ("A.9 failed test", {"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}],
     "testing value /baz failed: test failed"),
    ("A.12 add to a missing parent", {"foo": "bar"},
     [{"op": "add", "path": "/baz/bat", "value": "qux"}],
     'add operation does not apply: doc is missing path: "/baz/bat": missing value'),
    ("A.13 duplicate op: the last wins", {"foo": "bar"},
     [{"op": "add", "path": "/baz", "value": "qux", "OP": "x"}], None),
    ("A.15 string is not a number", {"/": 9, "~1": 10},
     [{"op": "test", "path": "/~01", "value": "10"}], "testing value /~01 failed: test failed"),
    ("remove a missing member", {"a": 1}, [{"op": "remove", "path": "/b"}],
     "error in remove for path: '/b': Unable to remove nonexistent key: b: missing value"),
    ("remove past the end", {"a": [1]}, [{"op": "remove", "path": "/a/1"}],
     "error in remove for path: '/a/1': Unable to access invalid index: 1: "
     "invalid index referenced"),
    ("remove with -", {"a": [1]}, [{"op": "remove", "path": "/a/-"}],
     "error in remove for path: '/a/-': strconv.Atoi: parsing \"-\": invalid syntax"),
    ("add past the end", {"a": [1]}, [{"op": "add", "path": "/a/3", "value": 0}],
     "error in add for path: '/a/3': Unable to access invalid index: 3: invalid index referenced"),
    ("add at a word index", {"a": [1]}, [{"op": "add", "path": "/a/x", "value": 0}],
     "error in add for path: '/a/x': value was not a proper array index: 'x': "
     'strconv.Atoi: parsing "x": invalid syntax'),
    ("replace past the end", {"a": [1]}, [{"op": "replace", "path": "/a/5", "value": 0}],
     "replace operation does not apply: doc is missing key: /a/5: missing value"),
    ("replace the root with a scalar", {"a": 1}, [{"op": "replace", "path": "", "value": 1}],
     "replace operation value must be object or array: %!w(<nil>)"),
    ("add at the root path", {"a": 1}, [{"op": "add", "path": "", "value": {}}],
     'add operation does not apply: doc is missing path: "": missing value'),
    ("through a scalar", {"a": 1}, [{"op": "add", "path": "/a/b", "value": 0}],
     'add operation does not apply: doc is missing path: "/a/b": missing value'),
    ("missing path", {"a": 1}, [{"op": "remove"}],
     "remove operation failed to decode path: missing value"),
    ("move from a missing member", {"a": 1}, [{"op": "move", "from": "/x", "path": "/y"}],
     "error in move for path: 'x': Unable to remove nonexistent key: x: missing value"),
    ("move into its own child", {"a": {"b": 1}}, [{"op": "move", "from": "/a", "path": "/a/c"}],
     "move operation does not apply: doc is missing destination path: /a/c: missing value"),
    ("unknown op", {"a": 1}, [{"op": "frobnicate", "path": "/a"}], "Unexpected kind: frobnicate"),
    ("null operation", {"a": 1}, [None], "Unexpected kind: unknown"),
    ("test without value", {"a": 1}, [{"op": "test", "path": "/a"}],
     "testing value /a failed: test failed"),
    ("1 is not 1.0", {"a": 1}, [{"op": "test", "path": "/a", "value": 1.0}],
     "testing value /a failed: test failed"),
    ("1 is not true", {"a": 1}, [{"op": "test", "path": "/a", "value": True}],
     "testing value /a failed: test failed"),
]


@pytest.mark.parametrize(("doc", "patch", "note"), [c[1:] for c in RFC6902_FAIL],
                         ids=[c[0] for c in RFC6902_FAIL])
def test_json_patch_operation_failure_is_kube_422(doc: dict[str, Any], patch: list[Any],
                                                  note: str | None) -> None:
    body = json.dumps(patch).encode()
    if note is None:  # A.13: JSON with a duplicate "op" member; Go keeps the last one
        body = b'[{"op": "add", "path": "/baz", "value": "qux", "op": "remove"}]'
        note = ("error in remove for path: '/baz': Unable to remove nonexistent key: baz: "
                "missing value")
    with pytest.raises(StatusError) as info:
        apply_json_patch(doc, body)
    assert info.value.to_status() == REJECTED
    assert info.value.__notes__ == [note]  # the library's reason, kept for logs


def test_json_patch_result_that_is_not_an_object() -> None:
    status = _status_of(apply_json_patch, {"a": 1}, _ops({"op": "replace", "path": "",
                                                          "value": [1]}))
    detail = ("couldn't get version/kind; json parse error: json: cannot unmarshal array into Go "
              'value of type struct { APIVersion string "json:\\"apiVersion,omitempty\\""; '
              'Kind string "json:\\"kind,omitempty\\"" }')
    assert status == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": f' "" is invalid: patch: Invalid value: "[1]": {detail}', "reason": "Invalid",
        "details": {"causes": [{"reason": "FieldValueInvalid",
                                "message": f'Invalid value: "[1]": {detail}', "field": "patch"}]},
        "code": 422}


def test_json_patch_too_many_operations_is_413() -> None:
    ops = [{"op": "test", "path": "/a", "value": 1}] * (MAX_JSON_PATCH_OPERATIONS + 1)
    assert _status_of(apply_json_patch, {"a": 1}, json.dumps(ops).encode()) == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "Request entity too large: The allowed maximum operations in a JSON patch "
                   "is 10000, got 10001",
        "reason": "RequestEntityTooLarge", "code": 413}


@pytest.mark.parametrize(("body", "message"), [
    (b'{"op":"add","path":"/a","value":1}',
     "json: cannot unmarshal object into Go value of type []handlers.jsonPatchOp"),
    (b'"add"', "json: cannot unmarshal string into Go value of type []handlers.jsonPatchOp"),
    (b"true", "json: cannot unmarshal bool into Go value of type []handlers.jsonPatchOp"),
    (b"[1]", "json: cannot unmarshal number into Go value of type handlers.jsonPatchOp"),
    (b"[[]]", "json: cannot unmarshal array into Go value of type handlers.jsonPatchOp"),
    (b'[{"op":"add","path":5}]',
     "json: cannot unmarshal number into Go struct field jsonPatchOp.path of type string"),
    (b'[{"op":["add"]}]',
     "json: cannot unmarshal array into Go struct field jsonPatchOp.op of type string"),
    (b'[{"op":"copy","from":{}}]',
     "json: cannot unmarshal object into Go struct field jsonPatchOp.from of type string"),
])
def test_json_patch_wrong_shape_is_400(body: bytes, message: str) -> None:
    assert _status_of(apply_json_patch, {"a": 1}, body) == _bad_request(
        f"error decoding patch: {message}")


GO_SYNTAX_ERRORS = [
    (b"", "unexpected end of JSON input"),
    (b"  \n", "unexpected end of JSON input"),
    (b"[", "unexpected end of JSON input"),
    (b'["abc', "unexpected end of JSON input"),
    (b"x", "invalid character 'x' looking for beginning of value"),
    (b"NaN", "invalid character 'N' looking for beginning of value"),
    (b"[1,]", "invalid character ']' looking for beginning of value"),
    (b'{"a":1,}', "invalid character '}' looking for beginning of object key string"),
    (b"{a:1}", "invalid character 'a' looking for beginning of object key string"),
    (b'{"a" 1}', "invalid character '1' after object key"),
    (b'{"a":1 "b":2}', "invalid character '\"' after object key:value pair"),
    (b"[1 2]", "invalid character '2' after array element"),
    (b"[] x", "invalid character 'x' after top-level value"),
    (b"01", "invalid character '1' after top-level value"),
    (b"tru", "invalid character ' ' in literal true (expecting 'e')"),
    (b"[nul]", "invalid character ']' in literal null (expecting 'l')"),
    (b"[-]", "invalid character ']' in numeric literal"),
    (b"[1.]", "invalid character ']' after decimal point in numeric literal"),
    (b"[1e]", "invalid character ']' in exponent of numeric literal"),
    (b'["\\x"]', "invalid character 'x' in string escape code"),
    (b'["\\u12"]', "invalid character '\"' in \\u hexadecimal character escape"),
    (b'["a\nb"]', "invalid character '\\n' in string literal"),
    (b"[\x01]", "invalid character '\\x01' looking for beginning of value"),
    (b"['a']", "invalid character '\\'' looking for beginning of value"),
    (b"\xef\xbb\xbf[]", "invalid character 'ï' looking for beginning of value"),
]


@pytest.mark.parametrize(("body", "message"), GO_SYNTAX_ERRORS)
def test_unparseable_body_is_400_with_go_message(body: bytes, message: str) -> None:
    expected = _bad_request(f"error decoding patch: {message}")
    assert _status_of(apply_json_patch, {"a": 1}, body) == expected
    assert _status_of(apply_merge_patch, {"a": 1}, body) == expected


# --- RFC 7386 appendix A --------------------------------------------------------------------------

RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    # kube (evanphx v4) extras
    ({"a": None}, {"a": {"b": None, "c": 1}}, {"a": {"c": 1}}),  # null target: pruned insert
    ({}, {"a": [1, None, {"b": None}]}, {"a": [1, {}]}),  # inserted arrays lose null items
    ({"a": {"x": 1}}, {"a": [1, None]}, {"a": [1, None]}),  # replacing an object: unpruned
    ({"a": "s"}, {"a": {"b": None}}, {"a": {}}),
]


@pytest.mark.parametrize(("doc", "patch", "expected"), RFC7386)
def test_merge_patch_applies(doc: dict[str, Any], patch: dict[str, Any], expected: Any) -> None:
    before = copy.deepcopy(doc)
    assert apply_merge_patch(doc, json.dumps(patch).encode()) == expected
    assert doc == before


@pytest.mark.parametrize(("body", "kind"), [
    (b'["c","d"]', "array"), (b'["c"]', "array"), (b'"bar"', "string"), (b"1", "number"),
    (b"false", "bool"),
])
def test_merge_patch_that_is_not_an_object_is_400(body: bytes, kind: str) -> None:
    assert _status_of(apply_merge_patch, {"a": "foo"}, body) == _bad_request(
        f"error decoding patch: json: cannot unmarshal {kind} into Go value of type "
        "map[string]interface {}")


def test_merge_patch_null_is_400_invalid_json_patch() -> None:
    assert _status_of(apply_merge_patch, {"a": "foo"}, b"null") == _bad_request(
        "Invalid JSON Patch")


def test_merge_patch_result_shares_nothing_with_the_input() -> None:
    doc = {"spec": {"template": {"labels": {"a": "1"}}}}
    out = apply_merge_patch(doc, b'{"spec":{"replicas":2}}')
    out["spec"]["template"]["labels"]["a"] = "changed"
    assert doc["spec"]["template"]["labels"]["a"] == "1"


def test_json_equal_is_type_strict() -> None:
    assert json_equal({"a": [1, "x", None]}, {"a": [1, "x", None]})
    assert not json_equal(1, 1.0)
    assert not json_equal(1, True)
    assert not json_equal({"a": 1}, {"a": 1, "b": None})


@given(st.binary(max_size=64))
def test_any_body_gives_a_dict_or_a_status_error(body: bytes) -> None:
    for apply in (apply_json_patch, apply_merge_patch):
        try:
            assert isinstance(apply({"a": [1, {"b": 2}]}, body), dict)
        except StatusError as exc:
            assert exc.code in (400, 413, 422)


_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner,
                                                                max_size=3),
    max_leaves=10)


@given(st.dictionaries(st.text(max_size=3), _json_values, max_size=4))
def test_any_valid_json_object_is_accepted_as_a_merge_patch(patch: dict[str, Any]) -> None:
    out = apply_merge_patch({}, json.dumps(patch).encode())
    assert all(v is not None for v in out.values())
