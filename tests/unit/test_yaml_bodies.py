"""kubewire.server.wire.yaml_bodies: YAML bodies read as sigs.k8s.io/yaml (go-yaml v2) reads them.

Expected texts and accept/refuse outcomes are go-yaml's (decode.go, readerc.go of the
goyaml.v2 fork kube v1.32 vendors).
"""

from __future__ import annotations

import json
import random
import string
from typing import Any

import pytest

from kubewire.server.wire import yaml_bodies
from kubewire.server.wire.yaml_bodies import (
    EXCESSIVE_ALIASING,
    YAMLBodyError,
    allowed_alias_ratio,
    load_yaml_body,
    reader_problem,
)


def laughs(levels: int, fanout: int) -> bytes:
    """``levels`` anchors, each a list of ``fanout`` aliases of the one before."""
    text = 'a0: &a0 "lol"\n'
    for level in range(1, levels + 1):
        text += f"a{level}: &a{level} [" + ", ".join([f"*a{level - 1}"] * fanout) + "]\n"
    return text.encode()


def refusal(body: bytes) -> str:
    with pytest.raises(YAMLBodyError) as info:
        load_yaml_body(body)
    return str(info.value)


# --- aliases ------------------------------------------------------------------------------------

def test_alias_expansion_is_bounded_as_go_yaml_bounds_it() -> None:
    # go-yaml accepts 3 levels of 10 (1,111 strings) and refuses 4 (11,111).
    assert len(load_yaml_body(laughs(3, 10)).value["a3"]) == 10
    assert refusal(laughs(4, 10)) == EXCESSIVE_ALIASING


@pytest.mark.parametrize("levels", [8, 9, 30])
def test_a_billion_laughs_is_refused_before_anything_is_built(levels: int) -> None:
    # 9**30 strings: only a walk that stops at the first excess can answer this at all
    assert refusal(laughs(levels, 9)) == EXCESSIVE_ALIASING


def test_many_plain_nodes_buy_room_for_aliases() -> None:
    # A list of 1,000 maps (3,001 decodes) aliased 3 times: aliases are ~3/4 of the work.
    body = ("a: &a [" + ", ".join(["{k: v}"] * 1000) + "]\nb: [*a, *a, *a]\n").encode()
    assert len(load_yaml_body(body).value["b"]) == 3
    # 330 times is over 99 %.
    body = ("a: &a [" + ", ".join(["{k: v}"] * 1000) + "]\nb: [" + ", ".join(["*a"] * 330)
            + "]\n").encode()
    assert refusal(body) == EXCESSIVE_ALIASING


def test_merges_count_like_other_aliases() -> None:
    base = "base: &b {" + ", ".join(f"k{i}: v" for i in range(60)) + "}\n"
    merged = base + "items:\n" + "".join(f"  - {{<<: *b, n: {i}}}\n" for i in range(20))
    value = load_yaml_body(merged.encode()).value
    assert value["items"][3] == {**value["base"], "n": 3}
    # merges of merges multiply like nested aliases
    refused = "l0: &l0 {k: v}\n" + "".join(
        f"l{i}: &l{i} {{<<: [" + ", ".join([f"*l{i - 1}"] * 10) + "]}\n" for i in range(1, 5))
    assert refusal(refused.encode()) == EXCESSIVE_ALIASING


def test_allowed_alias_ratio_scales_down_for_large_documents() -> None:
    assert allowed_alias_ratio(1) == allowed_alias_ratio(400_000) == 0.99
    assert allowed_alias_ratio(2_200_000) == pytest.approx(0.545)
    assert allowed_alias_ratio(4_000_000) == allowed_alias_ratio(10**9) == 0.10


