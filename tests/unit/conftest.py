"""Fixtures shared by the unit tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from kubewire.storage.base import Retention
from kubewire.storage.sqlite.store import SQLiteStore


@pytest.fixture
async def store(tmp_path: Path) -> AsyncIterator[SQLiteStore]:
    """A fresh SQLite store that keeps its whole change log (modules may define their own)."""
    s = SQLiteStore(tmp_path / "db.sqlite", durability="normal",
                    retention=Retention(max_changes=None, max_age_s=None))
    await s.open()
    yield s
    await s.close()
