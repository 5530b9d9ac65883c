"""Service cluster IPs and node ports: kube's allocators as pure state plus functions.

Mirrors ``kubernetes:pkg/registry/core/service/storage/alloc.go`` (``allocateCreate``,
``allocateUpdate``, ``initIPFamilyFields``, ``initNodePorts``, ``updateNodePorts``),
``storage.go`` ``patchAllocatedValues``, ``service/strategy.go`` (``NormalizeClusterIPs``,
``dropTypeDependentFields``) and the bitmap allocators (``ipallocator/bitmap.go``,
``portallocator/allocator.go``), for a single-stack cluster of the CIDR's family.

Guarantees: entry points return a new object and never touch their input; one that raises keeps
no state change; the same ``random.Random`` seed and calls give the same addresses. Dynamic picks
scan from a random start in the upper band of a range, then the lower band kept for static
requests (``calculateRangeOffset``), as kube does. Not done: ``healthCheckNodePort``.

Releases on update are deferred as in kube's transactions: ``reconcile_on_update`` only
allocates; once the write commits call ``release(old, keep=stored)``, if it fails
``release(new, keep=old)``.
"""

from __future__ import annotations

import copy
import ipaddress
import random
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from kubewire.go_text import go_string_slice
from kubewire.json_types import JSON
from kubewire.status import FieldError, Invalid, internal_error, invalid, invalid_object

DEFAULT_SERVICE_CIDR = "10.96.0.0/12"  # kube-apiserver --service-cluster-ip-range default
DEFAULT_NODE_PORT_RANGE = (30000, 32767)  # --service-node-port-range default
MAX_IPV6_RANGE_ADDRESSES = 65536  # ipallocator/bitmap.go caps the bitmap size
_NONE = "None"
_NODE_PORT_TYPES = ("NodePort", "LoadBalancer")
_FAMILIES = ("IPv4", "IPv6")
_POLICIES = ("PreferDualStack", "RequireDualStack", "SingleStack")
IPS, PORTS = "ips", "ports"  # the two ranges (``ServiceAllocator.used``, ``restore`` ...)
_BAD_IP = "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)"


