"""``kubewire`` command line: ``kubewire serve`` starts a Kubernetes-compatible API server."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from kubewire.server.allocation import DEFAULT_SERVICE_CIDR
from kubewire.server.context import ServerConfig
from kubewire.storage.base import Retention

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
    serve.add_argument("--history-max-changes", type=int, default=1_000_000,
                       help="newest changes the log keeps; 0 = unbounded")
    serve.add_argument("--history-max-age", type=float, default=7 * 24 * 3600.0,
                       help="seconds of change history the log keeps; 0 = unbounded")
    serve.add_argument("--durability", choices=("full", "normal"), default="full",
                       help="full: fsync each commit group; normal: survive process crashes")
    serve.add_argument("--pod-grace-cap", type=float, default=None,
                       help="finish graceful pod deletions after at most this many seconds")
    serve.add_argument("--service-cluster-ip-range", type=service_cidr,
                       default=DEFAULT_SERVICE_CIDR,
                       help="CIDR Service clusterIPs come from (default 10.96.0.0/12, kubeadm's; "
                            "kube-apiserver's built-in default is 10.0.0.0/24)")
    serve.add_argument("--log-level", default="INFO")
    return parser


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
    return ServerConfig(data_dir=args.data_dir, host=args.host, port=args.port,
                        retention=retention, durability=args.durability,
                        pod_grace_cap_s=args.pod_grace_cap,
                        service_cluster_ip_range=args.service_cluster_ip_range,
                        **extra)  # type: ignore[arg-type]


def kubeconfig_text(server_url: str) -> str:
    """A kubeconfig that kubectl and the Python clients use as-is."""
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: kubewire\n  cluster:\n    server: {server_url}\n"
        "users:\n- name: kubewire-admin\n  user: {}\n"
        "contexts:\n- name: kubewire\n  context:\n    cluster: kubewire\n"
        "    user: kubewire-admin\n    namespace: default\n"
        "current-context: kubewire\npreferences: {}\n")


async def serve(config: ServerConfig) -> None:
    from kubewire.server.app import APIServer

    server = APIServer(config)
    host, port = await server.start()
    url_host = f"[{host}]" if ":" in host else host
    url = f"http://{url_host}:{port}"
    kubeconfig = config.data_dir / "kubeconfig"
    kubeconfig.write_text(kubeconfig_text(url))
    log.info("kubewire serving on %s (kubeconfig: %s)", url, kubeconfig)
    print(f"kubewire ready: {url} kubeconfig={kubeconfig}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("shutting down")
    await server.stop()


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=args.log_level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if args.command == "serve":
        run = asyncio.run
        with contextlib.suppress(ImportError):
            import uvloop

            run = uvloop.run
        run(serve(config_from_args(args)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
