"""``x-kubernetes-validations``: compiled when a CRD is written, evaluated on every CR write.

After apiextensions-apiserver v1.32: CRD time is ``ValidateCustomResourceDefinitionOpenAPISchema``
(``pkg/apis/apiextensions/validation/validation.go``, the per-rule checks, cost budgets and
``oldSelf`` correlation) with ``compileRule`` (``pkg/apiserver/schema/cel/compilation.go``);
request time is ``Validator.validate``/``validateExpressions`` (``pkg/apiserver/schema/cel/
validation.go``): each rule runs at every node its schema node matches (each list item, each map
value), transition rules only where an old value correlates, with kube's error texts, reasons,
``fieldPath`` and ``messageExpression``. The CEL engine and its limits are described in
``cel_env``; the cost estimate in ``cel_cost``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from cel_expr_python import cel

from kubewire.go_text import GoLiteral, go_quote
from kubewire.json_types import JSON
from kubewire.server.apiextensions.schemas.ratcheting import unchanged
from kubewire.server.apiextensions.schemas.structural import Structural
from kubewire.server.apiextensions.validation_rules import cel_ast, cel_cost, cel_env
from kubewire.server.apiextensions.validation_rules.cel_env import DeclType
from kubewire.server.apiextensions.validation_rules.cel_field_path import valid_field_path
from kubewire.status import FieldError, forbidden, invalid, not_supported, required

SUPPORTED_REASONS = ("FieldValueDuplicate", "FieldValueForbidden", "FieldValueInvalid",
                     "FieldValueRequired")
MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES = 5 * 1024
_NEWLINES_CRD = re.compile(r"[\n\r]+")


@dataclass(frozen=True)
class CompiledRule:
    """One rule as written, and what compiling it produced."""

    rule: str
    message: str = ""
    message_expression: str = ""
    reason: str | None = None
    field_path: str = ""
    optional_old_self: bool = False
    program: cel.Expression | None = None
    message_program: cel.Expression | None = None
    uses_old_self: bool = False
    normalized_field_path: str = ""
    error: str = ""  # a compile error: kube reports ``rule compile error: <e>`` at request time


@dataclass(frozen=True)
class RuleNode:
    """The rules of one schema node and the nodes below it that hold rules."""

    schema_type: str
    decl: DeclType | None
    rules: tuple[CompiledRule, ...] = ()
    properties: Mapping[str, RuleNode] = field(default_factory=dict)
    items: RuleNode | None = None
    additional: RuleNode | None = None
    list_type: str = ""
    list_map_keys: tuple[str, ...] = ()


@dataclass(frozen=True)
class CompiledRules:
    """All rules of one CRD version's schema, compiled, with where each applies (None: none)."""

    root: RuleNode | None


# --- CRD time --------------------------------------------------------------------------------

def _int(value: JSON) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _max_elements(schema: Mapping[str, JSON]) -> int | None:
    """``extractMaxElements``: how many children a node has at most (None: unbounded)."""
    kind = schema.get("type")
    if kind == "object":
        if "additionalProperties" in schema and schema["additionalProperties"] is not False:
            bound = _int(schema.get("maxProperties"))
            return None if bound is None else max(bound, 0)
        return 1
    if kind == "array":
        bound = _int(schema.get("maxItems"))
        return None if bound is None else max(bound, 0)
    return 1


def _rule_literal(raw: Mapping[str, JSON]) -> GoLiteral:
    """``%#v`` of ``apiextensions.ValidationRule`` (pointers print as Go would, address aside)."""
    reason = raw.get("reason")
    optional = raw.get("optionalOldSelf")
    reason_text = ("(*apiextensions.FieldValueErrorReason)(nil)" if reason is None
                   else "(*apiextensions.FieldValueErrorReason)(0xc000000000)")
    optional_text = "(*bool)(nil)" if optional is None else "(*bool)(0xc000000000)"
    return GoLiteral(
        "apiextensions.ValidationRule{"
        f"Rule:{go_quote(str(raw.get('rule') or ''))}, "
        f"Message:{go_quote(str(raw.get('message') or ''))}, "
        f"MessageExpression:{go_quote(str(raw.get('messageExpression') or ''))}, "
        f"Reason:{reason_text}, FieldPath:{go_quote(str(raw.get('fieldPath') or ''))}, "
        f"OptionalOldSelf:{optional_text}}}")


def _go_string(text: str) -> GoLiteral:
    """A string value as Go's field errors print it (``%q``: newlines escaped)."""
    return GoLiteral(go_quote(text))


