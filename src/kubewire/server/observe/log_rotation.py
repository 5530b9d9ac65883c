"""When and how the audit log rotates, as kube-apiserver's (lumberjack v2, which
``--audit-log-maxsize``, ``--audit-log-maxbackup`` and ``--audit-log-maxage`` configure):
pure decisions, the file work is ``audit_log.AuditFile``'s.

- A write that would take the file past ``max_bytes`` first moves it aside as
  ``NAME-2006-01-02T15-04-05.000.EXT`` (UTC) and starts a new file (``needs_rotation``).
- After a rotation, backups beyond the newest ``max_backups`` and backups older than
  ``max_age_days`` are removed (``expired``); 0 keeps them all, as in lumberjack.
- ``--audit-log-maxsize`` is in megabytes (2^20 bytes); 0 is lumberjack's default, 100.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

DEFAULT_MAX_SIZE_MB = 100  # lumberjack's when --audit-log-maxsize is 0
MEGABYTE = 1024 * 1024
_STAMP = "%Y-%m-%dT%H-%M-%S"


@dataclass(frozen=True, slots=True)
class Rotation:
    max_size_mb: int = 0
    max_backups: int = 0
    max_age_days: int = 0

    @property
    def max_bytes(self) -> int:
        return (self.max_size_mb or DEFAULT_MAX_SIZE_MB) * MEGABYTE

    def needs_rotation(self, size: int, write: int) -> bool:
        """Whether writing ``write`` bytes to a file of ``size`` must start a new file."""
        return size > 0 and size + write > self.max_bytes

    def expired(self, backups: Iterable[tuple[Path, datetime.datetime]],
                now: datetime.datetime) -> list[Path]:
        """The backups to remove: past the newest ``max_backups``, or older than
        ``max_age_days`` (``backups``: each file and the time in its name)."""
        newest_first = sorted(backups, key=lambda item: item[1], reverse=True)
        remove = []
        cutoff = now - datetime.timedelta(days=self.max_age_days)
        for index, (path, stamp) in enumerate(newest_first):
            if (self.max_backups and index >= self.max_backups) or (
                    self.max_age_days and stamp < cutoff):
                remove.append(path)
        return remove


def backup_name(path: Path, now: datetime.datetime) -> Path:
    """lumberjack's ``backupName``: ``audit.log`` -> ``audit-2026-11-25T23-06-21.123.log``."""
    stamp = now.astimezone(datetime.UTC).strftime(_STAMP) + f".{now.microsecond // 1000:03d}"
    return path.with_name(f"{path.stem}-{stamp}{path.suffix}")


def backup_time(path: Path, name: Path) -> datetime.datetime | None:
    """The time in ``name`` if it is a backup of ``path``, else None."""
    prefix, suffix = f"{path.stem}-", path.suffix
    text = name.name
    if not text.startswith(prefix) or not text.endswith(suffix) or len(text) <= len(prefix):
        return None
    stamp = text[len(prefix):len(text) - len(suffix)] if suffix else text[len(prefix):]
    try:
        whole, _, millis = stamp.rpartition(".")
        moment = datetime.datetime.strptime(whole, _STAMP).replace(tzinfo=datetime.UTC)
        return moment + datetime.timedelta(milliseconds=int(millis))
    except ValueError:
        return None
