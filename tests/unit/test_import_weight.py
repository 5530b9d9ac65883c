"""What ``import kubewire.server.app`` leaves for later: the aiohttp client (only a CRD's
conversion webhook call needs it, ~200 ms to import), the protobuf runtime (only CEL's object
types need it, ~20 ms) and ``go_text``'s JSON-error patterns (only
a malformed body's error text needs them, ~60 ms to compile); and what it made is frozen out of
the garbage collector's passes (a full pass over it took ~15 ms of a process's first server
start). A fresh interpreter is asked, as this process has imported both long since."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"
PROBE = """
import gc, json, sys
before = gc.get_freeze_count()
import kubewire.server.app
from kubewire import go_text
print(json.dumps({"aiohttp": sorted(m for m in sys.modules if m.split(".")[0] == "aiohttp"),
                  "protobuf": sorted(m for m in sys.modules if m.startswith("google.protobuf")),
                  "patterns": go_text._flat_runs.cache_info().currsize,
                  "frozen": gc.get_freeze_count() - before > 10_000}))
"""


def test_the_server_import_leaves_what_few_need_for_later_and_freezes_itself() -> None:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True,
                          check=True, timeout=60, env={"PYTHONPATH": str(SRC)})
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"aiohttp": [], "protobuf": [], "patterns": 0, "frozen": True}


def test_the_json_error_patterns_word_an_error_once_compiled() -> None:
    from kubewire.go_text import go_json_error

    assert go_json_error(b'{"a": [1, 2, {"b": true}], "c": x}') == (
        "invalid character 'x' looking for beginning of value")
    assert go_json_error(b'[1, 2, 3,]') == "invalid character ']' looking for beginning of value"
