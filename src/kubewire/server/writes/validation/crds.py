"""The CustomResourceDefinition kind's own validation: apiextensions-apiserver's
``ValidateCustomResourceDefinition`` and ``ValidateCustomResourceDefinitionUpdate``
(``server.apiextensions.crd.crd_validation``), with each schema checked by the structural-schema
rules and compiled for its CEL rules (``schema_rules``, ``cel_rules``).

A schema's check is a pure function of the schema and its path, and the costliest part of a
CRD write (every CEL rule compiled and costed: ~20 ms for Gateway's). Its answers are kept for
the last ``SCHEMA_CHECKS_KEPT`` schemas, keyed by the SHA-256 of their JSON, so a CRD's
``/status`` writes and the pre-installed Gateway API CRDs of each server started in one process
check a schema once. A create's whole answer (``validate_crd`` with its size bounds: the
internal form's comparisons of every version, ~5 ms for Gateway's HTTPRoute) is kept the same
way for the last ``CREATE_CHECKS_KEPT`` CRDs, keyed by the SHA-256 of what it reads (the name,
generateName, annotations, spec and status), so each further server of a process validates the
pre-installed CRDs at the cost of hashing them. The first server of a process pays the same:
the keys of the package-data CRDs' creates (the pre-installed Gateway API bundle) are proven
valid once, at build time, by ``tools/gen_known_valid_crds.py`` (it runs the full validation
and lists the key of each that has no errors, in ``known_valid_crds``), so a create whose key
is listed is answered "valid" without compiling its ~120 CEL rules (~80 ms, most of a first
server's start). Only the same bytes hit: any other CRD, or one of these changed in anything
validation reads, is validated in full. A user's CRD is never listed, so its rules are
compiled and costed at its create, as kube does.

One bound here is kubewire's, not kube's: how much CEL one CRD may ask the server to compile.
kube compiles any number of rules (each is bounded only by cel-go's 100,000 code points and the
cost estimate) on a goroutine of its own; kubewire compiles on its one event loop, at about
0.15 ms per rule plus ~4 us per character, so a 3 MiB CRD of small rules held every other
client for over 10 s. ``MAX_RULES`` and ``MAX_RULE_TEXT`` keep a CRD's compile under ~0.5 s
while leaving room many times over for the largest real CRDs (Gateway API v1.6 experimental
HTTPRoute: 212 rules, 19,070 characters; Istio 1.30 DestinationRule: 117 rules, 3,810).

The other such bound is on the schemas' size, ``MAX_SCHEMA_NODES`` JSON objects in the spec
(all versions together). kube has none: it validates a schema on the request's goroutine, and
the body limit (3 MiB) bounds the work. kubewire validates on its event loop at ~40 us per
node, and 3 MiB of ``"a":{}`` is ~450,000 nodes: 18 s in which no other client is answered. The
largest real CRDs have a few thousand (measured with ``count_nodes``: Kyverno 1.19's
ClusterPolicy 4,469 with both versions; Istio 1.30's DestinationRule 1,673, VirtualService
1,157; cert-manager 1.21's ClusterIssuer 789; Gateway API 1.2's HTTPRoute 440), so 30,000 leaves
the largest 6.7 times its size and keeps one CRD's validation near 1 s. The nodes are counted
before anything else is checked (a walk of ~0.1 us per node, stopping at the bound), and a CRD
over it is refused with one error saying so.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import msgspec

from kubewire.json_types import JSON
from kubewire.resources import Resource
from kubewire.server.apiextensions.crd.crd_validation import validate_crd, validate_crd_status
from kubewire.server.apiextensions.schemas import schema_rules
from kubewire.server.apiextensions.validation_rules import cel_rules
from kubewire.server.writes.validation.known_valid_crds import KNOWN_VALID_CREATES
from kubewire.status import FieldError, forbidden

SCHEMA_CHECKS_KEPT = 64
CREATE_CHECKS_KEPT = 16
MAX_RULES = 1000  # x-kubernetes-validations rules in one CRD, all versions together
MAX_RULE_TEXT = 64 * 1024  # characters of rule and messageExpression in one CRD
MAX_SCHEMA_NODES = 30_000  # JSON objects in one CRD's spec (its schemas, all versions together;
# x-kubernetes-validations rules excepted)
# (SHA-256 of the schema's JSON, path) -> its errors, least recently used first. Servers in
# threads of one process (the tests) share it: each step is one OrderedDict call (atomic), and
# one that finds the entry gone by another thread's eviction is simply skipped.
_checked: OrderedDict[tuple[bytes, str], tuple[FieldError, ...]] = OrderedDict()
# SHA-256 of what a create's validation reads -> its errors (the same sharing rules)
_created: OrderedDict[bytes, tuple[FieldError, ...]] = OrderedDict()


def cel_size(value: Any) -> tuple[int, int]:
    """How many validation rules ``value`` (a CRD spec or a schema) holds, and their text's
    length (rule plus messageExpression), walking without recursion."""
    rules = text = 0
    stack: list[Any] = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found = item.get("x-kubernetes-validations")
            if isinstance(found, list):
                for rule in found:
                    if isinstance(rule, dict):
                        rules += 1
                        for key in ("rule", "messageExpression"):
                            part = rule.get(key)
                            text += len(part) if isinstance(part, str) else 0
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return rules, text


def count_nodes(value: Any, limit: int) -> int:
    """How many JSON objects ``value`` holds, counting no further than ``limit + 1``; the
    rules of ``x-kubernetes-validations`` are left to their own bound (``MAX_RULES``)."""
    count = 0
    stack: list[Any] = [value]
    while stack and count <= limit:
        item = stack.pop()
        if isinstance(item, dict):
            count += 1
            stack.extend(v for k, v in item.items() if k != "x-kubernetes-validations")
        elif isinstance(item, list):
            stack.extend(item)
    return count


def check_schema(schema: Mapping[str, JSON], path: str) -> list[FieldError]:
    """A version's ``openAPIV3Schema`` at ``path``: structural rules, then its CEL rules (which
    only a structural schema can have compiled)."""
    key = (hashlib.sha256(msgspec.json.encode(schema)).digest(), path)
    found = _checked.get(key)
    if found is not None:
        with contextlib.suppress(KeyError):
            _checked.move_to_end(key)
        return list(found)
    errors = schema_rules.schema_errors(schema, path)
    if not errors:
        _, errors = cel_rules.compile_rules(schema, path)
    _remember(_checked, key, tuple(errors), SCHEMA_CHECKS_KEPT)
    return errors


def _over_budget(schema: Mapping[str, JSON], path: str) -> list[FieldError]:
    """The schema's structural errors, and the CEL bound instead of compiling its rules."""
    errors = schema_rules.schema_errors(schema, path)
    rules, _ = cel_size(schema)
    if rules:
        errors.append(forbidden(path, (
            f"the CustomResourceDefinition's x-kubernetes-validations rules exceed what "
            f"kubewire compiles for one CustomResourceDefinition (at most {MAX_RULES} rules "
            f"and {MAX_RULE_TEXT} characters of rule and messageExpression)")))
    return errors


