"""The static cost estimate of a validation rule, after cel-go's ``checker/cost.go``.

kube (``apiextensions-apiserver`` ``compilation.go``) asks cel-go's estimator for a rule's
worst-case cost, with sizes from the schema (``maxLength``, ``maxItems``, ``maxProperties``, or
what fits in a 3 MiB request), multiplies it by how many times the rule can run (the node's
cardinality) and rejects the CRD above 10,000,000 per rule or 100,000,000 per schema. No Python
CEL library estimates costs, so this module does, over the tree ``cel_ast`` reads. It follows
cel-go's rules for the constructs CRD rules are made of: idents and selects 1, ``has`` free,
list/map literals 10/30, comprehensions ``range * (step + condition)``, comparisons and string
concatenation at 0.1 per element of the smaller/summed operands, ``matches`` as string/10 *
regex/4, ``in`` on a list as its size, ``&&``/``||``/``?:`` at no call cost, other calls 1, an
operand of unknown size counting as 2^64-1; kube's library functions (``pkg/cel/library/
cost.go``) are costed as traversals of their receiver. It is an estimate of an estimate: the
factor it reports can differ from kube's where cel-go prices a construct this module does not
model (sizes derived through conversions, two-variable comprehensions, ``format``), but the
rules of real CRDs (Gateway API's, tested) stay within budget and quadratic rules over
unbounded lists fail as in kube.
"""

from __future__ import annotations

import math

from kubewire.server.apiextensions.validation_rules.cel_ast import (
    Checked,
    Expr,
    TypeResolver,
    element_type,
)
from kubewire.server.apiextensions.validation_rules.cel_env import DeclType
from kubewire.server.apiextensions.validation_rules.cel_objects import (
    CIDR_TYPE_NAME,
    IP_TYPE_NAME,
    OBJECT_RESULTS,
    QUANTITY_TYPE_NAME,
)

UINT64_MAX = 2**64 - 1
STRING_TRAVERSAL_FACTOR = 0.1
REGEX_LENGTH_FACTOR = 0.25
PER_CALL_LIMIT = 1_000_000  # celconfig.PerCallLimit
RUNTIME_CEL_COST_BUDGET = 10_000_000  # celconfig.RuntimeCELCostBudget
STATIC_ESTIMATED_COST_LIMIT = 10_000_000
STATIC_ESTIMATED_CRD_COST_LIMIT = 100_000_000

_TRAVERSING = frozenset({"lowerAscii", "upperAscii", "trim", "replace", "split", "substring",
                         "indexOf", "lastIndexOf", "charAt", "join", "isSorted", "sum", "min",
                         "max", "format", "quote", "reverse"})


def _sat(value: int) -> int:
    return min(value, UINT64_MAX)


_SCALARS = frozenset({"int", "double", "bool", "duration", "timestamp"})
# Calls whose result has a scalar type (size 1 in cel-go's ``computeTypeSize``).
_SCALAR_RESULTS = frozenset({
    "duration", "timestamp", "int", "uint", "double", "bool", "size", "_==_", "_!=_", "_<_",
    "_<=_", "_>_", "_>=_", "_&&_", "_||_", "!_", "@in", "matches", "startsWith", "endsWith",
    "contains", "@not_strictly_false", "isSorted", "indexOf", "lastIndexOf", "isURL", "isIP",
    "isCIDR", "isQuantity", "hasValue", "sets.contains", "sets.equivalent", "sets.intersects",
    "getFullYear", "getMonth", "getDayOfYear", "getDayOfMonth", "getDate", "getDayOfWeek",
    "getHours", "getMinutes", "getSeconds", "getMilliseconds", "family", "isUnspecified",
    "isLoopback", "isLinkLocalMulticast", "isLinkLocalUnicast", "isGlobalUnicast",
    "ip.isCanonical", "containsIP", "containsCIDR", "prefixLength", "sign", "isGreaterThan",
    "isLessThan", "compareTo", "asApproximateFloat", "asInteger", "isInteger"})
# kube's ``library/cost.go``: calls of constant cost (ip/cidr/url/quantity member functions;
# ``ip``, ``cidr``, ``quantity`` and ``ip.isCanonical`` called as global functions fall through
# kube's ``target != nil`` tests to cel-go's default, also 1).
_UNIT_COST = frozenset({
    "masked", "prefixLength", "family", "isUnspecified", "isLoopback", "isLinkLocalMulticast",
    "isLinkLocalUnicast", "isGlobalUnicast", "sign", "asInteger", "isInteger",
    "asApproximateFloat", "isGreaterThan", "isLessThan", "compareTo", "add", "sub",
    "getScheme", "getHostname", "getHost", "getPort", "getEscapedPath", "getQuery"})
