"""``--merge-kubeconfig``: put a server's cluster, user and context into the user's kubeconfig.

Never done by default. Which file: the one ``kubectl config set-context`` would write
(client-go's ``PathOptions.GetDefaultFilename``): with ``KUBECONFIG`` naming one file, that
file; naming several, the first that exists, else the last; without it ``~/.kube/config``.
Entries of the same names (``kubewire`` cluster and context, ``kubewire-admin`` user) are
replaced, everything else is kept as it was, and the context becomes current, as ``kind create
cluster`` does. The file is replaced atomically and keeps its mode (0600 if new: it holds a key).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml

_SECTIONS = ("clusters", "users", "contexts")


def kubeconfig_target(environ: Mapping[str, str], home: Path) -> Path:
    """The kubeconfig file to write, as kubectl picks it."""
    files = [name for name in environ.get("KUBECONFIG", "").split(os.pathsep) if name]
    if len(files) == 1:
        return Path(files[0])
    if files:
        return next((Path(name) for name in files if Path(name).exists()), Path(files[-1]))
    return home / ".kube" / "config"


def merged(existing: dict[str, Any] | None, ours: dict[str, Any]) -> dict[str, Any]:
    """``existing`` with every named entry of ``ours`` added or replaced, and ``ours``'s
    current context made current."""
    out = dict(existing or {})
    out.setdefault("apiVersion", "v1")
    out.setdefault("kind", "Config")
    for section in _SECTIONS:
        names = {entry["name"] for entry in ours.get(section) or ()}
        kept = [entry for entry in out.get(section) or ()
                if not (isinstance(entry, dict) and entry.get("name") in names)]
        out[section] = [*kept, *(ours.get(section) or ())]
    out["current-context"] = ours["current-context"]
    return out


def merge_into(target: Path, ours_text: str) -> str:
    """Merge the kubeconfig ``ours_text`` into ``target``; the context's name."""
    ours = yaml.safe_load(ours_text)
    existing = None
    mode = 0o600
    if target.exists():
        existing = yaml.safe_load(target.read_text()) or None
        if existing is not None and not isinstance(existing, dict):
            raise ValueError(f"{target} is not a kubeconfig")
        mode = target.stat().st_mode & 0o777
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.kubewire-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    try:
        with os.fdopen(fd, "w") as out:
            yaml.safe_dump(merged(existing, ours), out, sort_keys=False)
        tmp.replace(target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return str(ours["current-context"])
