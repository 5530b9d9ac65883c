"""The write-path reference: kubewire's own HTTP stack (``kubewire.server.wire.http.HTTPServer``)
answering every request from an empty handler, on the same event loop ``kubewire serve`` uses.

POST answers 201 with a small JSON body, anything else 200 (so ``/readyz`` is ready at once).
"""

from __future__ import annotations

import argparse
import contextlib

from bench.worker import new_event_loop, ready_until_signalled
from kubewire.server.wire.http import HTTPServer
from kubewire.server.wire.http_messages import Request, Response

CREATED = Response(201, b'{"kind":"Pod","apiVersion":"v1","metadata":{"name":"x"}}')
OK = Response(200, b"ok", "text/plain; charset=utf-8")


async def empty_handler(request: Request) -> Response:
    return CREATED if request.method == "POST" else OK


async def serve(port: int) -> None:
    http = HTTPServer(empty_handler)
    _, bound = await http.listen("127.0.0.1", port)
    await ready_until_signalled(bound)
    await http.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    loop = new_event_loop()
    with contextlib.closing(loop):
        loop.run_until_complete(serve(args.port))


if __name__ == "__main__":
    main()
