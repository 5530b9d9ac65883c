"""The short log a simulated kubelet serves for ``pods/<name>/log``.

Pods on kubewire's simulated nodes (``kubewire.cluster.nodes``; their Node's
``spec.providerID`` starts with ``kubewire://``) run nothing, so their log is made from what the
pod's status records: which container, image and node, when it started and, if it has, how it
ended. The kubelet's options apply as the kubelet applies them: ``timestamps`` prefixes each line
with its RFC 3339 nanosecond time, ``sinceSeconds``/``sinceTime`` drop older lines, ``tailLines``
keeps the last lines, ``limitBytes`` cuts the bytes; ``previous`` reads the last terminated run.
Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

SIMULATED_PROVIDER = "kubewire://"


def is_simulated(node: Mapping[str, Any]) -> bool:
    spec = node.get("spec") or {}
    return isinstance(spec, dict) and str(spec.get("providerID") or "").startswith(
        SIMULATED_PROVIDER)


def _time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def _nano(when: datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%S.") + f"{when.microsecond * 1000:09d}Z"


def _run_lines(pod: Mapping[str, Any], status: Mapping[str, Any],
               state: Mapping[str, Any]) -> list[tuple[datetime, str]]:
    meta = pod.get("metadata") or {}
    node = (pod.get("spec") or {}).get("nodeName", "")
    name = status.get("name", "")
    running, ended = state.get("running"), state.get("terminated")
    began = _time((running or ended or {}).get("startedAt")) or datetime.now(UTC)
    lines = [(began, f'kubewire: simulated container "{name}" of pod '
                     f'{meta.get("namespace", "")}/{meta.get("name", "")} on node {node}'),
             (began, f"image {status.get('image', '')} ({status.get('imageID', '')})"),
             (began + timedelta(microseconds=1), "started")]
    if isinstance(ended, dict):
        finished = _time(ended.get("finishedAt")) or began
        lines.append((finished, f"exited with code {ended.get('exitCode', 0)} "
                                f"({ended.get('reason', '')})"))
    return lines


@dataclass(frozen=True, slots=True)
class LogWindow:
    """Which part of the log, and how (the kubelet's reading of ``PodLogOptions``)."""

    previous: bool = False
    timestamps: bool = False
    since: datetime | None = None
    tail_lines: int | None = None
    limit_bytes: int | None = None


def simulated_log(pod: Mapping[str, Any], container: str, window: LogWindow) -> bytes:
    """The log of ``container`` (the caller has checked the kubelet would serve one)."""
    previous, timestamps, since = window.previous, window.timestamps, window.since
    tail_lines, limit_bytes = window.tail_lines, window.limit_bytes
    status_of = (pod.get("status") or {})
    found: Mapping[str, Any] = next(
        (s for key in ("containerStatuses", "initContainerStatuses")
         for s in status_of.get(key) or () if s.get("name") == container), {"name": container})
    state = found.get("lastState") if previous else found.get("state")
    lines = _run_lines(pod, found, state if isinstance(state, dict) else {})
    if since is not None:
        lines = [line for line in lines if line[0] >= since]
    if tail_lines is not None:
        lines = lines[len(lines) - tail_lines:] if tail_lines < len(lines) else lines
    text = "".join(f"{_nano(when)} {line}\n" if timestamps else f"{line}\n"
                   for when, line in lines).encode()
    return text[:limit_bytes] if limit_bytes is not None else text