@pytest.mark.parametrize(("body", "message"), [
    (b"a: &x {b: *x}\n", "yaml: anchor 'x' value contains itself"),
    (b"a: &x [1, [2, *x]]\n", "yaml: anchor 'x' value contains itself"),
    (b"a: 1\nb: *nope\n", "yaml: unknown anchor 'nope' referenced"),
    (b"a: &x {b: 1}\nc: {<<: [*x, 3]}\n",
     "yaml: map merge requires map or sequence of maps as the value"),
    (b"a: &x [1]\nc: {<<: *x}\n", "yaml: map merge requires map or sequence of maps as the value"),
])
def test_alias_errors_have_go_yamls_text(body: bytes, message: str) -> None:
    assert refusal(body) == message


def test_an_anchor_defined_again_replaces_the_first() -> None:
    assert load_yaml_body(b"a: &x 1\nb: &x 2\nc: *x\n").value == {"a": 1, "b": 2, "c": 2}


def test_aliased_subtrees_are_separate_copies() -> None:
    value = load_yaml_body(b"l: &l {k: [1]}\nm: [*l, *l]\n").value
    assert value == {"l": {"k": [1]}, "m": [{"k": [1]}, {"k": [1]}]}
    first, second = value["m"]
    assert first is not second and first["k"] is not second["k"]
    assert first is not value["l"]


def test_values_are_what_sigs_k8s_io_yaml_gives() -> None:
    body = b"t: 2001-12-14t21:59:43.10-05:00\nd: 2024-01-01\nn: ~\nb: yes\n"
    assert load_yaml_body(body).value == {
        "t": "2001-12-14t21:59:43.10-05:00", "d": "2024-01-01", "n": None, "b": True}
    assert load_yaml_body(b"").value is None


def test_repeated_keys_are_noted_for_strict_mode() -> None:
    assert load_yaml_body(b"a: 1\nb: 2\na: 3\n").repeated_keys == (
        'line 3: key "a" already set in map',)


# --- the reader ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("body", "problem"), [
    (b"a: \xff\n", "yaml: invalid leading UTF-8 octet"),
    (b"a: \x80\n", "yaml: invalid leading UTF-8 octet"),
    (b"a: \xf8\x88\x80\x80\x80\n", "yaml: invalid leading UTF-8 octet"),
    (b"a: \xe2\x82", "yaml: incomplete UTF-8 octet sequence"),
    (b"a: \xe2A\x80\n", "yaml: invalid trailing UTF-8 octet"),
    (b"a: \xc0\xaf\n", "yaml: invalid length of a UTF-8 sequence"),
    (b"a: \xe0\x80\xaf\n", "yaml: invalid length of a UTF-8 sequence"),
    (b"a: \xed\xa0\x80\n", "yaml: invalid Unicode character"),
    (b"a: \xf4\x90\x80\x80\n", "yaml: invalid Unicode character"),
    (b"a: \x00\n", "yaml: control characters are not allowed"),
    (b"a: \xc2\x80\n", "yaml: control characters are not allowed"),  # U+0080, a C1 control
    (b"a: \x1b b \xff\n", "yaml: control characters are not allowed"),  # the first one wins
    (b"a: \xff \x1b\n", "yaml: invalid leading UTF-8 octet"),
    (b"\xef\xbb\xbfa: \xff\n", "yaml: invalid leading UTF-8 octet"),
])
def test_bodies_that_are_not_utf8_get_go_yamls_reader_text(body: bytes, problem: str) -> None:
    assert reader_problem(body) == problem
    assert refusal(body) == problem


@pytest.mark.parametrize("body", [b"a: b\n", "a: \u00e9\u00a0\U0001f600\n".encode(),
                                  b"\xef\xbb\xbfa: 1\n", "a: 1\n".encode("utf-16")])
def test_the_reader_takes_utf8_and_leaves_utf16_to_pyyaml(body: bytes) -> None:
    assert reader_problem(body) is None
    assert isinstance(load_yaml_body(body).value, dict)


# --- JSON bodies ----------------------------------------------------------------------------------

def _random_text(rng: random.Random) -> str:
    alphabet = string.ascii_letters + string.digits + " -_./:#&*!|>'%@`{}[],?~=+"
    return "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12)))