def _strip_status(message: str) -> str:
    """cel-cpp's ``absl::Status`` text without its code: ``INVALID_ARGUMENT: x [..]`` → x."""
    message = re.sub(r"^[A-Z_]+: ", "", message, count=1)
    return re.sub(r" \[[A-Z_]+\]$", "", message)


@dataclass
class _CompileResult:
    rule: CompiledRule
    error: str = ""
    message_error: str = ""
    cost: int = 0
    message_cost: int = 0


def _issues_text(prefix: str, source: str, checked: cel_ast.Checked,
                 issues: list[tuple[int, str]]) -> str:
    return prefix + "\n".join(cel_ast.display_error(source, checked, node_id, text)
                              for node_id, text in issues)


def _check(source: str, decl: DeclType, optional_old_self: bool, prefix: str,
           wanted: str) -> tuple[cel.Expression | None, cel_ast.Checked | None, str]:
    """Compile ``source`` in the rule environment; the program, its tree, or kube's error."""
    try:
        program = cel_env.rule_env(decl, optional_old_self).compile(source)
    except RuntimeError as exc:
        return None, None, prefix + _strip_status(str(exc))
    checked = cel_ast.decode(program.serialize())
    issues = cel_ast.field_errors(checked, decl, optional_old_self)
    if issues:
        return None, None, _issues_text(prefix, source, checked, issues)
    output = program.return_type()
    wanted_type = cel.Type.BOOL if wanted == "bool" else cel.Type.STRING
    if output != wanted_type:
        known = cel_ast.result_type(checked, decl, optional_old_self)
        if output != cel.Type.DYN or (known is not None and known.kind not in (wanted, "dyn")):
            return None, None, ""
    return program, checked, ""


def _compile_message(result: _CompileResult, decl: DeclType) -> cel.Expression | None:
    source = result.rule.message_expression
    optional = result.rule.optional_old_self
    program, checked, error = _check(source, decl, optional,
                                     "messageExpression compilation failed: ", "string")
    if program is None or checked is None:
        result.message_error = error or "messageExpression must evaluate to a string"
        return None
    result.message_cost = cel_cost.estimate(checked, decl, optional)
    return program


def _compile_one(raw: Mapping[str, JSON], schema: Mapping[str, JSON],
                 decl: DeclType) -> _CompileResult:
    """``compileRule``."""
    reason = raw.get("reason")
    base = CompiledRule(rule=str(raw.get("rule") or ""), message=str(raw.get("message") or ""),
                        message_expression=str(raw.get("messageExpression") or ""),
                        reason=reason if isinstance(reason, str) else None,
                        field_path=str(raw.get("fieldPath") or ""),
                        optional_old_self=raw.get("optionalOldSelf") is True)
    result = _CompileResult(base)
    if not base.rule.strip():
        return result
    program, checked, error = _check(base.rule, decl, base.optional_old_self,
                                     "compilation failed: ", "bool")
    if program is None or checked is None:
        result.error = error or "cel expression must evaluate to a bool"
        result.rule = replace(base, error=result.error)
        return result
    if base.optional_old_self:
        program = cel_env.wrapper_env(decl).compile(cel_env.optional_wrapper(base.rule))
    result.cost = cel_cost.estimate(checked, decl, base.optional_old_self)
    message_program = _compile_message(result, decl) if base.message_expression else None
    normalized = valid_field_path(base.field_path, schema) or "" if base.field_path else ""
    result.rule = replace(base, program=program, message_program=message_program,
                          uses_old_self=cel_ast.uses_old_self(checked),
                          normalized_field_path=normalized)
    return result


def _message_errors(at: str, raw: Mapping[str, JSON]) -> list[FieldError]:
    rule = str(raw.get("rule") or "")
    message = raw.get("message")
    message_text = message if isinstance(message, str) else ""
    trimmed_rule, trimmed_msg = rule.strip(), message_text.strip()
    if not trimmed_rule:
        return [required(f"{at}.rule", "rule is not specified")]
    if message_text and not trimmed_msg:
        return [invalid(f"{at}.message", _go_string(message_text),
                        "message must be non-empty if specified")]
    if _NEWLINES_CRD.search(trimmed_msg):
        return [invalid(f"{at}.message", _go_string(message_text),
                        "message must not contain line breaks")]
    if _NEWLINES_CRD.search(trimmed_rule) and not trimmed_msg:
        return [required(f"{at}.message",
                         "message must be specified if rule contains line breaks")]
    return []


