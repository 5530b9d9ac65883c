"""``kubewire``'s flags: every one says what it does and its default; durations read as Go and
kube write them; ``--merge-kubeconfig`` picks the file kubectl would write."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from kubewire.cli import build_parser, parse_duration
from kubewire.server.daemon.kubeconfig_merge import kubeconfig_target, merged
from kubewire.server.daemon.lock import DataDirInUse, DataDirLock, Holder, holder_of, parse_holder


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {"": parser, **sub.choices}


@pytest.mark.parametrize("command", sorted(_commands()))
def test_every_flag_has_help_with_its_default(command: str) -> None:
    parser = _commands()[command]
    formatter = parser._get_formatter()
    for action in parser._actions:
        skipped = argparse._HelpAction | argparse._VersionAction | argparse._SubParsersAction
        if action.help == argparse.SUPPRESS or isinstance(action, skipped):
            continue
        text = formatter._expand_help(action) if action.help else ""
        assert text, f"{command} {action.option_strings or action.dest}: no help"
        if action.option_strings:
            assert "default" in text, f"{command} {action.option_strings}: {text}"


@pytest.mark.parametrize(("text", "days", "seconds"), [
    ("90s", False, 90.0), ("1h30m", False, 5400.0), ("1m0s", False, 60.0), ("1800", False, 1800.0),
    ("2.5", False, 2.5), ("7d", True, 7 * 86400.0), ("1d12h", True, 1.5 * 86400),
    ("0", True, 0.0), ("36h", True, 36 * 3600.0),
])
def test_durations(text: str, days: bool, seconds: float) -> None:
    assert parse_duration(text, days=days) == seconds


@pytest.mark.parametrize(("text", "message"), [
    ("7d", 'time: unknown unit "d" in duration "7d"'),  # no kube duration flag takes days
    ("soon", 'time: invalid duration "soon"'),
])
def test_bad_durations(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_duration(text)


def test_duration_flags_take_go_durations() -> None:
    args = build_parser().parse_args([
        "serve", "--request-timeout", "1m30s", "--bookmark-interval", "5s",
        "--min-request-timeout", "900", "--history-max-age", "2d", "--pod-grace-cap", "0"])
    assert (args.request_timeout, args.bookmark_interval, args.min_request_timeout,
            args.history_max_age, args.pod_grace_cap) == (90.0, 5.0, 900.0, 172800.0, 0.0)


def test_kubeconfig_target_is_the_file_kubectl_writes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert kubeconfig_target({}, home) == home / ".kube" / "config"
    assert kubeconfig_target({"KUBECONFIG": str(a)}, home) == a
    several = os.pathsep.join(map(str, (a, b, c)))
    assert kubeconfig_target({"KUBECONFIG": several}, home) == c  # none exists: the last
    b.write_text("")
    assert kubeconfig_target({"KUBECONFIG": several}, home) == b  # the first that exists


def test_merged_replaces_its_own_entries_and_keeps_the_rest() -> None:
    ours = {"clusters": [{"name": "kubewire", "cluster": {"server": "https://new"}}],
            "users": [{"name": "kubewire-admin", "user": {}}],
            "contexts": [{"name": "kubewire", "context": {"cluster": "kubewire"}}],
            "current-context": "kubewire"}
    existing = {"apiVersion": "v1", "kind": "Config", "current-context": "prod",
                "preferences": {"colors": True},
                "clusters": [{"name": "kubewire", "cluster": {"server": "https://old"}},
                             {"name": "prod", "cluster": {"server": "https://prod"}}],
                "contexts": [{"name": "prod", "context": {"cluster": "prod"}}]}
    out = merged(existing, ours)
    assert out["current-context"] == "kubewire"
    assert out["preferences"] == {"colors": True}
    assert out["clusters"] == [{"name": "prod", "cluster": {"server": "https://prod"}},
                               {"name": "kubewire", "cluster": {"server": "https://new"}}]
    assert [c["name"] for c in out["contexts"]] == ["prod", "kubewire"]
    assert merged(None, ours)["kind"] == "Config"


def test_the_lock_names_its_holder_and_frees_on_release(tmp_path: Path) -> None:
    assert holder_of(tmp_path) is None
    lock = DataDirLock.acquire(tmp_path / "data", "serve")
    assert holder_of(tmp_path / "data") == Holder(os.getpid(), "serve")
    with pytest.raises(DataDirInUse, match=rf"in use by kubewire serve \(pid {os.getpid()}\)"):
        DataDirLock.acquire(tmp_path / "data", "repair")  # another open file: flock refuses
    lock.release()
    assert holder_of(tmp_path / "data") is None
    DataDirLock.acquire(tmp_path / "data", "repair").release()
    assert parse_holder("") is None
    assert parse_holder("12 serve\n") == Holder(12, "serve")
