"""A server started on a full disk says so in one line and exits 1 (cli.py): its store's own
data dir, after a clean shutdown or a kill, and a fresh one that needs its certificates made.

Needs a small tmpfs of its own (root); skipped where mounting is not possible.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.api_only import API_ONLY
from tests.reliability.proc import ServerProcess, call, run_cli, writer_pid

MOUNT_BYTES = 16 * 1024 * 1024  # two servers, each storing the Gateway API CRDs at its start


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    if os.geteuid() != 0:
        pytest.skip("mounting a tmpfs needs root")
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={MOUNT_BYTES}", "tmpfs",
                              str(mount)], capture_output=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode(errors='replace')}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "--lazy", str(mount)], check=False)


def _fill(disk: Path) -> None:
    fd = os.open(disk / "filler", os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        while True:
            os.write(fd, b"\0" * 65536)
    except OSError:
        pass
    finally:
        os.close(fd)
    try:  # and the last blocks, too small for a whole chunk
        fd = os.open(disk / "filler", os.O_WRONLY | os.O_APPEND)
        while True:
            os.write(fd, b"\0" * 512)
    except OSError:
        pass
    finally:
        os.close(fd)
    assert os.statvfs(disk).f_bavail == 0


def _no_writer_left(data_dir: Path) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            writer_pid(data_dir)
        except AssertionError:
            return
        assert time.monotonic() < deadline, f"a writer process is still running on {data_dir}"
        time.sleep(0.05)


def _serve_refused(data_dir: Path, *args: str) -> str:
    result = run_cli("serve", *API_ONLY, "--data-dir", str(data_dir), "--port", "0", *args)
    assert result.returncode == 1 and result.stdout == "", result
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr  # one line, not a traceback
    _no_writer_left(data_dir)
    return lines[0]


def test_a_full_disk_at_start_is_one_line(small_disk: Path) -> None:
    stopped, killed = small_disk / "stopped", small_disk / "killed"
    for data_dir in (stopped, killed):
        server = ServerProcess(data_dir)
        server.start()
        try:
            for i in range(20):
                reply = call(server.port, "POST", "/api/v1/namespaces/default/configmaps",
                             {"metadata": {"name": f"c{i}"}})
                assert reply.status == 201
            if data_dir == killed:  # the WAL stays behind
                os.kill(writer_pid(data_dir), 9)
                server.kill()
        finally:
            server.stop()
    _fill(small_disk)
    for data_dir, args in ((stopped, ["--insecure-http"]), (killed, ["--insecure-http"]),
                           (small_disk / "fresh", [])):  # a fresh TLS server writes its PKI
        line = _serve_refused(data_dir, *args)
        assert line.startswith("kubewire: cannot start: "), line
        assert "no space left" in line.lower(), line
