"""The served process's garbage collector after ``tune_gc`` (start-up objects frozen, a larger
young generation): garbage is still collected and memory stays bounded under writes that make
and drop many objects."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from tests.reliability.proc import ServerProcess, request

CYCLE_CHECK = """
import gc, weakref
from kubewire.cli import GC_GEN0_THRESHOLD, tune_gc
tune_gc()
assert gc.get_threshold()[0] == GC_GEN0_THRESHOLD and gc.get_freeze_count() > 0
class Node:
    pass
alive = weakref.WeakSet()
peak = 0
for i in range(200_000):
    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the collector frees it
    alive.add(a)
    peak = max(peak, len(alive))
print(peak, len(alive))
"""


def test_cycles_are_still_collected_after_tuning() -> None:
    done = subprocess.run([sys.executable, "-c", CYCLE_CHECK], capture_output=True, text=True,
                          check=True, timeout=120)
    peak, _ = map(int, done.stdout.split())
    # 200,000 cycles made; at most about one young generation's worth is ever uncollected
    assert peak < 20_000, peak


def _gc_collections(server: ServerProcess) -> dict[str, float]:
    conn = server.connection()
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    return {m[1]: float(m[2]) for m in
            re.finditer(r'python_gc_collections_total\{generation="(\d)"\} (\S+)', text)}


def test_rss_stays_bounded_over_rounds_of_creates_and_deletes(tmp_path: Path) -> None:
    server = ServerProcess(tmp_path / "data", "--watch-cache-size", "100").start()
    try:
        conn = server.connection()
        path = "/api/v1/namespaces/default/configmaps"
        rss = []
        for round_ in range(5):
            for i in range(300):
                body = {"apiVersion": "v1", "kind": "ConfigMap",
                        "metadata": {"name": f"c{i}", "labels": {"round": str(round_)}},
                        "data": {"k": "v" * 500}}
                assert request(conn, "POST", path, body).status == 201
                assert request(conn, "PATCH", f"{path}/c{i}", {"data": {"k": "w"}},
                               "application/merge-patch+json").status == 200
            for i in range(300):
                assert request(conn, "DELETE", f"{path}/c{i}").status == 200
            rss.append(server.rss_kb())
        conn.close()
        collections = _gc_collections(server)
        assert collections["0"] > 0  # the young generation is collected as it fills
        # after the first two rounds (caches, pools, the ring filled) a round adds no memory
        assert rss[4] - rss[1] < 6 * 1024, rss
    finally:
        server.stop()
