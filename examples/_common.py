"""What every example shares: its bounds (``--max-events``, ``--timeout``) and how it names
objects (``namespace/name``). Not an example itself.

Every example stops by itself after ``--max-events`` events or ``--timeout`` seconds,
whichever comes first; ``EXAMPLES_MAX_EVENTS`` and ``EXAMPLES_TIMEOUT`` change the defaults.
"""

from __future__ import annotations

import argparse
import os
from typing import Protocol

from kubewire.models import ObjectMeta


def options(doc: str | None, *, max_events: int | None,
            timeout: float) -> argparse.ArgumentParser:
    """An argument parser with the bounds every example takes (add your own flags to it);
    ``max_events=None`` for an example that stops when its story is told."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    if max_events is not None:
        parser.add_argument("--max-events", type=int,
                            default=int(os.environ.get("EXAMPLES_MAX_EVENTS", max_events)),
                            help="stop after this many events (default %(default)s)")
    parser.add_argument("--timeout", type=float,
                        default=float(os.environ.get("EXAMPLES_TIMEOUT", timeout)),
                        help="stop after this many seconds (default %(default)s)")
    return parser


class HasMetadata(Protocol):
    @property
    def metadata(self) -> ObjectMeta | None: ...


def ref(obj: HasMetadata) -> str:
    """``namespace/name`` (or ``name`` for cluster-scoped objects), as kubectl writes it."""
    meta = obj.metadata or ObjectMeta()
    return f"{meta.namespace}/{meta.name}" if meta.namespace else f"{meta.name}"