def _field_path_errors(at: str, field_path: str,
                       schema: Mapping[str, JSON]) -> list[FieldError]:
    errs: list[FieldError] = []
    if field_path and not field_path.strip():
        errs.append(invalid(f"{at}.fieldPath", _go_string(field_path),
                            "fieldPath must be non-empty if specified"))
    if _NEWLINES_CRD.search(field_path):
        errs.append(invalid(f"{at}.fieldPath", _go_string(field_path),
                            "fieldPath must not contain line breaks"))
    if field_path and valid_field_path(field_path, schema) is None:
        errs.append(invalid(f"{at}.fieldPath", _go_string(field_path),
                            "fieldPath must be a valid path"))
    return errs


def _rule_text_errors(rules: list[Mapping[str, JSON]], schema: Mapping[str, JSON],
                      path: str) -> list[FieldError]:
    """The checks of each rule's fields that come before compiling (kube's SchemaErrors)."""
    errs: list[FieldError] = []
    for i, raw in enumerate(rules):
        at = f"{path}.x-kubernetes-validations[{i}]"
        errs.extend(_message_errors(at, raw))
        message_expression = str(raw.get("messageExpression") or "")
        if message_expression and not message_expression.strip():
            errs.append(required(f"{at}.messageExpression",
                                 "messageExpression must be non-empty if specified"))
        reason = raw.get("reason")
        if reason is not None and reason not in SUPPORTED_REASONS:
            errs.append(not_supported(f"{at}.reason", reason, SUPPORTED_REASONS))
        errs.extend(_field_path_errors(at, str(raw.get("fieldPath") or ""), schema))
    return errs


@dataclass(frozen=True)
class _Place:
    """Where a schema node is: its path, how often it can occur, its uncorrelatable ancestor."""

    path: str
    cardinality: int | None
    uncorrelatable: str | None

    def child(self, suffix: str, schema: Mapping[str, JSON],
              uncorrelatable: str | None = None) -> _Place:
        """``CELSchemaContext.childContext``: cardinality times the parent's element bound."""
        cardinality = None
        bound = _max_elements(schema)
        if self.cardinality is not None and bound is not None:
            cardinality = min(self.cardinality * bound, cel_cost.UINT64_MAX)
        return _Place(self.path + suffix, cardinality, self.uncorrelatable or uncorrelatable)


