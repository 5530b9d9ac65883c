"""``kubewire`` command line: ``kubewire serve`` starts a Kubernetes-compatible API server;
``kubewire user`` issues credentials; ``kubewire repair`` restarts a damaged store.

A server that cannot start (a full disk, a store that lost revisions, a bad certificate) says
why in one line, ``kubewire: cannot start: ...``, and exits 1: no traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import errno
import ipaddress
import logging
import os
import signal
import sqlite3
import sys
from collections.abc import Sequence
from pathlib import Path

from kubewire.go_text import parse_go_duration
from kubewire.server.access.authn import TokenFileError
from kubewire.server.access.authz import PolicyFileError
from kubewire.server.allocation.rules import DEFAULT_SERVICE_CIDR
from kubewire.server.context import (
    DATABASE_NAME,
    DEFAULT_NAMESPACE_DELETION_DELAY_S,
    ServerConfig,
)
from kubewire.server.observe.audit import PolicyError as AuditPolicyError
from kubewire.server.wire.http_messages import Limits
from kubewire.storage.base import Retention, StorageError
from kubewire.storage.sqlite.revision_record import RevisionLostError

log = logging.getLogger("kubewire")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kubewire", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the API server")
    serve.add_argument("--data-dir", type=Path, default=Path("./data"),
                       help="where the store and the kubeconfig live (default ./data)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=6443, help="0 picks a free port")
    serve.add_argument("--watch-cache-size", type=int, default=None,
                       help="events kept in memory per kind; older ones come from the log")
    serve.add_argument("--bookmark-interval", type=float, default=None,
                       help="seconds between bookmarks for watches that allow them (60)")
    serve.add_argument("--min-request-timeout", type=float, default=None,
                       help="watch timeout default is random in [this, 2x this) seconds (1800)")
    serve.add_argument("--max-requests-inflight", type=int, default=400,
                       help="read-only requests served at once, watches not counted "
                            "(0: no limit; past it 429)")
    serve.add_argument("--max-mutating-requests-inflight", type=int, default=200,
                       help="writes served at once (0: no limit; past it 429)")
    serve.add_argument("--max-watches-per-user", type=int, default=10_000,
                       help="watches one user may hold open (0: no limit; past it 429)")
    serve.add_argument("--request-timeout", type=go_duration, default=60.0,
                       help="longest a non-watch request may take, body included, as a Go "
                            "duration or seconds (kube's default 1m0s)")
    serve.add_argument("--history-max-changes", type=int, default=1_000_000,
                       help="newest changes the log keeps; 0 = unbounded")
    serve.add_argument("--history-max-age", type=float, default=7 * 24 * 3600.0,
                       help="seconds of change history the log keeps; 0 = unbounded")
    serve.add_argument("--durability", choices=("full", "normal"), default="full",
                       help="full: fsync each commit group; normal: survive process crashes")
    serve.add_argument("--pod-grace-cap", type=float, default=None,
                       help="finish graceful pod deletions after at most this many seconds")
    serve.add_argument("--namespace-deletion-delay", type=seconds_or_zero,
                       default=DEFAULT_NAMESPACE_DELETION_DELAY_S,
                       help="seconds a deleted namespace stays Terminating before the namespace "
                            "controller empties it (default 1; 0 = at once)")
    serve.add_argument("--service-cluster-ip-range", type=service_cidr,
                       default=DEFAULT_SERVICE_CIDR,
                       help="CIDR Service clusterIPs come from (default 10.96.0.0/12, kubeadm's; "
                            "kube-apiserver's built-in default is 10.0.0.0/24)")
    serve.add_argument("--log-level", default="INFO")
    _add_access_flags(serve)
    _add_user_command(sub)
    _add_repair_command(sub)
    return parser


def _add_access_flags(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--insecure-http", action="store_true",
                       help="serve plain HTTP (local experiments only: without a token file "
                            "every request is admin)")
    serve.add_argument("--tls-cert-file", type=Path, default=None,
                       help="serving certificate (default: made in DIR/pki by kubewire's CA)")
    serve.add_argument("--tls-private-key-file", type=Path, default=None)
    serve.add_argument("--tls-san", action="append", default=[],
                       help="extra DNS name or IP for the serving certificate (repeatable)")
    serve.add_argument("--client-ca-file", type=Path, default=None,
                       help="CA that signs client certificates (default: DIR/pki/ca.crt)")
    serve.add_argument("--token-auth-file", type=Path, default=None,
                       help="kube-apiserver token file: token,user,uid[,\"groups\"] "
                            "(default: DIR/tokens.csv)")
    serve.add_argument("--authorization-policy-file", type=Path, default=None,
                       help="ABAC policy, one JSON Policy per line (default: authenticated "
                            "users may do everything)")
    serve.add_argument("--audit-log-path", default=None,
                       help="append audit.k8s.io/v1 events, one JSON line each, to this file "
                            "('-': standard output); needs --audit-policy-file")
    serve.add_argument("--audit-policy-file", type=Path, default=None,
                       help="kube's audit Policy (YAML or JSON) deciding what is audited; "
                            "levels None and Metadata")


def _add_user_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    user = sub.add_parser("user", help="issue credentials for a user and print a kubeconfig")
    user.add_argument("name")
    user.add_argument("--group", action="append", default=[], help="a group (repeatable)")
    user.add_argument("--token", action="store_true",
                      help="a bearer token in the token file instead of a client certificate")
    user.add_argument("--data-dir", type=Path, default=Path("./data"))
    user.add_argument("--token-auth-file", type=Path, default=None)
    user.add_argument("--server", default=None, help="server URL (default: DIR/kubeconfig's)")
    user.add_argument("--namespace", default="default")


def _add_repair_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    repair = sub.add_parser(
        "repair", help="serve a store that lost revisions again: keep what it holds, move its "
                       "revision past every one it gave out, and make clients relist")
    repair.add_argument("--data-dir", type=Path, default=Path("./data"))
    repair.add_argument("--accept-data-loss", action="store_true",
                        help="do it (without: only report what the store holds)")


MAX_SERVICE_CIDR_BITS = 20  # kube-apiserver rejects larger service ranges (options/validation.go)


def service_cidr(text: str) -> str:
    """A service CIDR as kube-apiserver's flag takes it (host bits masked, at most 2^20 IPs)."""
    try:
        network = ipaddress.ip_network(text.strip(), strict=False)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid CIDR address: {text}") from None
    if network.max_prefixlen - network.prefixlen > MAX_SERVICE_CIDR_BITS:
        raise argparse.ArgumentTypeError(
            f"specified --service-cluster-ip-range is too large; for {network.max_prefixlen}-bit "
            f"addresses, the mask must be >= {network.max_prefixlen - MAX_SERVICE_CIDR_BITS}")
    return str(network)


