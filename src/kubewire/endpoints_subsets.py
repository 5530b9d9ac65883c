"""core/v1 Endpoints subsets in kube's canonical form (``pkg/api/v1/endpoints``
``RepackSubsets``), shared by the API server (the Endpoints strategy's ``Canonicalize``) and
the Endpoints controller (pure).

Repacking groups addresses by the set of ports they offer with the same readiness: every
(address, port) pair of the input is collected (an address is its IP and its pod's UID; one
ready on a port stays ready there), and addresses offering the same ports with the same
readiness share one subset. A subset without ports keeps its addresses under no port.
Addresses are sorted by IP and UID as kube sorts them; kube orders ports and subsets by a hash
of Go's object dump, which no client relies on, so kubewire orders them by their fields.
Written by hand: kube's algorithm, no library holds it.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any

Obj = dict[str, Any]


def _address_key(address: Mapping[str, Any]) -> tuple[str, str]:
    return str(address.get("ip", "")), str((address.get("targetRef") or {}).get("uid", ""))


def _port_key(port: Mapping[str, Any]) -> tuple[str, int, str, str]:
    return (str(port.get("name") or ""), int(port.get("port") or 0),
            str(port.get("protocol") or ""), str(port.get("appProtocol") or ""))


PortKey = tuple[str, int, str, str]
AddressKey = tuple[str, str]
_SENTINEL: PortKey = ("", -1, "", "")  # a subset without ports


def _map_by_port(subsets: Sequence[Mapping[str, Any]], addresses: dict[AddressKey, Any],
                 port_objs: dict[PortKey, Obj]) -> dict[PortKey, dict[AddressKey, bool]]:
    """``mapAddressesByPort``: each port's addresses and their readiness (ready wins)."""
    by_port: dict[PortKey, dict[AddressKey, bool]] = {}
    for subset in subsets:
        ports: list[Mapping[str, Any] | None] = [
            p for p in subset.get("ports") or [] if isinstance(p, Mapping)]
        for port in ports or [None]:
            key = _SENTINEL if port is None else _port_key(port)
            if port is not None:
                port_objs[key] = dict(port)
            ready_of = by_port.setdefault(key, {})
            for field, ready in (("addresses", True), ("notReadyAddresses", False)):
                for address in subset.get(field) or []:
                    akey = _address_key(address)
                    addresses.setdefault(akey, address)
                    ready_of[akey] = ready_of.get(akey, False) or ready
    return by_port


def repack(subsets: Sequence[Mapping[str, Any]]) -> list[Obj]:
    """``RepackSubsets``: addresses grouped by the ports they offer, readiness kept per port."""
    addresses: dict[AddressKey, Mapping[str, Any]] = {}
    port_objs: dict[PortKey, Obj] = {}
    by_port = _map_by_port(subsets, addresses, port_objs)
    groups: dict[frozenset[tuple[AddressKey, bool]], list[PortKey]] = {}
    for key, ready_of in by_port.items():
        group = groups.setdefault(frozenset(ready_of.items()), [])
        if key != _SENTINEL:
            group.append(key)
    final: list[Obj] = []
    for members, port_keys in groups.items():
        subset: Obj = {}
        for field, ready in (("addresses", True), ("notReadyAddresses", False)):
            chosen = sorted(k for k, r in members if r is ready)
            if chosen:
                subset[field] = [copy.deepcopy(dict(addresses[k])) for k in chosen]
        if port_keys:
            subset["ports"] = [port_objs[k] for k in sorted(port_keys)]
        final.append(subset)
    return sorted(final, key=_subset_order)


def _subset_order(subset: Mapping[str, Any]) -> tuple[Any, ...]:
    return (tuple(_port_key(p) for p in subset.get("ports") or []),
            tuple(_address_key(a) for a in subset.get("addresses") or []),
            tuple(_address_key(a) for a in subset.get("notReadyAddresses") or []))


