"""Keyword options of the ``Api`` verbs, as TypedDicts (``**opts: Unpack[ListParams]``).

Names are Python spellings of kube's query parameters; ``None`` leaves a parameter out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from kubewire.client.resource import PatchType, PropagationPolicy, Selector


class KindParams(TypedDict, total=False):
    """Which kind a dict-mode ``Api`` serves: ``api_version`` plus ``kind`` or ``plural``
    (and ``namespaced`` for kinds kubewire does not know)."""

    api_version: str
    kind: str
    plural: str
    namespaced: bool


class ListParams(TypedDict, total=False):
    label_selector: Selector | None
    field_selector: Selector | None
    limit: int  # page size; pages are followed until the end
    resource_version: str | None
    resource_version_match: str | None


class WriteParams(TypedDict, total=False):
    field_manager: str | None
    dry_run: bool


class PatchParams(TypedDict, total=False):
    type: PatchType  # default: strategic merge (status: merge)
    field_manager: str | None
    force: bool | None
    dry_run: bool


class DeleteParams(TypedDict, total=False):
    grace_period_seconds: int | None
    propagation_policy: PropagationPolicy | str | None
    preconditions: Mapping[str, str] | None  # {"uid": ..., "resourceVersion": ...}
    dry_run: bool


class DeleteCollectionParams(TypedDict, total=False):
    label_selector: Selector | None
    field_selector: Selector | None
    grace_period_seconds: int | None
    propagation_policy: PropagationPolicy | str | None


class WatchParams(TypedDict, total=False):
    label_selector: Selector | None
    field_selector: Selector | None
    resource_version: str | None  # watch after this revision ("" / "0": initial events)
    allow_bookmarks: bool  # pass BOOKMARK events on (they are always requested)
    send_initial_events: bool | None  # KEP-3157 streaming list before live events
    timeout_seconds: int | None  # the watch ends after this; None: runs until closed
