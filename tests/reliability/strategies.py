"""Hypothesis strategies for hostile input: bodies, patches, selectors, query parameters, headers.

Each strategy mixes plausible values (close to what a real client sends, so the server's deeper
checks are reached) with garbage. ``HOSTILE`` is the shared ``settings``: a fixed number of
examples, no deadline, derandomized so CI is reproducible; ``KUBEWIRE_FUZZ_EXAMPLES=<n>``
raises the count for a longer local run.
"""

from __future__ import annotations

import base64
import json
import os
from typing import Any

from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st

JSON = Any

EXAMPLES = int(os.environ.get("KUBEWIRE_FUZZ_EXAMPLES", "100"))
# Shrinking a hang costs a socket timeout per step: only when asked (KUBEWIRE_FUZZ_SHRINK=1).
_PHASES = tuple(Phase) if os.environ.get("KUBEWIRE_FUZZ_SHRINK") else (
    Phase.explicit, Phase.reuse, Phase.generate)
HOSTILE = settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
                   phases=_PHASES, print_blob=True,
                   suppress_health_check=[HealthCheck.function_scoped_fixture,
                                          HealthCheck.too_slow, HealthCheck.data_too_large])

# --- JSON values --------------------------------------------------------------------------------

HUGE_INTS = st.sampled_from([2**63, 2**63 - 1, -(2**63) - 1, 2**64, 10**40, -(10**40), 2**53 + 1,
                             10**400, -(10**300)])
NUMBER_TEXTS = st.sampled_from([
    "1e400", "-1e400", "1e-400", "0.1e99999999999", "1" * 5000, "-0", "-0.0", "1E+2", "0e0",
    "123456789012345678901234567890", "9223372036854775808", "-9223372036854775809",
    "18446744073709551616", "1.7976931348623157e309", "4.9e-325",
])
_KEYS = st.one_of(
    st.sampled_from(["apiVersion", "kind", "metadata", "spec", "status", "name", "namespace",
                     "labels", "annotations", "resourceVersion", "uid", "generateName",
                     "finalizers", "ownerReferences", "managedFields", "containers", "image",
                     "replicas", "selector", "data", "ports", "port", "", "$patch",
                     "$setElementOrder/containers", "$retainKeys", "creationTimestamp",
                     "deletionTimestamp", "generation"]),
    st.text(max_size=12),
)
SCALARS = st.one_of(
    st.none(), st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70), HUGE_INTS,
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=30),
    st.sampled_from(["", "v1", "Pod", "apps/v1", "2024-01-01T00:00:00Z", "not-a-time",
                     "1Gi", "100m", "-1", "true", "null", "\u0000", "\ud7ff", "x" * 300]),
)
JSON_VALUES: st.SearchStrategy[JSON] = st.recursive(
    SCALARS,
    lambda children: st.one_of(st.lists(children, max_size=4),
                               st.dictionaries(_KEYS, children, max_size=5)),
    max_leaves=25,
)


def _set_path(obj: JSON, path: list[str], value: JSON) -> JSON:
    """``obj`` with ``value`` at ``path`` (dicts created on the way; non-dicts replaced)."""
    if not path:
        return value
    out = dict(obj) if isinstance(obj, dict) else {}
    out[path[0]] = _set_path(out.get(path[0]), path[1:], value)
    return out


_FIELD_PATHS = st.sampled_from([
    ["apiVersion"], ["kind"], ["metadata"], ["metadata", "name"], ["metadata", "namespace"],
    ["metadata", "labels"], ["metadata", "labels", "app"], ["metadata", "annotations"],
    ["metadata", "resourceVersion"], ["metadata", "uid"], ["metadata", "generateName"],
    ["metadata", "finalizers"], ["metadata", "ownerReferences"], ["metadata", "managedFields"],
    ["metadata", "creationTimestamp"], ["metadata", "deletionGracePeriodSeconds"],
    ["spec"], ["spec", "containers"], ["spec", "replicas"], ["spec", "selector"],
    ["spec", "ports"], ["spec", "template"], ["data"], ["status"], ["x-unknown"],
])


@st.composite
def mutated_objects(draw: st.DrawFn, base: JSON) -> JSON:
    """``base`` (a valid object) with one to three fields given a random (often wrong) value."""
    obj = base
    for _ in range(draw(st.integers(1, 3))):
        obj = _set_path(obj, draw(_FIELD_PATHS), draw(JSON_VALUES))
    return obj


