"""``python -m tests.reliability.hostile.launch LIMITS_JSON SERVE_ARGS...``: ``kubewire serve``
with ``Limits`` fields that have no flag (``max_watches_per_user``) set from JSON.

Everything else goes through the CLI's own parser and ``serve``, as ``kubewire.cli.main`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import replace
from typing import Any

from kubewire.cli import build_parser, config_from_args, mmap_tls_read_buffers, serve


def main(argv: Sequence[str]) -> int:
    overrides, *serve_args = argv
    args = build_parser().parse_args(["serve", *serve_args])
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = config_from_args(args)
    config = replace(config, limits=replace(config.limits, **json.loads(overrides)))
    if not config.insecure_http:
        mmap_tls_read_buffers()
    run: Callable[[Coroutine[Any, Any, None]], None] = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop

        run = uvloop.run
    run(serve(config))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
