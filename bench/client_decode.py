"""Client decode: watch clients on one stub stream of 20 000 realistic (~4.6 KB) Pods.

``bench.stub_server`` serves the stream pre-serialized; each client reads it in a fresh
process of its own (so no library's imports or caches leak into another's) and times from
starting the watch to its 20 000th decoded event. Reference: raw socket reading + msgspec
decoding into kubewire's generated ``Pod`` (the limit for a typed Python client). Clients run
interleaved, rotating their order each repetition; every ratio is clients/raw in one repetition.

    python -m bench.client_decode [--smoke] [--repeats 5] [--clients kubewire,lightkube]
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import report
from bench.servers import ServerProcess, reference_argv
from bench.stats import row, summary
from bench.worker import Worker

NAME = "client_decode"
TARGET_RATIO = 0.85  # issue 6: kubewire.client's watch vs raw + msgspec
ALL_CLIENTS = ("kubewire", "lightkube", "kubernetes", "kubernetes_asyncio", "kr8s")
KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: stub
  cluster: {{server: "http://127.0.0.1:{port}"}}
users:
- name: bench
  user: {{token: bench}}
contexts:
- name: stub
  context: {{cluster: stub, user: bench, namespace: bench}}
current-context: stub
"""


@dataclass
class DecodeOptions:
    events: int = 20_000
    repeats: int = 5
    clients: tuple[str, ...] = ALL_CLIENTS
    timeout_s: float = 300.0


default_options = DecodeOptions
SMOKE = DecodeOptions(events=50, repeats=1, clients=("kubewire",), timeout_s=60.0)


def missing() -> str:
    """Why this benchmark cannot run here ("" if it can)."""
    try:
        from kubewire.client import Api, create_client  # noqa: F401
    except ImportError as err:
        return f"kubewire.client is not importable: {err}"
    return ""


def time_client(client: str, port: int, kubeconfig: Path, opts: DecodeOptions) -> float:
    """Events/s for one client in a fresh process."""
    with Worker("bench.decoders:DecodeRunner") as worker:
        seconds = worker.call("watch", opts.timeout_s + 30, client=client, port=port,
                              kubeconfig=str(kubeconfig), count=opts.events,
                              timeout_s=opts.timeout_s)
    return float(opts.events / seconds)


def run(opts: DecodeOptions) -> dict[str, Any]:
    rates: dict[str, list[float]] = {name: [] for name in ("raw", *opts.clients)}
    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="kw-decode-")))
        stub = stack.enter_context(ServerProcess("stub", [
            *reference_argv("bench.stub_server"),
            "--events", str(opts.events)])).wait_ready()
        kubeconfig = tmp / "kubeconfig"
        kubeconfig.write_text(KUBECONFIG.format(port=stub.port))
        names = list(rates)
        for rep in range(opts.repeats):
            shift = rep % len(names)
            for client in names[shift:] + names[:shift]:
                rates[client].append(time_client(client, stub.port, kubeconfig, opts))
    raw = rates.pop("raw")
    rows = []
    for client, values in rates.items():
        is_target = client == "kubewire"
        ratio = summary([a / b for a, b in zip(values, raw, strict=True)])["median"]
        rows.append(row(f"{client} watch, {opts.events} Pods", "events/s", values, raw,
                        target=f">= {TARGET_RATIO}" if is_target else "",
                        met=ratio >= TARGET_RATIO if is_target else None))
    return {"name": NAME, "title": "Client decode (item 4)",
            "reference": "raw socket + msgspec into kubewire's Pod model",
            "command": "python -m bench.client_decode", "repeats": opts.repeats, "rows": rows,
            "notes": ["Each client in a fresh process; configuration loading is not timed."]}


def main() -> None:
    # --clients (in the usage above) is this benchmark's own; report.main parses the rest.
    parser = argparse.ArgumentParser(add_help=False)
    parser.add_argument("--clients", default=",".join(ALL_CLIENTS))
    known, rest = parser.parse_known_args()
    clients = tuple(known.clients.split(","))
    if unknown := set(clients) - set(ALL_CLIENTS):
        parser.error(f"unknown clients {sorted(unknown)}; choose from {', '.join(ALL_CLIENTS)}")
    sys.argv[1:] = rest
    report.main(__doc__, SMOKE, lambda: DecodeOptions(clients=clients), run)


if __name__ == "__main__":
    main()