def deep_nesting(depth: int, kind: str) -> bytes:
    if kind == "list":
        return b"[" * depth + b"]" * depth
    if kind == "dict":
        return b'{"a":' * depth + b"1" + b"}" * depth
    # an object whose metadata.labels nests deep: the body decodes only if the parser copes
    return (b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"data":'
            + b'{"a":' * depth + b"1" + b"}" * depth + b"}")


DEEP_BODIES = st.builds(deep_nesting, st.sampled_from([100, 1000, 5000, 20000, 100000]),
                        st.sampled_from(["list", "dict", "object"]))


@st.composite
def json_text_with_numbers(draw: st.DrawFn, base: JSON) -> bytes:
    """``base`` as JSON text with a number literal no Go or Python type holds at some field."""
    path = draw(_FIELD_PATHS)
    marker = "__NUMBER__"
    text = json.dumps(_set_path(base, path, marker))
    return text.replace(f'"{marker}"', draw(NUMBER_TEXTS)).encode()


def request_bodies(base: JSON) -> st.SearchStrategy[bytes]:
    """Request bodies for a POST/PUT of an object shaped like ``base``."""
    return st.one_of(
        JSON_VALUES.map(lambda v: json.dumps(v).encode()),
        mutated_objects(base).map(lambda v: json.dumps(v).encode()),
        st.binary(max_size=300),
        st.text(max_size=200).map(lambda t: t.encode("utf-8", "surrogatepass")),
        DEEP_BODIES,
        json_text_with_numbers(base),
        st.sampled_from([b"", b"null", b"{", b"[]", b"{}", b'"x"', b"1", b"\xff\xfe{}",
                         b"\xef\xbb\xbf{}", b'{"a":1,"a":2}', b"{}garbage", b"{} {}",
                         b"---\n", b"a: [", b"kind: Pod\napiVersion: v1\n",
                         b"k8s\x00", b"k8s\x00\x0a\x00", b"\x1f\x8b\x08\x00"]),
    )


# --- patches ------------------------------------------------------------------------------------

_POINTERS = st.one_of(
    st.sampled_from(["", "/", "/metadata", "/metadata/labels", "/metadata/labels/a",
                     "/metadata/labels/a~1b", "/metadata/name", "/metadata/resourceVersion",
                     "/metadata/uid", "/spec", "/spec/containers", "/spec/containers/0",
                     "/spec/containers/-", "/spec/containers/99", "/spec/containers/-1",
                     "/spec/containers/01", "/spec/replicas", "/data", "/data/key", "/kind",
                     "/apiVersion", "/metadata/annotations/~2", "/x/y/z", "~", "a/b",
                     "/spec/containers/0/image", "/metadata/finalizers/0",
                     "/spec/containers/99999999999999999999"]),
    st.text(max_size=20),
)
_OP_NAMES = st.one_of(st.sampled_from(["add", "remove", "replace", "move", "copy", "test"]),
                      st.text(max_size=8))


@st.composite
def json_patch_ops(draw: st.DrawFn) -> JSON:
    op: dict[str, JSON] = {}
    if draw(st.integers(0, 9)):
        op["op"] = draw(st.one_of(_OP_NAMES, JSON_VALUES))
    if draw(st.integers(0, 9)):
        op["path"] = draw(st.one_of(_POINTERS, JSON_VALUES))
    if draw(st.booleans()):
        op["value"] = draw(JSON_VALUES)
    if draw(st.booleans()):
        op["from"] = draw(st.one_of(_POINTERS, JSON_VALUES))
    return op


JSON_PATCHES = st.one_of(
    st.lists(json_patch_ops(), max_size=5).map(lambda v: json.dumps(v).encode()),
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=100),
    DEEP_BODIES,
)
_DIRECTIVES: st.SearchStrategy[dict[str, JSON]] = st.sampled_from([
    {"$patch": "delete"}, {"$patch": "replace"}, {"$patch": "merge"}, {"$patch": "bogus"},
    {"$patch": 1}, {"$retainKeys": ["a"]}, {"$retainKeys": "a"}, {"$retainKeys": [1]},
    {"$setElementOrder/containers": [{"name": "c"}]}, {"$setElementOrder/containers": 5},
    {"$deleteFromPrimitiveList/finalizers": ["a"]}, {"$deleteFromPrimitiveList/finalizers": 1},
    {"containers": [{"$patch": "delete"}]}, {"containers": [{"name": "c", "$patch": "delete"}]},
    {"containers": [{"$patch": "replace"}]}, {"containers": {"$patch": "delete"}},
])


@st.composite
def strategic_patches(draw: st.DrawFn) -> bytes:
    """A merge-shaped document with strategic-merge directives at random places."""
    base = draw(st.dictionaries(_KEYS, JSON_VALUES, max_size=3))
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from([[], ["spec"], ["metadata"], ["spec", "template", "spec"],
                                     ["metadata", "labels"], ["spec", "containers"]]))
        directive = draw(_DIRECTIVES)
        for key, value in directive.items():
            base = _set_path(base, [*path, key], value)
    return json.dumps(base).encode()


