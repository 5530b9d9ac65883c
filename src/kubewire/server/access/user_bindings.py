"""The RBAC bindings ``kubewire user add --role`` makes, and reading a user's bindings back.

Pure: objects in, objects out (the command line sends them with the admin kubeconfig).

``--role R --namespace NS`` binds the user to kube's default ClusterRole ``R`` in ``NS`` with a
RoleBinding (as ``kubectl create rolebinding --clusterrole R --user NAME -n NS`` would);
``--role R`` alone binds it cluster-wide with a ClusterRoleBinding. The binding is named
``kubewire:user:<user>:<role>``, labelled ``app.kubernetes.io/managed-by=kubewire-user`` and
annotated with the user's name (a label value could not hold every user name), so ``revoke``
deletes exactly the bindings ``add`` made and leaves the ones written by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLES = ("view", "edit", "admin", "cluster-admin")  # kube's user-facing default ClusterRoles
MANAGED_BY = "app.kubernetes.io/managed-by"
MANAGER = "kubewire-user"
USER_ANNOTATION = "kubewire.io/user"
SELECTOR = f"{MANAGED_BY}={MANAGER}"


def binding_name(user: str, role: str) -> str:
    """A name valid for RBAC objects (a path segment: no ``/`` or ``%``) for any user name."""
    safe = user.replace("/", "-").replace("%", "-")
    return f"kubewire:user:{safe}:{role}"


def user_binding(user: str, role: str, namespace: str | None) -> dict[str, Any]:
    """The RoleBinding (with ``namespace``) or ClusterRoleBinding that binds ``user`` to the
    ClusterRole ``role``."""
    metadata: dict[str, Any] = {"name": binding_name(user, role),
                                "labels": {MANAGED_BY: MANAGER},
                                "annotations": {USER_ANNOTATION: user}}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": f"{RBAC_GROUP}/v1",
            "kind": "RoleBinding" if namespace is not None else "ClusterRoleBinding",
            "metadata": metadata,
            "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
            "subjects": [{"kind": "User", "apiGroup": RBAC_GROUP, "name": user}]}


def made_for(binding: Mapping[str, Any], user: str) -> bool:
    """Whether ``binding`` is one ``add --role`` made for ``user``."""
    meta = binding.get("metadata") or {}
    return ((meta.get("labels") or {}).get(MANAGED_BY) == MANAGER
            and (meta.get("annotations") or {}).get(USER_ANNOTATION) == user)


@dataclass(frozen=True, slots=True)
class Grant:
    """A binding that names a user, directly or through one of its groups."""

    namespace: str | None  # None: a ClusterRoleBinding
    name: str
    role_kind: str
    role: str
    via_group: str = ""  # the group the binding names, if it names the user through one

    def text(self) -> str:
        """``view in team-a``, ``cluster-admin cluster-wide``, ``Role/app in ns (via devs)``."""
        role = self.role if self.role_kind == "ClusterRole" else f"{self.role_kind}/{self.role}"
        where = f"in {self.namespace}" if self.namespace is not None else "cluster-wide"
        via = f" (via {self.via_group})" if self.via_group else ""
        return f"{role} {where}{via}"


def grants(bindings: Iterable[Mapping[str, Any]], user: str,
           groups: Sequence[str] = ()) -> list[Grant]:
    """The bindings (RoleBindings and ClusterRoleBindings, as read from the server) whose
    subjects name ``user`` or one of ``groups``, in the order given."""
    out: list[Grant] = []
    for binding in bindings:
        meta = binding.get("metadata") or {}
        ref = binding.get("roleRef") or {}
        for subject in binding.get("subjects") or ():
            kind, name = subject.get("kind"), subject.get("name")
            if kind == "User" and name == user:
                via = ""
            elif kind == "Group" and name in groups:
                via = str(name)
            else:
                continue
            out.append(Grant(meta.get("namespace"), str(meta.get("name", "")),
                             str(ref.get("kind", "")), str(ref.get("name", "")), via))
            break
    return out


def table(rows: Sequence[Sequence[str]]) -> str:
    """Rows as kubectl prints them: left-aligned columns, three spaces apart."""
    if not rows:
        return ""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["   ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
             .rstrip() for row in rows]
    return "\n".join(lines) + "\n"
