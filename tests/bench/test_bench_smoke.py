"""Benchmarks are not tests: run each once with tiny sizes, only to prove it still works.

Each benchmark's own command runs in a subprocess (servers, readers and writers are processes
of their own) and must leave a well-formed result; nothing here looks at the numbers.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest
from bench.report import ORDER

REPO = Path(__file__).resolve().parents[2]
BENCHMARKS = ORDER  # every benchmark the suite runs
RUN_TIMEOUT_S = 120


def run_module(module: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT_S, check=False)


def is_number(value: object) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


@pytest.fixture(scope="module")
def out_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("bench-results")


@pytest.mark.parametrize("name", BENCHMARKS)
def test_benchmark_command_leaves_a_well_formed_result(name: str, out_dir: Path) -> None:
    if importlib.util.find_spec(f"bench.{name}") is None:
        pytest.skip(f"bench.{name} is not written yet (the suite keeps its slot)")
    done = run_module(f"bench.{name}", "--smoke", "--out", str(out_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "ResourceWarning" not in done.stderr
    result = json.loads((out_dir / f"{name}.json").read_text())
    assert result["name"] == name
    assert result["rows"]
    for row in result["rows"]:
        for side in ("ours", "reference"):
            assert is_number(row[side]["median"]), (side, row)
            assert row[side]["min"] <= row[side]["median"] <= row[side]["max"]
        # tiny sizes may leave a reference at 0 (RSS moves in pages): the ratio is then NaN
        assert isinstance(row["ratio"]["median"], float)
        assert len(row["samples"]["ours"]) == len(row["samples"]["reference"]) >= 1
        assert row["met"] in (True, False, None)


def test_run_all_renders_results_and_plot_from_saved_results(out_dir: Path) -> None:
    done = run_module("bench", "--render-only", "--out", str(out_dir))
    assert done.returncode == 0, done.stderr[-3000:]
    text = (out_dir / "RESULTS.md").read_text()
    assert "## Machine" in text
    assert "| benchmark | case |" in text
    for name in ("Fan-out", "Idle watcher memory", "Write path", "latency", "Start-up",
                 "Client decode", "Initial sync", "PATCH-driven fan-out", "Creates and PATCHes",
                 "Memory per stored object"):
        assert name in text