# ``_==_`` on these types costs 1 (``cost.go``: IP and CIDR are opaque, Quantity listed).
_UNIT_EQUALITY = frozenset({IP_TYPE_NAME, CIDR_TYPE_NAME, QUANTITY_TYPE_NAME})
# Calls whose result is at most as large as their receiver (kube's ``ResultSize``).
_SAME_SIZE_RESULTS = frozenset({"lowerAscii", "upperAscii", "substring", "trim", "split",
                                "find", "findAll"})
_ARITHMETIC = frozenset({"_+_", "_-_", "_*_", "_/_", "_%_", "-_"})


def _factor(size: int, factor: float) -> int:
    """``SizeEstimate.MultiplyByCostFactor``."""
    product = math.ceil(float(size) * factor)
    return UINT64_MAX if product >= float(UINT64_MAX) else int(product)


class _Estimator:
    def __init__(self, self_type: DeclType, optional_old_self: bool) -> None:
        self.types = TypeResolver(self_type, optional_old_self)

    def size(self, node: Expr | None, scope: Scope) -> int:
        """``sizeOrUnknown``: literals by their length, schema paths by their bound."""
        if node is None:
            return UINT64_MAX
        if node.kind == "const":
            return len(node.const) if isinstance(node.const, str | bytes) else 1
        if node.kind == "list":
            return len(node.args)
        if node.kind == "struct":
            return len(node.entries)
        if node.kind == "comprehension":  # cel-go records its range's size as its own
            return self.size(node.iter_range, scope)
        if node.kind == "call":
            derived = self._call_size(node, scope)
            if derived is not None:
                return derived
        decl = self.types.type_of(node, scope)
        if decl is None:
            return UINT64_MAX
        return 1 if decl.kind in _SCALARS else decl.max_elements

    def _call_size(self, node: Expr, scope: Scope) -> int | None:
        """The result size cel-go (or kube's library) gives a call, when it gives one."""
        name, args = node.name, node.args
        if name in _SCALAR_RESULTS:
            return 1
        if name in _SAME_SIZE_RESULTS and node.operand is not None:
            return self.size(node.operand, scope)
        if name == "_?_:_" and len(args) == 3:
            return max(self.size(args[1], scope), self.size(args[2], scope))
        if name in ("dyn", "url") and len(args) == 1 and node.operand is None:
            return self.size(args[0], scope)
        if name in _ARITHMETIC and args and all(self.size(a, scope) == 1 for a in args):
            return 1
        if name == "_+_" and len(args) == 2 and self._sequence(args[0], scope):
            # cel-go's string, bytes and list concatenation: the sizes add up
            return _sat(self.size(args[0], scope) + self.size(args[1], scope))
        return None

    def _sequence(self, node: Expr, scope: Scope) -> bool:
        """A string, bytes or list operand (a literal, or a schema path of that type)."""
        if node.kind == "list" or (node.kind == "const" and isinstance(node.const, str | bytes)):
            return True
        decl = self.types.type_of(node, scope)
        return decl is not None and decl.kind in ("string", "bytes", "list")

    def cost(self, node: Expr | None, scope: Scope) -> int:
        if node is None:
            return 0
        kind = node.kind
        if kind == "ident":
            return 1
        if kind == "select":
            operand = self.cost(node.operand, scope)
            return operand if node.test_only else _sat(operand + 1)
        if kind == "list":
            return _sat(10 + sum(self.cost(a, scope) for a in node.args))
        if kind == "struct":
            return _sat(30 + sum(self.cost(k, scope) + self.cost(v, scope)
                                 for k, v in node.entries))
        if kind == "comprehension":
            return self._comprehension(node, scope)
        if kind == "call":
            return self._call(node, scope)
        return 0  # literals

    def _comprehension(self, node: Expr, scope: Scope) -> int:
        elem = self._iter_var_type(node.iter_range, scope)
        total = self.cost(node.iter_range, scope) + self.cost(node.accu_init, scope)
        inner = {**scope, node.iter_var: elem, node.accu_var: None}
        loop = self.cost(node.loop_condition, inner) + self.cost(node.loop_step, inner)
        total += self.cost(node.result, {**scope, node.accu_var: None})
        return _sat(total + _sat(self.size(node.iter_range, scope) * loop))

    def _iter_var_type(self, iter_range: Expr | None, scope: Scope) -> DeclType | None:
        """What a comprehension's variable is sized as.

        cel-go's coster gives the variable the path of its range plus ``@items``/``@keys``,
        and kube's ``sizeEstimator`` resolves a path from the rule's root after cutting its
        first element (always taken to be ``self``). A range that is not a path (a call such
        as ``?:`` or ``split``, a literal, another comprehension) has the empty path, so the
        variable's path is just ``["@items"]``: kube then sizes it as the root itself (an
        object's ``MaxElements`` is 0). Istio's ServiceEntry depends on it:
        ``(has(self.addresses) ? self.addresses : []).exists(k, k.contains("/"))``.
        """
        if iter_range is not None and (iter_range.kind in ("list", "struct", "comprehension",
                                                             "const")
                                       or (iter_range.kind == "call"
                                           and iter_range.name != "_[_]")):
            return self.types.self_type
        return element_type(self.types.type_of(iter_range, scope))

    def _call(self, node: Expr, scope: Scope) -> int:
        arg_costs = [self.cost(a, scope) for a in node.args]
        arg_sum = _sat(self.cost(node.operand, scope) + sum(arg_costs))
        if node.name in ("_&&_", "_||_"):
            return arg_sum
        if node.name == "_?_:_" and len(arg_costs) == 3:
            return _sat(arg_costs[0] + max(arg_costs[1], arg_costs[2]))
        special = _CALL_COSTS.get(node.name)
        function_cost = special(self, node, scope) if special is not None else None
        if function_cost is None:
            function_cost = self._traversal(node, scope)
        return _sat(function_cost + arg_sum)

    def _traversal(self, node: Expr, scope: Scope) -> int:
        """kube's library functions: a walk over the receiver (lists 1, strings 0.1 per item)."""
        if node.name in _UNIT_COST or node.name not in _TRAVERSING or node.operand is None:
            return 1
        receiver = self.size(node.operand, scope)
        receiver_type = self.types.type_of(node.operand, scope)
        is_list = receiver_type is not None and receiver_type.kind == "list"
        return 1 + _factor(receiver, 1.0 if is_list else STRING_TRAVERSAL_FACTOR)

    def matches(self, node: Expr, scope: Scope) -> int | None:
        subject, pattern = _receiver_and_arg(node)
        if subject is None or pattern is None:
            return None
        string_cost = _factor(_sat(self.size(subject, scope) + 1), STRING_TRAVERSAL_FACTOR)
        return _sat(string_cost * _factor(self.size(pattern, scope), REGEX_LENGTH_FACTOR))

    def contains(self, node: Expr, scope: Scope) -> int | None:
        subject, sub = _receiver_and_arg(node)
        if subject is None or sub is None:
            return None
        return _sat(_factor(self.size(subject, scope), STRING_TRAVERSAL_FACTOR)
                    * _factor(self.size(sub, scope), STRING_TRAVERSAL_FACTOR))

    def affix(self, node: Expr, scope: Scope) -> int | None:
        _, arg = _receiver_and_arg(node)
        return None if arg is None else _factor(self.size(arg, scope), STRING_TRAVERSAL_FACTOR)

    def membership(self, node: Expr, scope: Scope) -> int | None:
        if len(node.args) != 2:
            return None
        container = self.types.type_of(node.args[1], scope)
        if node.args[1].kind == "list" or (container is not None and container.kind == "list"):
            return self.size(node.args[1], scope)
        return 1

    def concat(self, node: Expr, scope: Scope) -> int | None:
        if len(node.args) != 2:
            return None
        left = self.types.type_of(node.args[0], scope)
        if node.args[0].kind == "list" or (left is not None and left.kind == "list"):
            return 1
        stringy = (left is not None and left.kind in ("string", "bytes")) or (
            node.args[0].kind == "const" and isinstance(node.args[0].const, str | bytes))
        if not stringy:
            return 1
        total = _sat(self.size(node.args[0], scope) + self.size(node.args[1], scope))
        return _factor(total, STRING_TRAVERSAL_FACTOR)

    def compare(self, node: Expr, scope: Scope) -> int | None:
        if len(node.args) != 2:
            return None
        if node.name == "_==_" and _object_type(node.args[0]) in _UNIT_EQUALITY and (
                _object_type(node.args[0]) == _object_type(node.args[1])):
            return 1
        smallest = min(self.size(node.args[0], scope), self.size(node.args[1], scope))
        return _factor(smallest, STRING_TRAVERSAL_FACTOR)

    def url(self, node: Expr, scope: Scope) -> int | None:
        if node.operand is not None or len(node.args) != 1:
            return None
        return _factor(self.size(node.args[0], scope), STRING_TRAVERSAL_FACTOR)

    def contains_ip(self, node: Expr, scope: Scope) -> int | None:
        """``containsIP``: two addresses of 4..16 bytes compared, plus parsing a string."""
        if node.operand is None or len(node.args) != 1:
            return None
        cost = _factor(16 + 16, STRING_TRAVERSAL_FACTOR)
        if node.name == "containsCIDR":
            cost += _factor(16, STRING_TRAVERSAL_FACTOR) + 1
        if _object_type(node.args[0]) is None:  # the string overload
            cost += _factor(self.size(node.args[0], scope), STRING_TRAVERSAL_FACTOR)
        return _sat(cost)

    def set_operation(self, node: Expr, scope: Scope) -> int | None:
        if len(node.args) != 2:
            return None
        return _sat(self.size(node.args[0], scope) * self.size(node.args[1], scope))