class _Compiler:
    """``ValidateCustomResourceDefinitionOpenAPISchema``'s CEL part, over the whole schema."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []
        self.total = 0
        self.most_expensive: list[tuple[int, str]] = []

    def observe(self, path: str, cost: int) -> None:
        """``TotalCost.ObserveExpressionCost``."""
        self.total = min(self.total + cost, cel_cost.UINT64_MAX)
        if cost < cel_cost.STATIC_ESTIMATED_CRD_COST_LIMIT // 100:
            return
        self.most_expensive.append((cost, path))
        self.most_expensive.sort(key=lambda item: -item[0])
        del self.most_expensive[4:]

    def node(self, schema: Mapping[str, JSON], decl: DeclType | None,
             place: _Place) -> tuple[RuleNode | None, int]:
        """Compile a node's rules after its children's; the node and its subtree's errors."""
        properties, items, additional, schema_errors = self.children(schema, decl, place)
        raw_rules = [r for r in schema.get("x-kubernetes-validations") or ()
                     if isinstance(r, Mapping)]
        compiled: list[CompiledRule] = []
        if raw_rules:
            text_errors = _rule_text_errors(raw_rules, schema, place.path)
            self.errors.extend(text_errors)
            schema_errors += len(text_errors)
            if schema_errors == 0 and decl is not None:
                compiled = [self.rule(raw, i, schema, decl, place)
                            for i, raw in enumerate(raw_rules)]
        if not compiled and not properties and items is None and additional is None:
            return None, schema_errors
        keys = schema.get("x-kubernetes-list-map-keys")
        return RuleNode(
            schema_type=str(schema.get("type") or ""), decl=decl, rules=tuple(compiled),
            properties=properties, items=items, additional=additional,
            list_type=str(schema.get("x-kubernetes-list-type") or ""),
            list_map_keys=tuple(k for k in keys if isinstance(k, str))
            if isinstance(keys, list) else ()), schema_errors

    def children(self, schema: Mapping[str, JSON], decl: DeclType | None, place: _Place,
                 ) -> tuple[dict[str, RuleNode], RuleNode | None, RuleNode | None, int]:
        errors = 0
        additional = items = None
        extra = schema.get("additionalProperties")
        if isinstance(extra, Mapping):
            sub_decl = decl.elem if decl is not None and decl.kind == "map" else None
            additional, n = self.node(extra, sub_decl,
                                      place.child(".additionalProperties", schema))
            errors += n
        properties: dict[str, RuleNode] = {}
        for name, prop in (schema.get("properties") or {}).items():
            if isinstance(prop, Mapping):
                sub, n = self.node(prop, _property_type(decl, name, prop),
                                   place.child(f".properties[{name}]", schema))
                errors += n
                if sub is not None:
                    properties[name] = sub
        entry = schema.get("items")
        if isinstance(entry, Mapping):
            correlatable = schema.get("x-kubernetes-list-type") == "map"
            sub_decl = decl.elem if decl is not None and decl.kind == "list" else None
            items, n = self.node(entry, sub_decl, place.child(
                ".items", schema, None if correlatable else place.path))
            errors += n
        return properties, items, additional, errors

    def rule(self, raw: Mapping[str, JSON], i: int, schema: Mapping[str, JSON],
             decl: DeclType, place: _Place) -> CompiledRule:
        at = f"{place.path}.x-kubernetes-validations[{i}]"
        result = _compile_one(raw, schema, decl)
        cardinality = (place.cardinality if place.cardinality is not None
                       else cel_cost.max_cardinality(decl.min_serialized_size))
        self.budget(f"{at}.rule", "estimated rule cost", _mul(result.cost, cardinality))
        if result.error:
            self.errors.append(invalid(f"{at}.rule", _rule_literal(raw), result.error))
        if result.message_error:
            self.errors.append(invalid(f"{at}.messageExpression", _rule_literal(raw),
                                       result.message_error))
        elif result.rule.message_program is not None:  # kube does not scale it by cardinality
            self.budget(f"{at}.messageExpression", "estimated messageExpression cost",
                        result.message_cost)
        if result.rule.uses_old_self:
            if place.uncorrelatable is not None:
                self.errors.append(invalid(
                    f"{at}.rule", _go_string(result.rule.rule),
                    "oldSelf cannot be used on the uncorrelatable portion of the schema within "
                    f"{place.uncorrelatable}"))
        elif isinstance(raw.get("optionalOldSelf"), bool):
            self.errors.append(invalid(f"{at}.optionalOldSelf", raw["optionalOldSelf"],
                                       "may not be set if oldSelf is not used in rule"))
        return result.rule

    def budget(self, at: str, name: str, cost: int) -> None:
        if cost > cel_cost.STATIC_ESTIMATED_COST_LIMIT:
            self.errors.append(forbidden(at, cel_cost.cost_error_message(
                name, cost, cel_cost.STATIC_ESTIMATED_COST_LIMIT)))
        self.observe(at, cost)


def _property_type(decl: DeclType | None, name: str, prop: Mapping[str, JSON]) -> DeclType | None:
    escaped = cel_env.escape(name)
    if escaped is None:  # not addressable from the parent, but its own rules still run
        return cel_env.schema_decl_type(prop, prop.get("x-kubernetes-embedded-resource") is True)
    if decl is not None and decl.kind == "object":
        hit = decl.fields.get(escaped)
        return hit[1] if hit else None
    return None


def _mul(cost: int, cardinality: int) -> int:
    """``multiplyWithOverflowGuard``."""
    if cost == 0:
        return 0
    return min(cost * cardinality, cel_cost.UINT64_MAX)


def compile_rules(schema: Mapping[str, JSON], path: str) -> tuple[CompiledRules, list[FieldError]]:
    """Compile every rule of an ``openAPIV3Schema`` (``path`` names it in the errors).

    Call it only for a schema without other errors, as kube does. Errors come in kube's order
    for one node (children before their parent's rules), then the whole-schema budget.
    """
    compiler = _Compiler()
    decl = cel_env.schema_decl_type(schema, True)
    root, _ = compiler.node(schema, decl, _Place(path, 1, None))
    if compiler.total > cel_cost.STATIC_ESTIMATED_CRD_COST_LIMIT:
        for _, at in compiler.most_expensive:
            compiler.errors.append(forbidden(
                at, "contributed to estimated rule cost total exceeding cost limit for entire "
                    "OpenAPIv3 schema"))
        compiler.errors.append(forbidden(path, cel_cost.cost_error_message(
            "x-kubernetes-validations estimated rule cost total for entire OpenAPIv3 schema",
            compiler.total, cel_cost.STATIC_ESTIMATED_CRD_COST_LIMIT)))
    return CompiledRules(root), compiler.errors