def _random_value(rng: random.Random, depth: int) -> Any:
    pick = rng.random()
    if depth == 0 or pick < 0.35:
        return rng.choice([
            None, True, False, 0, -1, 7, 2**63 - 1, -(2**63), 2**63, -(2**63) - 1, 10**30,
            1.5, -0.0, 1e3, 1.0, "", "1e3", "yes", "~", "null", "2001-12-14", "*x", "&y",
            "<<", "- a", "a: b", ": c", "#d", "e #f", "'g'", "\x7f", "\u00e9", "\\", "\t",
            _random_text(rng)])
    if pick < 0.7:
        return {rng.choice(["a", "b", "c", "<<", "", " ", _random_text(rng)]):
                _random_value(rng, depth - 1) for _ in range(rng.randint(0, 4))}
    return [_random_value(rng, depth - 1) for _ in range(rng.randint(0, 4))]


def _random_json(rng: random.Random, value: dict[str, Any]) -> bytes:
    """``value`` as JSON in one of several layouts, sometimes with a key written twice or a
    colon on the next line."""
    layout = rng.choice(["compact", "spaced", "indented", "colon-spaced"])
    if layout == "compact":
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=rng.random() < 0.5)
    elif layout == "spaced":
        text = json.dumps(value, ensure_ascii=rng.random() < 0.5)
    elif layout == "indented":
        text = json.dumps(value, indent=rng.choice([1, 2, 4]), ensure_ascii=False)
    else:
        text = json.dumps(value, separators=(", ", " : "))
    if value and rng.random() < 0.15:
        key = json.dumps(next(iter(value)))
        text = text[0] + f"{key}: 1, " + text[1:]  # the first key twice
    if value and rng.random() < 0.1:
        text = text.replace('":', '"\n:', 1)
    return text.encode()


def test_json_bodies_decode_as_composing_them_would() -> None:
    # The JSON fast path must give exactly what composing gives, or stand aside: on random
    # JSON texts, whenever it answers, its answer is the composed one.
    rng = random.Random(1024)
    answered = 0
    for _ in range(3000):
        value = {"apiVersion": "v1", "kind": "ConfigMap",
                 **{str(k): _random_value(rng, 4) for k in range(rng.randint(0, 4))}}
        body = _random_json(rng, value)
        plain = yaml_bodies._plain_json(body)
        try:
            composed: yaml_bodies.YAMLBody | str = yaml_bodies._composed(body)
        except YAMLBodyError as exc:
            composed = str(exc)
        if plain is not None:
            answered += 1
            assert composed == yaml_bodies.YAMLBody(plain), body
            assert load_yaml_body(body) == composed
    assert answered > 600  # and the others were composed: both sides were exercised


@pytest.mark.parametrize("body", [
    b'{"a": 1.5}', b'{"a": 1e3}', b'{"a": 9223372036854775808}', b'{"a": "\\u00e9"}',
    b'{"a":\t1}', b'{"a": 1}\r\n', b'{"a": 1, "a": 2}', b'{"a"\n: 1}', b'{"a": "\x7f"}',
    '{"a": "\u00e9"}'.encode(), b'{"' + b"k" * 1001 + b'": 1}', b'[{"a": 1}]', b'{"a": 1',
    b'{"a": 1}\n---\n{"b": 2}\n'])
def test_json_bodies_that_could_read_otherwise_are_composed(body: bytes) -> None:
    assert yaml_bodies._plain_json(body) is None


def test_an_apply_body_as_kubectl_sends_it_takes_the_json_path() -> None:
    body = (b'{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web",'
            b'"namespace":"default","labels":{"app":"web"}},"spec":{"replicas":3,"selector":'
            b'{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},'
            b'"spec":{"containers":[{"name":"web","image":"nginx:1.27","ports":'
            b'[{"containerPort":80}],"resources":{"limits":{"cpu":"500m"}}}]}}}}')
    assert yaml_bodies._plain_json(body) is not None
    assert load_yaml_body(body) == yaml_bodies._composed(body)
