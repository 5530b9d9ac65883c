"""Saving results, rendering ``bench/RESULTS.md`` and the fan-out plot, describing the machine."""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import sys
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol, TypeVar

BENCH_DIR = Path(__file__).parent
RESULTS_DIR = BENCH_DIR / "results"
RESULTS_MD = BENCH_DIR / "RESULTS.md"
FINDINGS_MD = BENCH_DIR / "FINDINGS.md"  # hand-written profile notes, included in RESULTS.md
PLOT_PNG = "fanout.png"
# The suite, in run and render order. A benchmark whose module is not there (``list_paging``
# until it lands) is skipped by ``python -m bench`` and absent from RESULTS.md.
ORDER = ("fanout", "patch_fanout", "idle_memory", "store_memory", "write_path", "request_cpu",
         "latency", "startup", "client_decode", "initial_sync", "list_paging", "crd_writes",
         "toolkit", "scaleout", "workers", "authz", "cluster_scale")
PACKAGES = ("kubewire", "msgspec", "httptools", "uvloop", "aiohttp", "matplotlib")


def parse_args(doc: str | None, *, watchers: bool = False) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=doc,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true",
                        help="one tiny repetition: proves the benchmark works (CI)")
    parser.add_argument("--repeats", type=int, default=0, help="repetitions (default 5)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR,
                        help=f"where the JSON result goes (default {RESULTS_DIR})")
    if watchers:
        parser.add_argument("--watchers", type=lambda s: tuple(int(x) for x in s.split(",")),
                            default=None, help="comma-separated watcher counts")
    return parser.parse_args()


class Options(Protocol):
    repeats: int


OptionsT = TypeVar("OptionsT", bound=Options)


def main(doc: str | None, smoke: OptionsT, default_options: Callable[[], OptionsT],
         run: Callable[[OptionsT], dict[str, Any]], *, watchers: bool = False) -> None:
    """A benchmark's command line: ``--smoke`` (tiny, for CI), ``--repeats``, ``--out``."""
    args = parse_args(doc, watchers=watchers)
    opts = smoke if args.smoke else default_options()
    if args.repeats:
        opts.repeats = args.repeats
    if watchers and args.watchers:
        opts.watchers = args.watchers  # type: ignore[attr-defined]
    finish(run(opts), args.out)


def finish(result: dict[str, Any], out: Path) -> Path:
    """Stamp, save as ``out/<name>.json`` and print the table rows."""
    result["date"] = now_utc()
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{result['name']}.json"
    path.write_text(json.dumps(result, indent=1, sort_keys=True) + "\n")
    print("\n".join(table([result])))
    print(f"saved {path}")
    return path


def now_utc() -> str:
    return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")


def fmt(value: float) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    magnitude = abs(value)
    if magnitude >= 1000:
        return f"{value:,.0f}"
    if magnitude >= 10:
        return f"{value:.1f}"
    return f"{value:.3g}"


