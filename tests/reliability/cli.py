"""``python -m tests.reliability.cli [crash|stuck|race|hostile|...|all] [--long]``: run the
reliability harnesses and print one line per property with its figures; exit 1 if any property
failed.

``hostile`` runs every attack of the hostile-client suite (``hostile-<attack>`` runs one), a line
each. ``make reliability`` runs the long forms; the test suite runs the short ones
(tests/reliability/test_crash_safety.py, test_slow_consumers.py, test_concurrency.py,
test_hostile_attacks.py).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from tests.reliability import crash, race, stuck
from tests.reliability.hostile.harness import run_attack
from tests.reliability.hostile.suite import ATTACKS


class Report(Protocol):
    problems: list[str]

    def line(self) -> str: ...


def _crash(long: bool, root: Path, seed: int | None) -> Report:
    return crash.run_crash(crash.CrashConfig(**crash.main_args(long, root / "crash", seed)),
                           _log)


def _stuck(long: bool, root: Path, seed: int | None) -> Report:
    return stuck.run_stuck(stuck.StuckConfig(**stuck.main_args(long, root / "stuck")), _log)


def _catch_up(start: str) -> Callable[[bool, Path, int | None], Report]:
    def run(long: bool, root: Path, seed: int | None) -> Report:
        return stuck.run_stuck_replay(
            stuck.ReplayConfig(**stuck.replay_args(long, root / f"catch-up-{start}", start)), _log)
    return run


def _race(long: bool, root: Path, seed: int | None) -> Report:
    return race.run_race(race.RaceConfig(**race.main_args(long, root / "race")), _log)


def _hostile(name: str) -> Callable[[bool, Path, int | None], Report]:
    def run(long: bool, root: Path, seed: int | None) -> Report:
        return run_attack(ATTACKS[name], long, root / "hostile", _log)
    return run


RUNS: dict[str, Callable[[bool, Path, int | None], Report]] = {
    "crash": _crash, "stuck": _stuck, "catch-up-log": _catch_up("log"),
    "catch-up-ring": _catch_up("ring"), "catch-up-initial": _catch_up("initial"),
    "race": _race, **{f"hostile-{name}": _hostile(name) for name in ATTACKS}}
GROUPS = {"all": list(RUNS), "hostile": [name for name in RUNS if name.startswith("hostile-")]}


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.reliability.cli")
    parser.add_argument("runs", nargs="*", default=["all"], choices=[*RUNS, *GROUPS])
    parser.add_argument("--long", action="store_true", help="the long forms (make reliability)")
    parser.add_argument("--seed", type=int, default=None, help="crash run: kill timing seed")
    args = parser.parse_args(argv)
    names = list(dict.fromkeys(name for run in args.runs for name in GROUPS.get(run, [run])))
    failed = False
    with tempfile.TemporaryDirectory(prefix="kubewire-reliability-") as tmp:
        for name in names:
            began = time.monotonic()
            report = RUNS[name](args.long, Path(tmp), args.seed)
            status = "PASS" if not report.problems else "FAIL"
            print(f"{status} {report.line()} ({time.monotonic() - began:.0f} s)", flush=True)
            for problem in report.problems[:10]:
                print(f"    {problem}", flush=True)
            failed = failed or bool(report.problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