MERGE_PATCHES = st.one_of(
    JSON_VALUES.map(lambda v: json.dumps(v).encode()),
    st.binary(max_size=100),
    DEEP_BODIES,
    st.sampled_from([b"null", b"[]", b'"x"', b"{", b'{"metadata":null}',
                     b'{"metadata":{"name":null}}',
                     b'{"metadata":{"resourceVersion":"1"}}', b'{"apiVersion":null}',
                     b'{"kind":"Other"}', b'{"metadata":{"uid":"x"}}']),
)
STRATEGIC_PATCHES = st.one_of(strategic_patches(), MERGE_PATCHES)


@st.composite
def apply_documents(draw: st.DrawFn, base: JSON) -> bytes:
    """Server-side apply bodies: mutated objects as JSON or YAML-ish text, or garbage."""
    choice = draw(st.integers(0, 4))
    if choice == 0:
        return json.dumps(draw(mutated_objects(base))).encode()
    if choice == 1:
        return json.dumps(draw(JSON_VALUES)).encode()
    if choice == 2:
        return draw(st.binary(max_size=200))
    if choice == 3:
        return draw(st.sampled_from([
            b"a: [", b"- 1\n- 2\n", b"!!binary x", b"&a [*a]", b"a: &a [*a, *a]",
            b"kind: Pod\n\tapiVersion: v1", b"---\n---\n", b"? [1]\n: 2\n",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: 1e400\n",
            b"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: existing}\ndata: {a: [1]}\n",
            b"x: " + b"[" * 2000 + b"]" * 2000, b"\x00\x01\x02",
            # the billion-laughs shape: anchors that expand exponentially
            b"a: &a [x,x,x,x,x,x,x,x,x]\nb: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]\n"
            b"c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]\nd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]\n"
            b"e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]\nf: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]\n",
        ]))
    return draw(DEEP_BODIES)


# --- selectors ----------------------------------------------------------------------------------

_SELECTOR_ALPHABET = "abcz019=!,()-_./ \t" + "\u00e9\u2028"
SELECTOR_TEXT = st.one_of(
    st.text(alphabet=_SELECTOR_ALPHABET, max_size=40),
    st.text(max_size=30),
    st.sampled_from([
        "a", "!a", "a=b", "a==b", "a!=b", "a in (b,c)", "a notin (b)", "a in ()", "a in (",
        "a,", ",", "=", "==", "!=", "a=b=c", "a in (b", "a notin", "x" * 64 + "=y",
        "a=" + "b" * 64, "example.com/a=b", "/a=b", "a/=b", "-a=b", "a=-b", "a b", "a>1",
        "a<1", "a gt 1", "metadata.name=x", "metadata.namespace!=y", "spec.nodeName=",
        "status.phase=Running", "spec.foo=bar", "metadata.name", "metadata.name==a,b",
        "a=\\,", "a\\=b", "a in (" + ",".join(["v"] * 500) + ")",
    ]),
)


# --- query parameters ---------------------------------------------------------------------------

_NUMBERISH = st.one_of(
    st.integers(min_value=-(2**70), max_value=2**70).map(str),
    NUMBER_TEXTS, st.sampled_from(["", " 1", "1 ", "0x10", "1.5", "+1", "--1", "NaN", "∞"]),
    st.text(max_size=10),
)


def _continue_tokens() -> st.SearchStrategy[str]:
    def encode(value: JSON) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).decode()

    shaped = st.fixed_dictionaries({}, optional={
        "v": st.one_of(st.just("meta.k8s.io/v1"), JSON_VALUES),
        "rv": st.one_of(st.integers(-5, 2**70), JSON_VALUES),
        "start": st.one_of(st.text(max_size=20), JSON_VALUES),
    })
    return st.one_of(
        shaped.map(encode), JSON_VALUES.map(encode), st.text(max_size=40),
        st.binary(max_size=40).map(lambda b: base64.b64encode(b).decode()),
        st.binary(max_size=40).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("=")),
    )


