"""Run every benchmark, then rewrite ``bench/RESULTS.md`` and ``bench/fanout.png``.

    python -m bench                  # all, 5+ interleaved repetitions each (tens of minutes)
    python -m bench --smoke --out D  # all, tiny sizes, results and RESULTS.md under D
    python -m bench --only fanout,startup
    python -m bench --render-only    # rebuild RESULTS.md from bench/results/*.json
"""

from __future__ import annotations

import argparse
import importlib
import time
from pathlib import Path
from typing import Any

from bench import report

BENCHMARKS = report.ORDER


def load(name: str) -> Any:
    """The benchmark's module, or None if it is not there (a slot kept for one to come)."""
    try:
        return importlib.import_module(f"bench.{name}")
    except ModuleNotFoundError as exc:
        if exc.name != f"bench.{name}":
            raise
        return None


def options(module: Any, smoke: bool, repeats: int) -> Any:
    """The module's ``SMOKE`` or default options, with ``repeats`` if given."""
    opts = module.SMOKE if smoke else module.default_options()
    if repeats:
        opts.repeats = repeats
    return opts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, one repetition")
    parser.add_argument("--repeats", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--out", type=Path, default=report.RESULTS_DIR)
    parser.add_argument("--render-only", action="store_true")
    args = parser.parse_args()
    names = [n for n in args.only.split(",") if n] or list(BENCHMARKS)
    unknown = set(names) - set(BENCHMARKS)
    if unknown:
        parser.error(f"unknown benchmarks: {sorted(unknown)}")
    if not args.render_only:
        for name in names:
            module = load(name)
            if module is None:
                print(f"skipping {name}: no module bench.{name}")
                continue
            missing = getattr(module, "missing", lambda: "")()
            if missing:
                print(f"skipping {name}: {missing}")
                continue
            started = time.monotonic()
            print(f"== {name}", flush=True)
            report.finish(module.run(options(module, args.smoke, args.repeats)), args.out)
            print(f"   {time.monotonic() - started:.0f} s", flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    target = report.RESULTS_MD if args.out == report.RESULTS_DIR else args.out / "RESULTS.md"
    print(f"wrote {report.render(args.out, target)}")


if __name__ == "__main__":
    main()