Scope = dict[str, DeclType | None]


def _object_type(node: Expr) -> str | None:
    """The kube object type (``net.IP``, ...) a call returns, read from its name and shape."""
    if node.kind != "call":
        return None
    if node.name == "ip":
        return IP_TYPE_NAME if (node.operand is None) == (len(node.args) == 1) else None
    if node.name in ("add", "sub", "masked"):
        return OBJECT_RESULTS[node.name] if node.operand is not None else None
    if node.name in OBJECT_RESULTS:
        return OBJECT_RESULTS[node.name] if node.operand is None else None
    return None


def _receiver_and_arg(node: Expr) -> tuple[Expr | None, Expr | None]:
    """A member call's receiver and first argument, or a global call's first two arguments."""
    if node.operand is not None:
        return node.operand, node.args[0] if node.args else None
    if len(node.args) == 2:
        return node.args[0], node.args[1]
    return None, None


_CALL_COSTS = {
    "matches": _Estimator.matches, "find": _Estimator.matches, "findAll": _Estimator.matches,
    "contains": _Estimator.contains, "startsWith": _Estimator.affix,
    "endsWith": _Estimator.affix, "@in": _Estimator.membership, "_+_": _Estimator.concat,
    "_==_": _Estimator.compare, "_!=_": _Estimator.compare, "_<_": _Estimator.compare,
    "_<=_": _Estimator.compare, "_>_": _Estimator.compare, "_>=_": _Estimator.compare,
    "sets.contains": _Estimator.set_operation, "sets.equivalent": _Estimator.set_operation,
    "sets.intersects": _Estimator.set_operation, "url": _Estimator.url,
    "containsIP": _Estimator.contains_ip, "containsCIDR": _Estimator.contains_ip,
}


