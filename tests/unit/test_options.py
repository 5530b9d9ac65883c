"""kubewire.server.request.options: list/watch and get options with kube's exact errors."""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubewire.resources import REGISTRY, Resource
from kubewire.server.request.continue_tokens import encode_continue
from kubewire.server.request.options import ListOptions, parse_get_options, parse_list_options
from kubewire.status import BadRequest, Invalid, StatusError


def lookup(group: str, plural: str) -> Resource:
    found = REGISTRY.lookup(group, "v1", plural)
    assert found is not None
    return found


PODS = lookup("", "pods")
DEPLOYMENTS = lookup("apps", "deployments")
LIST_INVALID = 'ListOptions.meta.k8s.io "" is invalid: '


def q(**params: str | list[str]) -> dict[str, list[str]]:
    return {k: v if isinstance(v, list) else [v] for k, v in params.items()}


def list_error(query: Mapping[str, Sequence[str]], resource: Resource = PODS,
               **kwargs: Any) -> StatusError:
    with pytest.raises(StatusError) as info:
        parse_list_options(query, resource, **kwargs)
    return info.value


def token(doc: Any) -> str:
    raw = json.dumps(doc, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode()


# --- decoding ---------------------------------------------------------------------------------

def test_defaults_for_an_empty_query() -> None:
    assert parse_list_options({}, PODS) == ListOptions()


def test_decodes_every_parameter_and_takes_the_first_value() -> None:
    opts = parse_list_options(q(watch="true", resourceVersion=["12", "13"],
                                allowWatchBookmarks="1", timeoutSeconds="300",
                                labelSelector="app=web", fieldSelector="spec.host=n1",
                                limit="500", pretty="", unknownParam="x"), PODS)
    assert opts.watch and opts.allow_watch_bookmarks  # pretty only formats output in kube
    assert opts.resource_version == "12" and opts.resource_version_int == 12
    assert opts.timeout_seconds == 300 and opts.limit == 500
    assert str(opts.label_selector) == "app=web"
    assert str(opts.field_selector) == "spec.nodeName=n1"
    assert opts.send_initial_events is None and opts.resource_version_match == ""


@pytest.mark.parametrize(("query", "message"), [
    (q(timeoutSeconds="abc"), 'strconv.ParseInt: parsing "abc": invalid syntax'),
    (q(timeoutSeconds="1.5"), 'strconv.ParseInt: parsing "1.5": invalid syntax'),
    (q(limit=""), 'strconv.ParseInt: parsing "": invalid syntax'),
    (q(limit="9223372036854775808"),
     'strconv.ParseInt: parsing "9223372036854775808": value out of range'),
    (q(timeoutSeconds="x", limit="y"), 'strconv.ParseInt: parsing "x": invalid syntax'),
    (q(limit="y", labelSelector="a b"), 'strconv.ParseInt: parsing "y": invalid syntax'),
    (q(labelSelector="a in b", fieldSelector="x"),
     "unable to parse requirement: found 'b' expected: '('"),
    (q(fieldSelector="a=b=c"), "invalid field selector: unescaped character in value: 61"),
    (q(fieldSelector="spec.foo=x"), "field label not supported: spec.foo"),
    (q(resourceVersion="abc"),
     'resourceVersion: Invalid value: "abc": strconv.ParseUint: parsing "abc": invalid syntax'),
    (q(resourceVersion="-1", watch="1"),
     'resourceVersion: Invalid value: "-1": strconv.ParseUint: parsing "-1": invalid syntax'),
    (q(resourceVersion="18446744073709551616"),
     'resourceVersion: Invalid value: "18446744073709551616": strconv.ParseUint: parsing '
     '"18446744073709551616": value out of range'),
    (q(resourceVersion="5", **{"continue": encode_continue(3, "a\x00")}),
     "specifying resource version is not allowed when using continue"),
])
def test_bad_requests(query: dict[str, list[str]], message: str) -> None:
    err = list_error(query)
    assert isinstance(err, BadRequest) and err.code == 400
    assert err.message == message


def test_default_style_field_label_message() -> None:
    err = list_error(q(fieldSelector="spec.replicas=1"), DEPLOYMENTS)
    assert err.message == ('"spec.replicas" is not a known field selector: only '
                           '"metadata.name", "metadata.namespace"')


def test_continue_with_rv_zero_is_allowed_and_watch_ignores_continue() -> None:
    tok = encode_continue(3, "a\x00")
    assert parse_list_options(q(resourceVersion="0", **{"continue": tok}), PODS).continue_token
    opts = parse_list_options(q(watch="1", resourceVersion="5", **{"continue": "junk"}), PODS)
    assert opts.watch and opts.continue_token == "junk"


def test_list_validates_the_continue_token_first() -> None:
    err = list_error(q(resourceVersion="5", **{"continue": "!"}))
    assert err.message == ("invalid continue token: continue key is not valid: illegal base64 "
                           "data at input byte 0")


# --- v1.32 defaulting (§2.2) ------------------------------------------------------------------

@pytest.mark.parametrize("rv", ["", "0"])
def test_legacy_watch_is_defaulted_to_watch_list(rv: str) -> None:
    opts = parse_list_options(q(watch="true", resourceVersion=rv), PODS)
    assert opts.send_initial_events is True
    assert opts.resource_version_match == "NotOlderThan"


@pytest.mark.parametrize("query", [
    q(watch="true", resourceVersion="7"),
    q(watch="false"),
    q(),
])
def test_no_defaulting(query: dict[str, list[str]]) -> None:
    opts = parse_list_options(query, PODS)
    assert opts.send_initial_events is None and opts.resource_version_match == ""


def test_explicit_send_initial_events_false_is_kept() -> None:
    opts = parse_list_options(q(watch="1", sendInitialEvents="false",
                                resourceVersionMatch="NotOlderThan"), PODS)
    assert opts.send_initial_events is False


def test_legacy_watch_path_forces_watch_without_defaulting() -> None:
    opts = parse_list_options({}, PODS, force_watch=True)
    assert opts.watch and opts.send_initial_events is None
    err = list_error(q(sendInitialEvents="true", resourceVersionMatch="NotOlderThan"),
                     force_watch=True)
    # kube validates a /watch/ path request as a list unless ?watch is also set
    assert err.message == LIST_INVALID + (
        "[resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless "
        "resourceVersion is provided, sendInitialEvents: Forbidden: sendInitialEvents is "
        "forbidden for list]")


# --- validation (§1.3) ------------------------------------------------------------------------

@pytest.mark.parametrize(("query", "body"), [
    (q(watch="1", resourceVersion="5", sendInitialEvents="true"),
     "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch "
     "to NotOlderThan"),
    (q(watch="1", resourceVersion="5", resourceVersionMatch="NotOlderThan"),
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch unless "
     "sendInitialEvents is provided"),
    (q(watch="1", sendInitialEvents="true", resourceVersionMatch="Exact"),
     '[resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch '
     'to NotOlderThan, resourceVersionMatch: Unsupported value: "Exact": supported values: '
     '"NotOlderThan"]'),
    (q(watch="1", sendInitialEvents="true", resourceVersionMatch="NotOlderThan",
       **{"continue": "x"}),
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is "
     "provided"),
    (q(resourceVersionMatch="NotOlderThan"),
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion "
     "is provided"),
    (q(resourceVersion="5", resourceVersionMatch="Exact", **{"continue": "x"}),
     "resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden when continue is "
     "provided"),
    (q(resourceVersion="5", resourceVersionMatch="Foo"),
     'resourceVersionMatch: Unsupported value: "Foo": supported values: "Exact", '
     '"NotOlderThan", ""'),
    (q(resourceVersion="0", resourceVersionMatch="Exact"),
     'resourceVersionMatch: Forbidden: resourceVersionMatch "exact" is forbidden for '
     'resourceVersion "0"'),
    (q(sendInitialEvents="false"),
     "sendInitialEvents: Forbidden: sendInitialEvents is forbidden for list"),
])
def test_invalid_list_options(query: dict[str, list[str]], body: str) -> None:
    err = list_error(query)
    assert isinstance(err, Invalid) and err.code == 422
    assert err.message == LIST_INVALID + body


def test_invalid_status_shape() -> None:
    err = list_error(q(watch="1", resourceVersion="5", sendInitialEvents="true"))
    assert err.to_status() == {
        "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": LIST_INVALID + "resourceVersionMatch: Forbidden: sendInitialEvents requires "
                                  "setting resourceVersionMatch to NotOlderThan",
        "reason": "Invalid",
        "details": {"group": "meta.k8s.io", "kind": "ListOptions", "causes": [
            {"reason": "FieldValueForbidden", "field": "resourceVersionMatch",
             "message": "Forbidden: sendInitialEvents requires setting resourceVersionMatch to "
                        "NotOlderThan"}]},
        "code": 422}


def test_watch_accepts_initial_events_without_bookmarks() -> None:
    opts = parse_list_options(q(watch="1", sendInitialEvents="true",
                                resourceVersionMatch="NotOlderThan"), PODS)
    assert opts.send_initial_events is True and not opts.allow_watch_bookmarks


# --- single-object watch (§1.4) ---------------------------------------------------------------

def test_path_name_becomes_a_field_selector() -> None:
    opts = parse_list_options({}, PODS, force_watch=True, path_name="web")
    assert opts.field_selector.exact("metadata.name") == "web"
    same = parse_list_options(q(fieldSelector="metadata.name=web"), PODS, force_watch=True,
                              path_name="web")
    assert str(same.field_selector) == "metadata.name=web"


@pytest.mark.parametrize("selector", ["metadata.name=other", "status.phase=Running",
                                      "metadata.name!=web"])
def test_path_name_mismatch(selector: str) -> None:
    err = list_error(q(fieldSelector=selector), force_watch=True, path_name="web")
    assert err.code == 400
    assert err.message == "fieldSelector metadata.name doesn't match requested name"


# --- get --------------------------------------------------------------------------------------

def test_parse_get_options() -> None:
    assert parse_get_options({}) == ""
    assert parse_get_options(q(resourceVersion="42", other="x")) == "42"
    assert parse_get_options(q(export="false")) == ""
    with pytest.raises(BadRequest) as info:
        parse_get_options(q(resourceVersion="abc"))
    assert info.value.message == ('resourceVersion: Invalid value: "abc": strconv.ParseUint: '
                                  'parsing "abc": invalid syntax')
    with pytest.raises(BadRequest) as info:
        parse_get_options(q(export="true"))
    assert info.value.message == ("the export parameter, deprecated since v1.14, is no longer "
                                  "supported")


# --- properties -------------------------------------------------------------------------------

@given(st.dictionaries(st.sampled_from(["watch", "resourceVersion", "resourceVersionMatch",
                                        "sendInitialEvents", "allowWatchBookmarks",
                                        "timeoutSeconds", "limit", "continue", "labelSelector",
                                        "fieldSelector", "pretty"]),
                       st.lists(st.text(max_size=12), min_size=1, max_size=2)))
def test_list_parser_only_raises_status_errors(query: dict[str, list[str]]) -> None:
    try:
        opts = parse_list_options(query, PODS)
    except StatusError as exc:
        assert exc.code in (400, 422)
        return
    if opts.watch and opts.resource_version in ("", "0") and "sendInitialEvents" not in query:
        assert opts.send_initial_events is True