def table(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| benchmark | case | kubewire (median) | reference (median) | ratio median "
             "(min-max) | target | met |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for res in results:
        for r in res["rows"]:
            ratio = r["ratio"]
            met = {True: "yes", False: "**no**", None: ""}[r.get("met")]
            lines.append(
                f"| {res['title']} | {r['case']} | {fmt(r['ours']['median'])} {r['unit']} | "
                f"{fmt(r['reference']['median'])} {r['unit']} | {fmt(ratio['median'])} "
                f"({fmt(ratio['min'])}-{fmt(ratio['max'])}) | {r.get('target', '')} | {met} |")
    return lines


def machine() -> list[str]:
    cpu = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kb = int(f.readline().split()[1])
    versions = []
    for name in PACKAGES:
        try:
            versions.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            versions.append(f"{name} (not installed)")
    return [f"- CPU: {cpu}, {os.cpu_count()} cores; memory {mem_kb / 2**20:.1f} GiB",
            f"- OS: {platform.platform()}",
            f"- Python {platform.python_version()} ({sys.executable})",
            f"- Packages: {', '.join(versions)}",
            f"- Load average when rendered: {', '.join(f'{x:.2f}' for x in os.getloadavg())} "
            "(the machine is shared: only ratios from one run are comparable)"]


def load_results(out: Path) -> list[dict[str, Any]]:
    found = {p.stem: json.loads(p.read_text()) for p in out.glob("*.json")}
    return [found[name] for name in ORDER if name in found]


def details(res: dict[str, Any]) -> list[str]:
    lines = [f"### {res['title']}", "", f"`{res['command']}` — reference: {res['reference']}; "
             f"{res['repeats']} interleaved repetitions; run {res.get('date', '?')}.", ""]
    for r in res["rows"]:
        extras = {k: v for k, v in r.items() if k not in {
            "case", "unit", "ours", "reference", "ratio", "target", "met",
            "samples", "watchers"}}
        parts = []
        for key, value in extras.items():
            if isinstance(value, dict) and "median" in value:
                parts.append(f"{key}: {fmt(value['median'])} ({fmt(value['min'])}-"
                             f"{fmt(value['max'])})")
            elif isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
                parts.append(f"{key}: " + ", ".join(
                    f"{side} {fmt(s['median'])} ({fmt(s['min'])}-{fmt(s['max'])})"
                    for side, s in value.items()))
            else:
                parts.append(f"{key}: {value}")
        samples = ", ".join(f"{fmt(a)}/{fmt(b)}" for a, b in zip(
            r["samples"]["ours"], r["samples"]["reference"], strict=True))
        lines.append(f"- {r['case']}: kubewire/reference per repetition {samples}"
                     + ("; " + "; ".join(parts) if parts else ""))
    lines.extend(f"- {note}" for note in res.get("notes", []))
    lines.append("")
    return lines


def plot(results: list[dict[str, Any]], path: Path) -> bool:
    """Fan-out events/s against watcher count, both sides, with min-max bars."""
    fanout = next((r for r in results if r["name"] == "fanout"), None)
    if fanout is None:
        return False
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = sorted((r for r in fanout["rows"] if "watchers" in r), key=lambda r: r["watchers"])
    xs = [r["watchers"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 4))
    for side, label in (("ours", "kubewire"), ("reference", "raw socket limit")):
        med = [r[side]["median"] for r in rows]
        err = [[m - r[side]["min"] for m, r in zip(med, rows, strict=True)],
               [r[side]["max"] - m for m, r in zip(med, rows, strict=True)]]
        ax.errorbar(xs, med, yerr=err, marker="o", capsize=3, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("watchers on one collection")
    ax.set_ylabel("delivered events/s (~2 KB each)")
    ax.set_title("Fan-out: median of interleaved runs, min-max bars")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def render(out: Path = RESULTS_DIR, target: Path = RESULTS_MD) -> Path:
    """Rewrite ``RESULTS.md`` (and the plot) from the saved JSON results."""
    results = load_results(out)
    has_plot = plot(results, target.parent / PLOT_PNG)
    lines = ["# kubewire benchmark results", "",
             f"Rendered {now_utc()} by `python -m bench` (issue 6). Every number is a median of "
             "interleaved repetitions; ratios are kubewire/reference per repetition, so they "
             "hold up on a busy machine better than absolute numbers. Servers run with "
             "`--insecure-http` (plain HTTP) except the rows marked TLS.", "",
             "## Machine", "", *machine(), "", "## Results", "", *table(results), ""]
    if has_plot:
        lines += [f"![fan-out against watcher count]({PLOT_PNG})", ""]
    lines += ["## Details", ""]
    for res in results:
        lines += details(res)
    if FINDINGS_MD.exists():
        lines += [FINDINGS_MD.read_text().rstrip(), ""]
    target.write_text("\n".join(lines))
    return target