def estimate(checked: Checked, self_type: DeclType, optional_old_self: bool = False) -> int:
    """The worst-case cost of one evaluation of the rule (cel-go's ``CostEstimate.Max``)."""
    return _Estimator(self_type, optional_old_self).cost(checked.expr, {})


def max_cardinality(min_serialized_size: int) -> int:
    """How many nodes of this size fit in one request (``compilation.go`` ``maxCardinality``)."""
    return (3 * 1024 * 1024) // (min_serialized_size + 1)


def cost_error_message(cost_name: str, cost: int, limit: int) -> str:
    """``getCostErrorMessage``."""
    factor = cost / limit
    if factor > 100.0:
        text = "more than 100x"
    elif factor < 1.5:
        text = f"{factor:f}x"
    else:
        text = f"{factor:.1f}x"
    return (f"{cost_name} exceeds budget by factor of {text} (try simplifying the rule, or adding "
            "maxItems, maxProperties, and maxLength where arrays, maps, and strings are declared)")


__all__ = ["PER_CALL_LIMIT", "RUNTIME_CEL_COST_BUDGET", "STATIC_ESTIMATED_COST_LIMIT",
           "STATIC_ESTIMATED_CRD_COST_LIMIT", "UINT64_MAX", "cost_error_message", "estimate",
           "max_cardinality"]