def seconds_or_zero(text: str) -> float:
    """A delay in seconds (``1.5``) or as a Go duration (``500ms``); 0 is allowed."""
    try:
        seconds = float(text) if text.replace(".", "", 1).isdigit() else parse_go_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if seconds < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text}")
    return seconds


def go_duration(text: str) -> float:
    """A duration flag as kube-apiserver takes it (``1m0s``); bare seconds are accepted too."""
    try:
        seconds = float(text) if text.replace(".", "", 1).isdigit() else parse_go_duration(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if seconds <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0: {text}")
    return seconds


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    extra: dict[str, float | int] = {}
    if args.watch_cache_size:
        extra["ring_capacity"] = args.watch_cache_size
    if args.bookmark_interval:
        extra["bookmark_interval_s"] = args.bookmark_interval
    if args.min_request_timeout:
        extra["min_request_timeout_s"] = args.min_request_timeout
    retention = Retention(max_changes=args.history_max_changes or None,
                          max_age_s=args.history_max_age or None)
    limits = Limits(request_timeout_s=args.request_timeout,
                    max_requests_inflight=args.max_requests_inflight,
                    max_mutating_requests_inflight=args.max_mutating_requests_inflight,
                    max_watches_per_user=args.max_watches_per_user)
    return ServerConfig(data_dir=args.data_dir, host=args.host, port=args.port,
                        retention=retention, limits=limits, durability=args.durability,
                        pod_grace_cap_s=args.pod_grace_cap,
                        namespace_deletion_delay_s=args.namespace_deletion_delay,
                        service_cluster_ip_range=args.service_cluster_ip_range,
                        insecure_http=args.insecure_http, tls_cert_file=args.tls_cert_file,
                        tls_key_file=args.tls_private_key_file, tls_sans=tuple(args.tls_san),
                        client_ca_file=args.client_ca_file,
                        token_auth_file=args.token_auth_file,
                        authorization_policy_file=args.authorization_policy_file,
                        audit_log_path=args.audit_log_path,
                        audit_policy_file=args.audit_policy_file,
                        **extra)  # type: ignore[arg-type]


TLS_READ_BUFFER_BYTES = 256 * 1024  # uvloop's SSL_READ_MAX_SIZE: one buffer per TLS connection
_M_MMAP_THRESHOLD = -3  # glibc <malloc.h>


def mmap_tls_read_buffers() -> bool:
    """Have glibc give uvloop's 256 KiB per-TLS-connection read buffer its own mapping.

    uvloop allocates that buffer for every TLS connection, and reads from the socket go to its
    start. glibc's mmap threshold starts at 128 KiB but rises past 256 KiB the first time such
    a block is freed (a closed connection, or the 256 KiB ``SSLObject.read`` that uvloop makes
    per read); from then on the buffers are carved from the heap, next to blocks that freed
    transients left touched, and an idle connection keeps 10-19 KB of its buffer resident where
    a mapping of its own keeps one page (``python -m bench.idle_memory --only tls``). A fixed
    threshold of the buffer's size stops the rise: smaller blocks come from the heap, larger
    ones are always mapped, as before the first rise. The per-read 256 KiB transient then costs
    an mmap, mremap and munmap; timing that allocation pattern alone showed no difference
    (13.2-13.5 us per 300-byte read either way). A user's own ``MALLOC_MMAP_THRESHOLD_`` wins;
    False where there is no glibc ``mallopt``.
    """
    if not sys.platform.startswith("linux") or "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, TLS_READ_BUFFER_BYTES))


HEAP_TRIM_INTERVAL_S = 30.0


async def trim_heap_every(seconds: float) -> None:
    """Give freed heap memory back to the system now and then (glibc ``malloc_trim``).

    glibc returns freed memory at the top of its heap by itself, but not pages freed below
    blocks still in use: after a burst (a flood of pipelined requests, many large bodies, a
    large list) the server kept 10-20 MB it no longer used. ``malloc_trim(0)`` releases those
    pages; on a server of a few hundred MB it takes a millisecond or two, every ``seconds``.
    Nothing where there is no glibc.
    """
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return
    trim.argtypes = (ctypes.c_size_t,)
    trim.restype = ctypes.c_int
    while True:
        await asyncio.sleep(seconds)
        trim(0)


def issue_user(args: argparse.Namespace) -> None:
    from kubewire.server.access.users import UserRequest, user_kubeconfig

    token_file = None
    if args.token:
        token_file = args.token_auth_file or args.data_dir / "tokens.csv"
    request = UserRequest(args.name, tuple(args.group), token_file=token_file,
                          namespace=args.namespace)
    print(user_kubeconfig(args.data_dir, request, server=args.server), end="")


class CannotStart(Exception):
    """Why the server could not start, in one line for its user."""


# What a server that cannot start raises: its disk, its store, a file it reads at start that it
# refuses (token, policy, audit policy); anything else is a bug and keeps its traceback.
START_ERRORS = (OSError, sqlite3.Error, StorageError, AuditPolicyError, PolicyFileError,
                TokenFileError)


def start_error_text(exc: BaseException, data_dir: Path) -> str:
    """One line saying why the server did not start and, for lost revisions, what to do."""
    if isinstance(exc, RevisionLostError):
        return (f"{exc}: its newest commits were lost with a deleted or damaged write-ahead "
                f"log ({DATABASE_NAME}-wal) or an older copy of the database, and serving it "
                "would give their revisions out again. To serve what it holds, with every "
                "client made to relist, run: kubewire repair --data-dir "
                f"{data_dir} --accept-data-loss")
    if isinstance(exc, sqlite3.Error):
        text = f"{data_dir / DATABASE_NAME}: {exc}"
    elif isinstance(exc, OSError) and exc.errno in _NO_SPACE and exc.filename is None:
        text = f"{exc.strerror}: {data_dir}"  # a write that failed on close names no file
    else:
        text = str(exc) or type(exc).__name__
    if "space" not in text.lower() and _is_full(data_dir):  # SQLite may say "disk I/O error"
        text += f" (no space left on the device of {data_dir})"
    return text


_NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})