@dataclass(slots=True)
class _Pool:
    """Values ``base .. base+size-1``; kube's ``AllocationMapWithOffset`` with a random scan."""

    base: int
    size: int
    band: int  # calculateRangeOffset: the lower band kept for static requests
    used: set[int] = field(default_factory=set)

    @classmethod
    def sized(cls, base: int, size: int, total: int, limits: tuple[int, int, int]) -> _Pool:
        low, high, step = limits
        return cls(base, max(size, 0), 0 if total <= low else max(low, min(total // step, high)))

    def contains(self, value: int) -> bool:
        return 0 <= value - self.base < self.size

    def claim(self, value: int) -> str:
        """Reserve ``value``: "" on success, else kube's reason ("range" or "taken")."""
        if not self.contains(value):
            return "range"
        if value in self.used:
            return "taken"
        self.used.add(value)
        return ""

    def claim_next(self, rng: random.Random) -> int | None:
        if len(self.used) >= self.size:
            return None
        for low, count in ((self.band, self.size - self.band), (0, self.band)):
            start = rng.randrange(count) if count > 0 else 0
            for i in range(count):
                value = self.base + low + (start + i) % count
                if value not in self.used:
                    self.used.add(value)
                    return value
        return None

    def copy(self) -> _Pool:
        return _Pool(self.base, self.size, self.band, set(self.used))


def _spec(svc: Mapping[str, JSON]) -> dict[str, JSON]:
    spec = svc.get("spec")
    return spec if isinstance(spec, dict) else {}


def _ports(spec: Mapping[str, JSON]) -> list[dict[str, JSON]]:
    ports = spec.get("ports")
    return [p for p in ports if isinstance(p, dict)] if isinstance(ports, list) else []


def _node_port(port: Mapping[str, JSON]) -> int:
    value = port.get("nodePort")
    return value if type(value) is int else 0


def _ips(spec: Mapping[str, JSON]) -> list[str]:
    value = spec.get("clusterIPs")
    return [str(v) for v in value] if isinstance(value, list) else []


def _needs_node_ports(spec: Mapping[str, JSON]) -> bool:
    return spec.get("type") in _NODE_PORT_TYPES


def _used_node_ports(spec: Mapping[str, JSON]) -> set[int]:
    return {n for n in map(_node_port, _ports(spec)) if n}


def _ip_value(text: str) -> int | None:
    try:
        return int(ipaddress.ip_address(text))
    except ValueError:
        return None


def holdings(svc: Mapping[str, JSON]) -> tuple[set[int], set[int]]:
    """The cluster IPs (as integers) and node ports a stored Service holds."""
    spec = _spec(svc)
    ips = [] if spec.get("type") == "ExternalName" else map(_ip_value, _ips(spec))
    return {ip for ip in ips if ip is not None}, _used_node_ports(spec)


def _fail(svc: Mapping[str, JSON], errors: list[FieldError]) -> Invalid:
    """422 naming the object's own kind (write bodies always carry apiVersion and kind)."""
    meta = svc.get("metadata")
    name = meta.get("name", "") if isinstance(meta, dict) else ""
    group = str(svc.get("apiVersion") or "").rpartition("/")[0]
    return invalid_object(group, str(svc.get("kind") or ""), str(name), errors)


class ServiceAllocator:
    """Cluster IPs from one CIDR and node ports from one range, shared by all Services.

    Never handed out: the network address, the IPv4 broadcast address and the first address
    (``first_ip``, the ``kubernetes`` Service's). Not thread-safe: use it from the event loop.
    Raises kube's errors: ``Invalid`` with its exact field errors, ``InternalError`` when full.
    """

    def __init__(self, cidr: str = DEFAULT_SERVICE_CIDR,
                 port_range: tuple[int, int] = DEFAULT_NODE_PORT_RANGE,
                 rng: random.Random | None = None) -> None:
        self._network = ipaddress.ip_network(cidr, strict=True)
        self.family = _FAMILIES[self._network.version == 6]
        total = self._network.num_addresses
        usable = total - 2 if self._network.version == 4 else min(
            total, MAX_IPV6_RANGE_ADDRESSES) - 1
        first = int(self._network.network_address) + 1
        self._ips = _Pool.sized(first, usable, total, (16, 256, 16))
        self._ips.claim(first)  # the kubernetes Service's address
        low, high = port_range
        self._ports = _Pool.sized(low, high - low + 1, high - low + 1, (16, 128, 32))
        self._rng = rng or random.Random()

    @classmethod
    def from_services(cls, services: Iterable[Mapping[str, JSON]], cidr: str,
                      port_range: tuple[int, int], rng: random.Random) -> ServiceAllocator:
        """Rebuild the state from the stored Services (startup). Duplicate or out-of-range
        holdings are tolerated, as kube's repair loop tolerates them."""
        allocator = cls(cidr, port_range, rng)
        for svc in services:
            ips, ports = holdings(svc)
            for ip in ips:
                allocator._ips.claim(ip)
            for port in ports:
                allocator._ports.claim(port)
        return allocator

    @property
    def cidr(self) -> str:
        return str(self._network)

    # --- the two ranges as values (IPs as integers), for the stored bitmaps (``ranges``) ---------

    def range_spec(self, which: str) -> str:
        """kube's ``RangeAllocation.range``: the CIDR (``10.96.0.0/12``) or ``30000-32767``."""
        if which == IPS:
            return str(self._network)
        return f"{self._ports.base}-{self._ports.base + self._ports.size - 1}"

    def bounds(self, which: str) -> tuple[int, int]:
        """(base, size) of a range: value ``base + i`` is bit ``i`` of kube's bitmap."""
        pool = self._pool(which)
        return pool.base, pool.size

    def used(self, which: str) -> frozenset[int]:
        return frozenset(self._pool(which).used)

    def restore(self, which: str, values: Iterable[int]) -> None:
        """Hold exactly ``values`` (those in range) in one range; the first IP stays reserved."""
        pool = self._pool(which)
        pool.used = {v for v in values if pool.contains(v)}
        if which == IPS:
            pool.used.add(pool.base)

    def claim_values(self, which: str, values: Iterable[int]) -> bool:
        """Reserve all of ``values`` in range (False, and nothing reserved, if one is taken)."""
        pool = self._pool(which)
        wanted = {v for v in values if pool.contains(v)}
        if wanted & pool.used:
            return False
        pool.used |= wanted
        return True

    def release_values(self, which: str, values: Iterable[int]) -> None:
        pool = self._pool(which)
        pool.used.difference_update(set(values) - ({pool.base} if which == IPS else set()))

    def _pool(self, which: str) -> _Pool:
        return self._ips if which == IPS else self._ports

    @property
    def first_ip(self) -> str:
        """The reserved first address (``10.96.0.1``), the ``kubernetes`` Service's IP."""
        return str(self._network.network_address + 1)

    def is_ip_allocated(self, ip: str) -> bool:
        return _ip_value(ip) in self._ips.used

    def is_port_allocated(self, port: int) -> bool:
        return port in self._ports.used

    # --- entry points ---------------------------------------------------------------------------

    def allocate_on_create(self, svc: Mapping[str, JSON], *, dry_run: bool = False,
                           ) -> dict[str, JSON]:
        """The Service to store: clusterIP(s), ipFamilies, ipFamilyPolicy and nodePorts set.

        Requested values are validated and reserved; ``dry_run`` computes the same object and
        keeps nothing. Raises Invalid or InternalError (and keeps nothing).
        """
        out, spec = _copy_with_spec(svc)
        _normalize_cluster_ips(None, spec)
        work = self._scratch()
        work._init_ip_families(out, spec, None)
        work._allocate_cluster_ips(out, spec)
        if _needs_node_ports(spec):
            work._init_node_ports(out, spec)
        self._adopt(work, dry_run)
        return out

    def reconcile_on_update(self, old: Mapping[str, JSON], new: Mapping[str, JSON], *,
                            dry_run: bool = False) -> dict[str, JSON]:
        """The Service to store when ``new`` replaces the stored ``old``.

        Keeps allocated values the body left out (clusterIPs; nodePorts by port name), drops
        those a type change made meaningless, allocates what is newly needed and releases
        nothing (module docstring). Raises Invalid or InternalError (and keeps nothing).
        """
        out, spec = _copy_with_spec(new)
        old_spec = _spec(old)
        _drop_type_dependent_fields(old_spec, spec, out)
        _patch_allocated_values(old_spec, spec)
        _normalize_cluster_ips(old_spec, spec)
        work = self._scratch()
        work._init_ip_families(out, spec, old_spec)
        errors = _changed_cluster_ip_errors(old_spec, spec)
        if errors:
            raise _fail(out, errors)
        if old_spec.get("type") == "ExternalName" and spec.get("type") != "ExternalName":
            work._allocate_cluster_ips(out, spec)
        if _needs_node_ports(spec):
            work._update_node_ports(out, spec, old_spec)
        self._adopt(work, dry_run)
        return out

    def release(self, svc: Mapping[str, JSON], *, keep: Mapping[str, JSON] | None = None) -> None:
        """Free what ``svc`` holds and ``keep`` does not (on delete: no ``keep``). Never raises."""
        ips, ports = holdings(svc)
        if keep is not None:
            kept_ips, kept_ports = holdings(keep)
            ips, ports = ips - kept_ips, ports - kept_ports
        self._ips.used.difference_update(ips - {self._ips.base})  # first_ip stays reserved
        self._ports.used.difference_update(ports)

    # --- state ----------------------------------------------------------------------------------

    def _scratch(self) -> ServiceAllocator:
        work = copy.copy(self)
        work._ips, work._ports = self._ips.copy(), self._ports.copy()
        return work

    def _adopt(self, work: ServiceAllocator, dry_run: bool) -> None:
        if not dry_run:
            self._ips, self._ports = work._ips, work._ports

    # --- cluster IPs ----------------------------------------------------------------------------

    def _init_ip_families(self, svc: dict[str, JSON], spec: dict[str, JSON],
                          old_spec: Mapping[str, JSON] | None) -> None:
        """alloc.go initIPFamilyFields for a single-stack cluster."""
        if spec.get("type") == "ExternalName":
            return
        _default_family_policy(spec, old_spec)
        families: list[JSON] = list(spec.get("ipFamilies") or [])
        errors = _cluster_ip_field_errors(spec) or self._family_errors(spec, families)
        if errors:
            raise _fail(svc, errors)
        families = families or [self.family]
        if spec.get("clusterIP") == _NONE and not spec.get("selector"):
            if len(families) < 2 and spec["ipFamilyPolicy"] != "SingleStack":
                families.append(_FAMILIES[families[0] == "IPv4"])
        elif spec["ipFamilyPolicy"] == "RequireDualStack":
            errors = [invalid("spec.ipFamilyPolicy", "RequireDualStack",
                              "this cluster is not configured for dual-stack services")]
        else:
            errors = [invalid(f"spec.ipFamilies[{i}]", family, "not configured on this cluster")
                      for i, family in enumerate(families) if family != self.family]
        if errors:
            raise _fail(svc, errors)
        spec["ipFamilies"] = families

    def _family_errors(self, spec: Mapping[str, JSON], families: list[JSON]) -> list[FieldError]:
        """Policy/count conflicts; families inferred from requested IPs are appended."""
        errors = [invalid("spec.ipFamilyPolicy", "SingleStack", "must be 'RequireDualStack' or "
                          f"'PreferDualStack' when multiple {what} are specified")
                  for what, count in (("cluster IPs", len(_ips(spec))),
                                      ("IP families", len(families)))
                  if count == 2 and spec["ipFamilyPolicy"] == "SingleStack"]
        for i, ip in enumerate(_ips(spec)):
            if ip == _NONE:
                break
            family = _FAMILIES[ipaddress.ip_address(ip).version == 6]
            if i >= len(families) and family != self.family:
                errors.append(invalid(f"spec.clusterIPs[{i}]", go_string_slice(_ips(spec)),
                                      f"{family} is not configured on this cluster"))
            elif i >= len(families):
                families.append(family)
        return errors

    def _allocate_cluster_ips(self, svc: dict[str, JSON], spec: dict[str, JSON]) -> None:
        """alloc.go allocClusterIPs/allocIPs; nothing for ExternalName or headless."""
        ips = _ips(spec)
        if spec.get("type") == "ExternalName" or (ips and ips[0] == _NONE):
            return
        if ips and ips[0]:
            requested = ips[0]
            why = self._ips.claim(int(ipaddress.ip_address(requested)))
            if why:
                reason = "provided IP is already allocated" if why == "taken" else (
                    f"the provided IP ({requested}) is not in the valid range. "
                    f"The range of valid IPs is {self._network}")
                raise _fail(svc, [invalid("spec.clusterIPs", go_string_slice(ips),
                                          f"failed to allocate IP {requested}: {reason}")])
        else:
            value = self._ips.claim_next(self._rng)
            if value is None:
                raise internal_error("failed to allocate a serviceIP: range is full")
            requested = str(ipaddress.ip_address(value))
        spec["clusterIPs"] = [requested, *ips[1:]]
        spec["clusterIP"] = requested

    # --- node ports -----------------------------------------------------------------------------

    def _claim_port(self, svc: dict[str, JSON], index: int, port: int) -> None:
        """portallocator Allocate: 422 naming ``spec.ports[i].nodePort`` on failure."""
        why = self._ports.claim(port)
        if why:
            low, high = self._ports.base, self._ports.base + self._ports.size - 1
            reason = "provided port is already allocated" if why == "taken" else (
                f"provided port is not in the valid range. The range of valid ports is "
                f"{low}-{high}")
            raise _fail(svc, [invalid(f"spec.ports[{index}].nodePort", port, reason)])

    def _next_port(self) -> int:
        value = self._ports.claim_next(self._rng)
        if value is None:
            raise internal_error("failed to allocate a nodePort: range is full")
        return value

    def _init_node_ports(self, svc: dict[str, JSON], spec: dict[str, JSON]) -> None:
        """alloc.go initNodePorts: ports sharing a ``port`` number share a nodePort."""
        by_service_port: dict[JSON, int] = {}
        ports = _ports(spec)
        for i, port in enumerate(ports):
            if not _node_port(port) and not _should_allocate(spec):
                continue
            known = by_service_port.get(port.get("port"), 0)
            if not known:
                requested = next((_node_port(p) for p in ports[i:] if _node_port(p)
                                  and p.get("port") == port.get("port")), 0)
                if requested:
                    self._claim_port(svc, i, requested)
                port["nodePort"] = requested or self._next_port()
                by_service_port[port.get("port")] = port["nodePort"]
            elif not _node_port(port):
                port["nodePort"] = known
            elif _node_port(port) != known:
                self._claim_port(svc, i, _node_port(port))

    def _update_node_ports(self, svc: dict[str, JSON], spec: dict[str, JSON],
                           old_spec: Mapping[str, JSON]) -> None:
        """alloc.go updateNodePorts: ports the old object held are reused without a check."""
        held = _used_node_ports(old_spec)
        for i, port in enumerate(_ports(spec)):
            wanted = _node_port(port)
            if not wanted and _should_allocate(spec):
                port["nodePort"] = self._next_port()
            elif wanted and wanted not in held:
                held.add(wanted)
                self._claim_port(svc, i, wanted)


def _copy_with_spec(svc: Mapping[str, JSON]) -> tuple[dict[str, JSON], dict[str, JSON]]:
    out = copy.deepcopy(dict(svc))
    if out.get("spec") is None:
        out["spec"] = {}
    return out, _spec(out)  # a malformed spec is left for validation (a detached {} here)


def _should_allocate(spec: Mapping[str, JSON]) -> bool:
    # alloc.go shouldAllocateNodePorts (allocateLoadBalancerNodePorts defaults to true)
    kind = spec.get("type")
    return kind == "NodePort" or (
        kind == "LoadBalancer" and spec.get("allocateLoadBalancerNodePorts") is not False)


def _default_family_policy(spec: dict[str, JSON], old_spec: Mapping[str, JSON] | None) -> None:
    """initIPFamilyFields: the policy a body left out; single-stack trims on update."""
    if spec.get("ipFamilyPolicy") is None:
        if old_spec is not None and old_spec.get("ipFamilyPolicy") is not None:
            spec["ipFamilyPolicy"] = old_spec["ipFamilyPolicy"]
        elif spec.get("clusterIP") == _NONE and not spec.get("selector"):
            spec["ipFamilyPolicy"] = "RequireDualStack"  # headless + selectorless
        else:
            spec["ipFamilyPolicy"] = "SingleStack"
    if old_spec is not None and spec["ipFamilyPolicy"] == "SingleStack":
        for key in ("clusterIPs", "ipFamilies"):
            value = spec.get(key)
            if isinstance(value, list) and len(value) > 1 and value == old_spec.get(key):
                spec[key] = value[:1]


def _cluster_ip_field_errors(spec: Mapping[str, JSON]) -> list[FieldError]:
    """The parts of validation.ValidateServiceClusterIPsRelatedFields allocation relies on."""
    ips, errors = _ips(spec), []
    cluster_ip = spec.get("clusterIP") or ""
    if cluster_ip and not ips:
        errors.append(FieldError("FieldValueRequired", "spec.clusterIPs"))
    elif (cluster_ip and ips[0] != cluster_ip) or (not cluster_ip and ips):
        errors.append(invalid("spec.clusterIPs", go_string_slice(ips),
                              "first value must match `clusterIP`" if cluster_ip else
                              "must be empty when `clusterIP` is not specified"))
    checks: list[tuple[str, JSON, tuple[str, ...]]] = [
        ("spec.ipFamilyPolicy", spec.get("ipFamilyPolicy"), _POLICIES)]
    checks += [(f"spec.ipFamilies[{i}]", f, _FAMILIES)
               for i, f in enumerate(spec.get("ipFamilies") or [])]
    errors += [FieldError("FieldValueNotSupported", path, value, "supported values: " + ", ".join(
        f'"{c}"' for c in choices)) for path, value, choices in checks if value not in choices]
    for i, ip in enumerate(ips):
        if i == 0 and ip == _NONE and len(ips) > 1:
            errors.append(invalid("spec.clusterIPs", go_string_slice(ips),
                                  "'None' must be the first and only value"))
        elif not (i == 0 and ip == _NONE) and _ip_value(ip) is None:
            errors.append(invalid(f"spec.clusterIPs[{i}]", ip, _BAD_IP))
    if len(ips) > 2:
        errors.append(invalid("spec.clusterIPs", go_string_slice(ips),
                              "may only hold up to 2 values"))
    return errors


def _changed_cluster_ip_errors(old_spec: Mapping[str, JSON],
                               spec: Mapping[str, JSON]) -> list[FieldError]:
    """validation.validateUpgradeDowngradeClusterIPs, the single-stack cases."""
    old_ips, ips = _ips(old_spec), _ips(spec)
    if "ExternalName" in (old_spec.get("type"), spec.get("type")) or old_ips == ips:
        return []
    value = go_string_slice(ips)
    if len(old_ips) == len(ips):
        return [invalid(f"spec.clusterIPs[{i}]", value, "may not change once set")
                for i, ip in enumerate(old_ips) if ip != ips[i]]
    if not ips:
        return [invalid("spec.clusterIPs[0]", value, "primary clusterIP can not be unset")]
    if old_ips and ips[0] != old_ips[0]:
        return [invalid("spec.clusterIPs[0]", value, "may not change once set")]
    return []


def _normalize_cluster_ips(old_spec: Mapping[str, JSON] | None, spec: dict[str, JSON]) -> None:
    """service/strategy.go NormalizeClusterIPs: keep clusterIP and clusterIPs in step."""
    cluster_ip = spec.get("clusterIP") or ""
    if old_spec is None:
        if cluster_ip and not _ips(spec):
            spec["clusterIPs"] = [cluster_ip]
        return
    old_ip, same = old_spec.get("clusterIP") or "", _ips(old_spec) == _ips(spec)
    if _ips(old_spec) and not _ips(spec) and old_ip == cluster_ip:
        spec["clusterIPs"] = _ips(old_spec)
    elif old_ip != cluster_ip and same and old_ip and not cluster_ip:
        spec.pop("clusterIPs", None)
    elif old_ip != cluster_ip and same and cluster_ip:
        spec["clusterIPs"] = [cluster_ip]


def _patch_allocated_values(old_spec: Mapping[str, JSON], spec: dict[str, JSON]) -> None:
    """storage.go patchAllocatedValues: a body may omit what the server allocated."""
    if "ExternalName" not in (old_spec.get("type"), spec.get("type")):
        if not spec.get("clusterIP") and old_spec.get("clusterIP"):
            spec["clusterIP"] = old_spec["clusterIP"]
        if not _ips(spec) and _ips(old_spec):
            spec["clusterIPs"] = _ips(old_spec)
    if _needs_node_ports(old_spec) and _needs_node_ports(spec):
        used = _used_node_ports(old_spec) & _used_node_ports(spec)
        by_name = {p.get("name") or "": _node_port(p) for p in _ports(old_spec)}
        for port in _ports(spec):
            previous = by_name.get(port.get("name") or "", 0)
            if not _node_port(port) and previous and previous not in used:
                port["nodePort"] = previous


def _drop_type_dependent_fields(old_spec: Mapping[str, JSON], spec: dict[str, JSON],
                                svc: dict[str, JSON]) -> None:
    """service/strategy.go dropTypeDependentFields: wipe what the new type does not use when
    the body still carries the old values unchanged."""
    if old_spec.get("type") != "ExternalName" and spec.get("type") == "ExternalName":
        if _ips(spec) == _ips(old_spec):
            spec.pop("clusterIP", None)
            spec.pop("clusterIPs", None)
        for key in ("ipFamilies", "ipFamilyPolicy"):
            if spec.get(key) == old_spec.get(key):
                spec.pop(key, None)
    if _needs_node_ports(old_spec) and not _needs_node_ports(spec) and _used_node_ports(
            spec) <= _used_node_ports(old_spec):
        for port in _ports(spec):
            port.pop("nodePort", None)
    if old_spec.get("type") == "LoadBalancer" and spec.get("type") != "LoadBalancer":
        _drop_load_balancer_fields(old_spec, spec)
    if _externally_accessible(old_spec) and not _externally_accessible(spec) and spec.get(
            "externalTrafficPolicy") == old_spec.get("externalTrafficPolicy"):
        spec.pop("externalTrafficPolicy", None)
    if spec.get("type") != "LoadBalancer" and isinstance(svc.get("status"), dict):
        svc["status"]["loadBalancer"] = {}  # not a load balancer (any more): no LB status


def _drop_load_balancer_fields(old_spec: Mapping[str, JSON], spec: dict[str, JSON]) -> None:
    for key in ("allocateLoadBalancerNodePorts", "loadBalancerClass"):
        if spec.get(key) == old_spec.get(key):
            spec.pop(key, None)


def _externally_accessible(spec: Mapping[str, JSON]) -> bool:
    # api/v1/service ExternallyAccessible
    return _needs_node_ports(spec) or (
        spec.get("type") == "ClusterIP" and bool(spec.get("externalIPs")))


__all__ = ["DEFAULT_NODE_PORT_RANGE", "DEFAULT_SERVICE_CIDR", "IPS", "PORTS", "ServiceAllocator",
           "holdings"]