def validate_custom_resource_definition(resource: Resource, obj: Mapping[str, Any],
                                        old: Mapping[str, Any] | None) -> list[FieldError]:
    del resource
    if old is not None:
        return _validate_crd(obj, old)
    key = _create_key(obj)
    if key is None:
        return _validate_crd(obj, None)
    if key in KNOWN_VALID_CREATES:
        return []
    found = _created.get(key)
    if found is not None:
        with contextlib.suppress(KeyError):
            _created.move_to_end(key)
        return list(found)
    errors = _validate_crd(obj, None)
    _remember(_created, key, tuple(errors), CREATE_CHECKS_KEPT)
    return errors


def _create_key(obj: Mapping[str, Any]) -> bytes | None:
    """What ``validate_crd`` reads of a CRD being created, hashed: the name rule and the API
    approval annotation read metadata's name, generateName and annotations; the rest reads spec
    and status (uid, timestamps and the like differ per server and are not read)."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    read = [meta.get("name"), meta.get("generateName"), meta.get("annotations"),
            obj.get("spec"), obj.get("status")]
    try:
        encoded = msgspec.json.encode(read)
    except (TypeError, ValueError):  # not plain JSON (never from a request): not kept
        return None
    return hashlib.sha256(encoded).digest()


def _remember(kept: OrderedDict[Any, tuple[FieldError, ...]], key: Any,
              errors: tuple[FieldError, ...], bound: int) -> None:
    kept[key] = errors
    while len(kept) > bound:
        try:
            kept.popitem(last=False)
        except KeyError:
            break


def _validate_crd(obj: Mapping[str, Any], old: Mapping[str, Any] | None) -> list[FieldError]:
    if count_nodes(obj.get("spec"), MAX_SCHEMA_NODES) > MAX_SCHEMA_NODES:
        return [forbidden("spec", (
            f"the CustomResourceDefinition's spec holds more than {MAX_SCHEMA_NODES} objects "
            "(schema nodes), more than kubewire validates for one CustomResourceDefinition"))]
    rules, text = cel_size(obj.get("spec"))
    if rules > MAX_RULES or text > MAX_RULE_TEXT:
        return validate_crd(obj, old, schema_check=_over_budget)
    return validate_crd(obj, old, schema_check=check_schema)


def validate_custom_resource_definition_status(resource: Resource, obj: Mapping[str, Any],
                                               old: Mapping[str, Any] | None) -> list[FieldError]:
    """A ``/status`` update: ``ValidateUpdateCustomResourceDefinitionStatus`` checks only
    ``status.acceptedNames`` (the spec is the stored one; no schema is compiled or checked,
    nor ``storedVersions``)."""
    del resource
    assert old is not None  # STATUS_VALIDATORS run for updates only
    return validate_crd_status(obj, old)