# --- request time ----------------------------------------------------------------------------

_RUNTIME_TEXTS = (
    (re.compile(r'^Key not found in map : "(.*)"$', re.S), r"no such key: \1"),
    (re.compile(r"^Index error: index=(-?\d+) size=\d+$"), r"index out of bounds: \1"),
    (re.compile(r"^divide by zero$"), "division by zero"),
    (re.compile(r"^modulus by zero$"), "modulus by zero"),
    (re.compile(r"^No matching overloads found : (.*)$", re.S), r"no such overload: \1"),
    (re.compile(r"^No such field: (.*)$", re.S), r"no such key: \1"),
)


def runtime_error_text(raw: str) -> str:
    """A cel-cpp evaluation error as cel-go words it (for the texts kube users see)."""
    text = _strip_status(raw)
    for pattern, replacement in _RUNTIME_TEXTS:
        if pattern.match(text):
            return pattern.sub(replacement, text)
    return text


def _path(path: str) -> str:
    return path or "<nil>"


def _child(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _message_or_default(rule: CompiledRule) -> str:
    return rule.message.strip() if rule.message else f"failed rule: {_error_string(rule)}"


def _error_string(rule: CompiledRule) -> str:
    return rule.message.strip() if rule.message else rule.rule.strip()


def _for_reason(path: str, type_name: str, detail: str, reason: str | None) -> FieldError:
    """``fieldErrorForReason``."""
    if reason == "FieldValueForbidden":
        return forbidden(_path(path), detail)
    if reason == "FieldValueRequired":
        return required(_path(path), detail)
    if reason == "FieldValueDuplicate":
        return FieldError("FieldValueDuplicate", _path(path), type_name)
    return invalid(_path(path), type_name, detail)


def _run(program: cel.Expression, data: Mapping[str, Any] | cel.Activation
         ) -> tuple[Any, str | None]:
    try:
        value = (program.eval(activation=data) if isinstance(data, cel.Activation)
                 else program.eval(data=data))
    except RuntimeError as exc:
        return None, runtime_error_text(str(exc))
    if value.type() == cel.Type.ERROR:
        return None, runtime_error_text(str(value.value()))
    return value.value(), None


# Ratcheting: the nearest node with a correlated old value (its schema, value, old value),
# whose being unchanged turns a failing non-transition rule at or below it into a warning.
_Correlated = tuple[Structural | None, JSON, JSON]


class _Evaluation:
    def __init__(self, schema: Structural | None = None) -> None:
        self.errors: list[FieldError] = []
        self.warnings: list[str] = []
        self.ratchet = schema is not None  # the schema walks beside the rules when ratcheting
        self.correlated: _Correlated | None = None

    def node(self, node: RuleNode | None, path: str, obj: JSON, old: JSON,
             s: Structural | None = None) -> None:
        """``Validator.validate``: this node's rules, then its items or fields."""
        if node is None or obj is None:
            return
        outer = self.correlated
        if self.ratchet and old is not None:
            self.correlated = (s, obj, old)
        self.expressions(node, path, obj, old)
        if isinstance(obj, list) and node.items is not None:
            items = s.items if s is not None else None
            for i, item in enumerate(obj):
                self.node(node.items, f"{path}[{i}]", item, _correlated_item(node, item, old),
                          items)
        elif isinstance(obj, Mapping):
            self.fields(node, path, obj, old if isinstance(old, Mapping) else {}, s)
        self.correlated = outer

    def fields(self, node: RuleNode, path: str, obj: Mapping[str, JSON],
               old: Mapping[str, JSON], s: Structural | None = None) -> None:
        """``validateMap``: map values, then declared properties (old ones by key)."""
        if node.additional is not None:
            values = s.additional_schema if s is not None else None
            for key, value in obj.items():
                self.node(node.additional, f"{path}[{key}]", value, old.get(key), values)
        for key, value in obj.items():
            sub = node.properties.get(key)
            if sub is not None:
                # ratchetingOptions.key: the root's apiVersion and kind never ratchet
                old_value = None if self.ratchet and not path and key in ("apiVersion", "kind") \
                    else old.get(key)
                self.node(sub, _child(path, key), value, old_value,
                          s.properties.get(key) if s is not None else None)

    def expressions(self, node: RuleNode, path: str, obj: JSON, old: JSON) -> None:
        """``validateExpressions``."""
        if not node.rules or node.decl is None:
            return
        self_value = cel_env.to_cel(obj, node.decl)
        old_value = cel_env.to_cel(old, node.decl) if old is not None else None
        bound: dict[bool, cel.Activation] = {}  # one per environment, shared by its rules
        for rule in node.rules:
            if rule.error:
                self.errors.append(invalid(_path(path), node.schema_type,
                                           f"rule compile error: {rule.error}"))
            elif rule.program is not None and (
                    old is not None or not rule.uses_old_self or rule.optional_old_self):
                optional = rule.optional_old_self
                if optional not in bound:
                    bound[optional] = cel_env.bound_activation(node.decl, optional, (
                        cel_env.activation(self_value, old_value, old is not None, optional)))
                self.run(rule, node.schema_type, path, bound[optional],
                         {cel_env.SELF: self_value, cel_env.OLD_SELF: old_value})

    def run(self, rule: CompiledRule, type_name: str, path: str, data: cel.Activation,
            message_data: Mapping[str, Any]) -> None:
        assert rule.program is not None
        value, error = _run(rule.program, data)
        if error is not None:
            if error.startswith("no such overload"):
                detail = (f"'{error}': call arguments did not match a supported operator, "
                          f"function or macro signature for rule: {_error_string(rule)}")
            else:
                detail = f"{error} evaluating rule: {_error_string(rule)}"
            self.errors.append(invalid(_path(path), type_name, detail))
            return
        if value is True:
            return
        at = _child(path, rule.normalized_field_path) if rule.normalized_field_path else path
        detail = _message_or_default(rule)
        if rule.message_program is not None:
            detail = self.message(rule, message_data) or detail
        failed = _for_reason(at, type_name, detail, rule.reason)
        if self.ratchet and not rule.uses_old_self and self.correlated is not None and \
                unchanged(*self.correlated):
            self.warnings.append(str(failed))  # shouldRatchetError: warning.AddWarning
        else:
            self.errors.append(failed)

    def message(self, rule: CompiledRule, data: Mapping[str, Any]) -> str | None:
        """``evalMessageExpression``: the message, or None to fall back to the static one."""
        assert rule.message_program is not None
        value, error = _run(rule.message_program, data)
        if error is not None or not isinstance(value, str):
            return None
        trimmed = value.strip()
        if (len(trimmed.encode()) > MAX_EVALUATED_MESSAGE_EXPRESSION_SIZE_BYTES
                or "\n" in trimmed or not trimmed):
            return None
        return trimmed


def _correlated_item(node: RuleNode, item: JSON, old: JSON) -> JSON:
    """``makeMapList(...).Get``: the old item with the same keys, in a ``list-type: map``."""
    if node.list_type != "map" or not node.list_map_keys or not isinstance(old, list):
        return None
    if not isinstance(item, Mapping):
        return None
    wanted = tuple(item.get(k) for k in node.list_map_keys)
    for candidate in old:
        if isinstance(candidate, Mapping) and tuple(
                candidate.get(k) for k in node.list_map_keys) == wanted:
            return candidate
    return None


def evaluate(rules: CompiledRules, obj: Mapping[str, JSON],
             old: Mapping[str, JSON] | None) -> list[FieldError]:
    """Evaluate every rule at every node it applies to; the errors kube would report.

    ``old`` is the object before an update (None on create): transition rules run only where
    an old value correlates, or with ``optionalOldSelf``. The root's errors print ``<nil>``.
    """
    evaluation = _Evaluation()
    evaluation.node(rules.root, "", obj, old)
    return evaluation.errors


def evaluate_update(rules: CompiledRules, schema: Structural, obj: Mapping[str, JSON],
                    old: Mapping[str, JSON]) -> tuple[list[FieldError], list[str]]:
    """``evaluate`` of an update with ratcheting (``cel.WithRatcheting``): a failing rule
    without ``oldSelf`` at a node equal to its correlated old value (or below the nearest such
    node) is a warning, not an error. Returns the errors and the warnings' texts."""
    evaluation = _Evaluation(schema)
    evaluation.node(rules.root, "", obj, old, schema)
    return evaluation.errors, evaluation.warnings


__all__ = ["SUPPORTED_REASONS", "CompiledRule", "CompiledRules", "RuleNode", "compile_rules",
           "evaluate", "evaluate_update", "runtime_error_text"]
