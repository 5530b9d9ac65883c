"""The httplog line's text: each value quoted as Go's ``%q`` (``go_quote``), whether it takes the
fast path (plain printable ASCII, checked once for all values) or quotes value by value."""

from __future__ import annotations

import pytest

from kubewire.go_text import go_quote
from kubewire.server.observe.httplog import Entry, go_duration

AGENTS = ["kubectl/v1.32.0 (linux/amd64) kubernetes/abc", "", 'say "hi"', "back\\slash",
          "tab\there", "naïve/1.0", "bell\x07", "emoji 😀", "del\x7f"]


def reference(verb: str, uri: str, seconds: float, agent: str, audit: str, src: str,
              status: int | None) -> str:
    ended = "hijacked=true" if status is None else f"resp={status}"
    return (f'"HTTP" verb={go_quote(verb)} URI={go_quote(uri)} '
            f"latency={go_quote(go_duration(seconds))} userAgent={go_quote(agent)} "
            f"audit-ID={go_quote(audit[:64])} srcIP={go_quote(src)} {ended}")


@pytest.mark.parametrize("agent", AGENTS)
@pytest.mark.parametrize("status", [200, 404, None])
def test_line_quotes_as_go(agent: str, status: int | None) -> None:
    for seconds in (0.0, 850e-9, 12.5e-6, 0.001234567, 2.5):
        args = ("PATCH", "/api/v1/namespaces/a/pods/b?dryRun=All", seconds, agent,
                "7a0c6f0e-9a0d-4c8a-b7c4-2b6a1f6b1d2e", "[::1]:53124", status)
        assert Entry(*args).line() == reference(*args)


def test_long_audit_id_truncated_and_odd_one_quoted() -> None:
    for audit in ("x" * 100, 'a"b' * 30, "ü" * 70):
        args = ("GET", "/api", 0.5, "a", audit, "127.0.0.1:1", 200)
        assert Entry(*args).line() == reference(*args)


def test_a_new_audit_id_is_a_random_version_4_uuid() -> None:
    import uuid

    from kubewire.server.observe.httplog import new_audit_id

    ids = [new_audit_id() for _ in range(500)]
    assert len(set(ids)) == 500
    for text in ids:
        parsed = uuid.UUID(text)
        assert (parsed.version, parsed.variant, str(parsed)) == (4, uuid.RFC_4122, text)
    assert {text[19] for text in ids} == set("89ab")  # every variant nibble occurs