CONTINUE_TOKENS = _continue_tokens()
QUERY_VALUES: dict[str, st.SearchStrategy[str]] = {
    "resourceVersion": _NUMBERISH,
    "resourceVersionMatch": st.one_of(st.sampled_from(["NotOlderThan", "Exact", "", "exact"]),
                                      st.text(max_size=10)),
    "limit": _NUMBERISH,
    "continue": CONTINUE_TOKENS,
    "timeoutSeconds": _NUMBERISH,
    "watch": st.one_of(st.sampled_from(["true", "false", "1", "0", "", "yes", "TRUE"]),
                       st.text(max_size=5)),
    "allowWatchBookmarks": st.sampled_from(["true", "false", "", "maybe"]),
    "sendInitialEvents": st.sampled_from(["true", "false", "", "2"]),
    "labelSelector": SELECTOR_TEXT,
    "fieldSelector": SELECTOR_TEXT,
    "fieldValidation": st.one_of(st.sampled_from(["Strict", "Warn", "Ignore", "", "strict"]),
                                 st.text(max_size=10)),
    "fieldManager": st.one_of(st.sampled_from(["", "kubectl", "x" * 200, "a\u0000b"]),
                              st.text(max_size=20)),
    "dryRun": st.one_of(st.sampled_from(["All", "all", "", "None"]), st.text(max_size=6)),
    "force": st.sampled_from(["true", "false", "", "x"]),
    "pretty": st.sampled_from(["true", "false", "", "x"]),
    "propagationPolicy": st.sampled_from(["Orphan", "Background", "Foreground", "", "x"]),
    "gracePeriodSeconds": _NUMBERISH,
    "orphanDependents": st.sampled_from(["true", "false", "", "x"]),
    "includeObject": st.sampled_from(["None", "Object", "Metadata", "", "x"]),
    "as": st.text(max_size=10),
}
@st.composite
def query_strings(draw: st.DrawFn) -> list[tuple[str, str]]:
    """Query parameters (names repeat sometimes, as Go's url.Values allows)."""
    pairs: list[tuple[str, str]] = []
    for _ in range(draw(st.integers(0, 6))):
        name = draw(st.one_of(st.sampled_from(sorted(QUERY_VALUES)), st.text(max_size=8)))
        values = QUERY_VALUES.get(name, st.text(max_size=10))
        pairs.append((name, draw(values)))
    return pairs


# --- headers ------------------------------------------------------------------------------------

MEDIA_TYPES = st.one_of(
    st.sampled_from([
        "application/json", "application/yaml", "application/vnd.kubernetes.protobuf",
        "application/json-patch+json", "application/merge-patch+json",
        "application/strategic-merge-patch+json", "application/apply-patch+yaml",
        "application/apply-patch+cbor", "application/cbor", "text/plain", "*/*", "application/*",
        "", ";", "application/json;charset=utf-8", "application/json; charset=latin1",
        "application/json;as=Table;v=v1;g=meta.k8s.io", "application/json;as=Table",
        "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
        "application/json;stream=watch", "application/json;q=0", "*/*;q=0", "application/json,",
        "application/json;;", "application/json; a=\"unterminated", "a/b/c", "/", "json",
        "application/json, application/yaml;q=0.5",
        "application/vnd.kubernetes.protobuf;stream=watch",
    ]),
    st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=40),
)


# --- checks shared by the hostile-input tests ---------------------------------------------------

REASON_CODES = {
    "BadRequest": 400, "Unauthorized": 401, "Forbidden": 403, "NotFound": 404,
    "MethodNotAllowed": 405, "NotAcceptable": 406, "AlreadyExists": 409, "Conflict": 409,
    "Gone": 410, "Expired": 410, "RequestEntityTooLarge": 413, "UnsupportedMediaType": 415,
    "Invalid": 422, "TooManyRequests": 429,
}


def check_status_body(status: int, content_type: str, body: bytes) -> None:
    """A rejection is a well-formed Status: kind/apiVersion/status, a 4xx code = its reason's.

    Status objects come in the negotiated media type: JSON is checked whole, YAML parsed, and
    protobuf checked for kube's envelope (a Status in ``k8s\\0`` framing).
    """
    assert 400 <= status < 500, (status, body[:500])
    media = content_type.split(";", 1)[0].strip()
    if media == "application/vnd.kubernetes.protobuf":
        assert body.startswith(b"k8s\x00") and b"Status" in body, body[:200]
        return
    if media == "application/yaml":
        import yaml

        obj = yaml.safe_load(body)
    else:
        assert media == "application/json", (status, content_type, body[:300])
        obj = json.loads(body)
    assert isinstance(obj, dict), body[:300]
    assert obj.get("kind") == "Status" and obj.get("apiVersion") == "v1", obj
    assert obj.get("status") == "Failure", obj
    assert obj.get("code") == status, obj
    reason = obj.get("reason")
    assert reason in REASON_CODES, obj
    assert REASON_CODES[reason] == status, obj
    assert isinstance(obj.get("message", ""), str), obj
