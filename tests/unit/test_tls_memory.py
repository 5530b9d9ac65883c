"""The TLS settings that keep an idle connection's server memory down (bench.idle_memory)."""

from __future__ import annotations

import platform
import ssl
import sys
from pathlib import Path

import pytest

from kubewire import cli
from kubewire.server.access.chain import TLSFiles, server_ssl_context
from kubewire.server.access.pki import ensure_server_pki


def test_server_context_sends_no_session_tickets_and_keeps_its_security(tmp_path: Path) -> None:
    pki = ensure_server_pki(tmp_path / "pki")
    ctx = server_ssl_context(TLSFiles(pki.serving_cert, pki.serving_key, pki.ca_cert, pki))
    assert ctx.num_tickets == 0
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2
    assert ctx.verify_mode == ssl.CERT_OPTIONAL


def test_a_users_malloc_threshold_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "131072")
    assert cli.mmap_tls_read_buffers() is False


@pytest.mark.skipif(not sys.platform.startswith("linux") or platform.libc_ver()[0] != "glibc",
                    reason="glibc mallopt")
def test_read_buffer_threshold_is_set_on_glibc(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_MMAP_THRESHOLD_", raising=False)
    assert cli.mmap_tls_read_buffers() is True