def _is_full(path: Path) -> bool:
    """Whether the file system ``path`` is (or would be) on has no space left."""
    for candidate in (path, *path.absolute().parents):
        try:
            return os.statvfs(candidate).f_bavail == 0
        except OSError:
            continue
    return False


async def serve(config: ServerConfig) -> None:
    from kubewire.server.app import APIServer

    try:
        server = APIServer(config)
    except START_ERRORS as exc:
        raise CannotStart(start_error_text(exc, config.data_dir)) from exc
    try:
        await server.start()
    except START_ERRORS as exc:
        try:
            await server.stop()  # whatever did start (the writer process) stops with it
        except Exception:
            log.debug("cleaning up after a failed start", exc_info=True)
        raise CannotStart(start_error_text(exc, config.data_dir)) from exc
    url = server.url
    kubeconfig = config.data_dir / "kubeconfig"
    if config.insecure_http:
        log.warning("INSECURE: serving plain HTTP%s; use it for local experiments only",
                    "" if config.token_auth_file else " and every request is admin")
    log.info("kubewire serving on %s (kubeconfig: %s)", url, kubeconfig)
    print(f"kubewire ready: {url} kubeconfig={kubeconfig}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    trimming = asyncio.get_running_loop().create_task(trim_heap_every(HEAP_TRIM_INTERVAL_S))
    await stop.wait()
    trimming.cancel()
    log.info("shutting down")
    await server.stop()


def repair(args: argparse.Namespace) -> int:
    """``kubewire repair``: report, and with ``--accept-data-loss`` repair (``sqlite.repair``)."""
    from kubewire.storage.sqlite.repair import inspect_store, repair_store

    path = args.data_dir / DATABASE_NAME
    if not path.is_file():
        print(f"kubewire: cannot repair: there is no store in {args.data_dir}", file=sys.stderr)
        return 1
    try:
        if not args.accept_data_loss:
            state = inspect_store(path)
            print(f"{path} holds {state.objects} objects up to revision {state.revision}; "
                  f"{_recorded_text(state.recorded, state.lost)}. With --accept-data-loss, "
                  "repair keeps them, moves the revision past every one given out and makes "
                  "every client relist.")
            return 1
        done = repair_store(path)
    except START_ERRORS as exc:
        print(f"kubewire: cannot repair: {start_error_text(exc, args.data_dir)}", file=sys.stderr)
        return 1
    before = done.before
    print(f"repaired {path}: {before.objects} objects kept as of revision {before.revision} "
          f"({_recorded_text(before.recorded, before.lost)}); new writes start after revision "
          f"{done.revision}, and clients resuming from older revisions get 410 Gone and relist")
    return 0


def _recorded_text(recorded: int | None, lost: int) -> str:
    if recorded is None:
        return "its revision record is missing or unreadable"
    if lost:
        return f"revision {recorded} had been committed: {lost} revisions were lost"
    return f"its record agrees (revision {recorded}): nothing was lost"


def run_server(args: argparse.Namespace) -> int:
    if not args.insecure_http:
        mmap_tls_read_buffers()
    run = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop

        run = uvloop.run
    try:
        run(serve(config_from_args(args)))
    except CannotStart as exc:
        log.debug("start failed", exc_info=exc.__cause__)  # the traceback, for --log-level debug
        print(f"kubewire: cannot start: {exc}", file=sys.stderr)
        return 1
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=getattr(args, "log_level", "INFO").upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        return run_server(args)
    if args.command == "repair":
        return repair(args)
    issue_user(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
