"""``kubewire`` command line: ``kubewire serve`` starts a Kubernetes-compatible API server
(``--detach``: in the background, returning once it is ready; ``kubewire stop`` stops it);
``kubewire user add|list|revoke`` issues, lists and revokes users' credentials; ``kubewire
repair`` restarts a damaged store; ``kubewire models crd.yaml > models.py`` writes typed client
models of custom resources; ``kubewire record`` / ``replay`` / ``snapshot save|load`` write and
play traces (``kubewire.testing``).

Whatever goes wrong for a user (a flag, a port in use, a data directory another server holds, a
full disk, a store that lost revisions, a bad certificate) is said in one line, ``kubewire:
...``, with a non-zero exit: no traceback (``--log-level debug`` adds it where there is one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import errno
import gc
import ipaddress
import logging
import os
import re
import signal
import socket
import sqlite3
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, NoReturn, cast

import kubewire
from kubewire.go_text import parse_go_duration
from kubewire.server.access.authn import ServiceAccountKeyError, TokenFileError
from kubewire.server.access.authorizers import AuthorizationModeError
from kubewire.server.access.authz import PolicyFileError
from kubewire.server.access.user_bindings import ROLES as USER_ROLES
from kubewire.server.allocation.rules import DEFAULT_SERVICE_CIDR
from kubewire.server.daemon.lock import DataDirInUse, DataDirLock
from kubewire.server.daemon.open_files import raise_open_file_limit
from kubewire.server.observe.audit import PolicyError as AuditPolicyError
from kubewire.storage.base import Retention, StorageError
from kubewire.storage.cache import DEFAULT_RING_CAPACITY
from kubewire.storage.sqlite.revision_record import RevisionLostError

if TYPE_CHECKING:
    from kubewire.client import Client
    from kubewire.server.context import ServerConfig
    from kubewire.server.daemon.workers import Supervisor
    from kubewire.storage.sqlite.writer_hub import HubProcess

# The modules of the ``[server]`` extra: a client-only install has none of them, and the server
# commands then say which extra to install (``main``).
SERVER_EXTRA_MODULES = frozenset({"httptools", "cryptography", "uvloop"})

log = logging.getLogger("kubewire")


DESCRIPTION = """\
A Kubernetes-compatible API server on an embedded SQLite store. Start one in the background
with 'kubewire serve --detach' (it writes DIR/kubeconfig for kubectl) and stop it with
'kubewire stop'."""


class Parser(argparse.ArgumentParser):
    """argparse, with a bad flag said in one line, not after a usage dump."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")


class HelpFormatter(argparse.HelpFormatter):
    """Each flag's default after its help, unless the help says it (or there is none to say)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        if ("default" in text or not action.option_strings or action.default is None
                or action.default is argparse.SUPPRESS or action.default == []):
            return text
        if isinstance(action, argparse._StoreTrueAction):
            return f"{text} (default: off)"
        return f"{text} (default: %(default)s)"


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="kubewire", formatter_class=HelpFormatter, description=DESCRIPTION,
                    epilog="'kubewire COMMAND --help' tells more about each command.")
    parser.add_argument("--version", action="version", version=f"kubewire {kubewire.__version__}")
    # (each command's parser is a ``Parser`` too: one-line errors)
    sub = cast("argparse._SubParsersAction[argparse.ArgumentParser]",
               parser.add_subparsers(dest="command", metavar="COMMAND"))
    serve = sub.add_parser("serve", help="run the API server", formatter_class=HelpFormatter)
    serve.add_argument("--data-dir", type=Path, default=Path("./data"),
                       help="where the store, the kubeconfig and the PKI live (default ./data)")
    serve.add_argument("--host", default="127.0.0.1", help="address (or name) to listen on")
    serve.add_argument("--port", type=port_number, default=6443,
                       help="port to listen on, 0-65535; 0 picks a free one")
    serve.add_argument("--watch-cache-size", type=int, default=None,
                       help="events kept in memory per kind; older ones come from the log "
                            f"(default {DEFAULT_RING_CAPACITY})")
    serve.add_argument("--bookmark-interval", type=duration(), default=None,
                       help="time between bookmarks for watches that allow them, a Go duration "
                            "or seconds (default 1m0s)")
    serve.add_argument("--min-request-timeout", type=duration(), default=None,
                       help="watch timeout default is random in [this, 2x this), seconds (as "
                            "kube's flag) or a Go duration (default 1800)")
    serve.add_argument("--max-requests-inflight", type=int, default=400,
                       help="read-only requests served at once, watches not counted "
                            "(0: no limit; past it 429)")
    serve.add_argument("--max-mutating-requests-inflight", type=int, default=200,
                       help="writes served at once (0: no limit; past it 429)")
    serve.add_argument("--max-watches-per-user", type=int, default=10_000,
                       help="watches one user may hold open (0: no limit; past it 429)")
    serve.add_argument("--request-timeout", type=duration(), default=60.0,
                       help="longest a non-watch request may take, body included, as a Go "
                            "duration or seconds (default 1m0s, kube's)")
    serve.add_argument("--history-max-changes", type=int, default=1_000_000,
                       help="newest changes the log keeps; 0 = unbounded")
    serve.add_argument("--history-max-age", type=duration(zero=True, days=True),
                       default=7 * 24 * 3600.0,
                       help="change history the log keeps, as a Go duration, days (7d) or "
                            "seconds; 0 = unbounded (default 7d)")
    serve.add_argument("--durability", choices=("full", "normal"), default="full",
                       help="full: fsync each commit group; normal: survive process crashes")
    serve.add_argument("--storage", choices=("sqlite", "memory"), default="sqlite",
                       help="sqlite: the database in --data-dir (default); memory: no database "
                            "file, the state is lost when the server stops (for tests)")
    serve.add_argument("--storage-backend", choices=("etcd3",), type=storage_backend,
                       default=None,
                       help="etcd3: keep everything in the etcd cluster at --etcd-servers, "
                            "as kube-apiserver does (any number of kubewire servers may share "
                            "it) (default: unset, --storage decides)")
    serve.add_argument("--etcd-servers", type=etcd_servers, default=(),
                       help="etcd endpoints, comma-separated (scheme://ip:port); implies "
                            "--storage-backend etcd3 (default: none)")
    serve.add_argument("--etcd-prefix", default="/registry",
                       help="the prefix of every key kubewire keeps in etcd")
    serve.add_argument("--etcd-cafile", type=Path, default=None,
                       help="CA bundle that verifies etcd's serving certificates (default: "
                            "plain gRPC unless one of the three is given)")
    serve.add_argument("--etcd-certfile", type=Path, default=None,
                       help="client certificate kubewire presents to etcd (default: none)")
    serve.add_argument("--etcd-keyfile", type=Path, default=None,
                       help="key of --etcd-certfile (default: none)")
    serve.add_argument("--etcd-compaction-interval", type=duration(), default=300.0,
                       help="how often a server tries to compact etcd to what the history "
                            "flags no longer keep; replicas take turns (default 5m0s)")
    serve.add_argument("--pod-grace-cap", type=duration(zero=True), default=None,
                       help="finish graceful pod deletions after at most this long, a Go "
                            "duration or seconds (default: the pod's own grace period)")
    serve.add_argument("--manual-clock", action="store_true",
                       help="a clock that stands still until 'kubewire fault advance-clock' "
                            "(or POST /kubewire/clock) moves it: graceful pod deletions and "
                            "namespace deletion wait on it (default: real time)")
    serve.add_argument("--controllers", type=controller_list, default=("*",),
                       help="kube-controller-manager's list: '*' turns on the controllers on by "
                            "default, 'name' one more, '-name' one off (e.g. '*,-namespace'; "
                            "'' none). kubewire runs namespace, serviceaccount, "
                            "root-ca-cert-publisher, clusterrole-aggregation, csrsigning, "
                            "csrcleaner, resourcequota, pvc-protection, pv-protection, the "
                            "cluster's components (garbage collector, workload controllers, "
                            "scheduler, kubelets: clients of the server) and "
                            "pod-termination-controller (graceful pod deletions end with their "
                            "grace period); any name kube knows is accepted (default *)")
    serve.add_argument("--cluster-signing-duration", type=duration(), default=365 * 24 * 3600.0,
                       help="the longest certificate the CSR signer (csrsigning) issues; "
                            "a request's expirationSeconds may ask for less (default 8760h0m0s)")
    serve.add_argument("--nodes", type=node_count, default=1,
                       help="how many simulated nodes the server runs (kubewire.cluster.nodes; "
                            "0: none, as envtest) (default 1)")
    _add_node_flags(serve)
    serve.add_argument("--enable-garbage-collector", type=go_bool, nargs="?", const=True,
                       default=None,
                       help="kube-apiserver's flag: DELETE's propagationPolicy adds the orphan "
                            "and foregroundDeletion finalizers for a garbage collector to finish "
                            "(default: true when this server runs garbage-collector-controller; "
                            "set it when a separate 'kubewire controller-manager' runs it)")
    serve.add_argument("--components-loop", choices=("thread", "loop"), default="thread",
                       help="where the cluster's components (garbage collector, scheduler, "
                            "kubelets) run: an event loop of their own in a thread, or the "
                            "server's (default thread)")
    serve.add_argument("--namespace-deletion-delay", type=duration(zero=True), default=None,
                       help="how long a deleted namespace stays Terminating before the namespace "
                            "controller empties it, a Go duration or seconds; 0: at once "
                            "(default: 1s)")
    _add_hpa_flags(serve)
    _add_leader_election_flags(serve)
    serve.add_argument("--service-cluster-ip-range", type=service_cidr,
                       default=DEFAULT_SERVICE_CIDR,
                       help="CIDR Service clusterIPs come from (default 10.96.0.0/12, kubeadm's; "
                            "kube-apiserver's built-in default is 10.0.0.0/24)")
    serve.add_argument("--log-level", type=log_level, default="INFO",
                       help=f"one of {', '.join(LOG_LEVELS)}, any case")
    _add_access_flags(serve)
    _add_background_flags(serve)
    _add_controller_manager_command(sub)
    _add_user_command(sub)
    _add_repair_command(sub)
    _add_stop_command(sub)
    _add_models_command(sub)
    _add_fault_command(sub)
    _add_trace_commands(sub)
    _add_simulate_command(sub)
    return parser


def _add_leader_election_flags(serve: argparse.ArgumentParser) -> None:
    """kube-controller-manager's leader election flags (component-base's defaults)."""
    serve.add_argument("--leader-elect", type=go_bool, nargs="?", const=True, default=None,
                       help="run the controller-manager controllers (namespace, "
                            "serviceaccount, root-ca-cert-publisher, pod termination) only "
                            "while this server holds the Lease named below, as "
                            "kube-controller-manager's replicas do; the API server's own work "
                            "runs on every server (default: true on etcd, where replicas share "
                            "the store, as kube-controller-manager's, and with --workers above "
                            "1; false for one server on SQLite or memory, which it owns)")
    serve.add_argument("--leader-elect-lease-duration", type=duration(), default=15.0,
                       help="how long a non-leader waits, from the last renewal it saw, before "
                            "it takes the lease, a Go duration (default 15s)")
    serve.add_argument("--leader-elect-renew-deadline", type=duration(), default=10.0,
                       help="how long the leader tries to renew before it stops leading, a Go "
                            "duration (default 10s)")
    serve.add_argument("--leader-elect-retry-period", type=duration(), default=2.0,
                       help="time between tries to acquire or renew, a Go duration "
                            "(default 2s)")
    serve.add_argument("--leader-elect-resource-name", default="kube-controller-manager",
                       help="the Lease's name (default kube-controller-manager)")
    serve.add_argument("--leader-elect-resource-namespace", default="kube-system",
                       help="the Lease's namespace (default kube-system)")


def _add_hpa_flags(parser: argparse.ArgumentParser) -> None:
    """kube-controller-manager's flags for the HorizontalPodAutoscaler controller."""
    parser.add_argument("--horizontal-pod-autoscaler-sync-period", type=duration(),
                        default=15.0, help="the period for syncing the number of pods in "
                                           "horizontal pod autoscaler (default 15s)")
    parser.add_argument("--horizontal-pod-autoscaler-tolerance", type=hpa_tolerance,
                        default=0.1, help="the minimum change (from 1.0) in the "
                                          "desired-to-actual metrics ratio for the horizontal "
                                          "pod autoscaler to consider scaling (default 0.1)")
    parser.add_argument("--horizontal-pod-autoscaler-downscale-stabilization",
                        type=duration(zero=True), default=300.0,
                        help="the period for which autoscaler will look backwards and not "
                             "scale down below any recommendation it made during that period "
                             "(default 5m0s)")


def hpa_tolerance(text: str) -> float:
    """``--horizontal-pod-autoscaler-tolerance``: a float64 (pflag's ParseFloat), 0 or more."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f'strconv.ParseFloat: parsing "{text}": invalid syntax') from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more: {text}")
    return value


def _add_controller_manager_command(
        sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cm = sub.add_parser("controller-manager",
                        help="run the cluster's components (garbage collector, scheduler, "
                             "kubelets) in their own process against any server",
                        formatter_class=HelpFormatter)
    cm.add_argument("--kubeconfig", type=Path, default=None,
                    help="the server and credential (default: KUBECONFIG, ~/.kube/config)")
    cm.add_argument("--context", default=None, help="the kubeconfig context (default: current)")
    cm.add_argument("--controllers", type=controller_list, default=("*",),
                    help="kube-controller-manager's list ('*', 'name', '-name') (default *)")
    cm.add_argument("--nodes", type=node_count, default=1,
                    help="how many simulated nodes to run (default 1)")
    _add_node_flags(cm)
    cm.add_argument("--leader-elect", type=go_bool, nargs="?", const=True, default=False,
                    help="run only while holding the Lease kube-system/kube-controller-manager "
                         "(kube-system/kube-scheduler for the scheduler) (default false)")
    cm.add_argument("--leader-elect-lease-duration", type=duration(), default=15.0,
                    help="a Go duration (default 15s)")
    cm.add_argument("--leader-elect-renew-deadline", type=duration(), default=10.0,
                    help="a Go duration (default 10s)")
    cm.add_argument("--leader-elect-retry-period", type=duration(), default=2.0,
                    help="a Go duration (default 2s)")
    _add_hpa_flags(cm)
    cm.add_argument("--log-level", type=log_level, default="INFO",
                    help=f"one of {', '.join(LOG_LEVELS)}, any case")


def _add_node_flags(parser: argparse.ArgumentParser) -> None:
    """The simulated nodes' settings (kubewire.cluster.nodes.FleetOptions), the same on
    ``serve`` and ``controller-manager``; checked together at start (``node_flags_error``)."""
    parser.add_argument("--node-name-prefix", default=None,
                        help="node names: PREFIX0, PREFIX1, ... (with --node-naming kind: "
                             "PREFIX, PREFIX2, ...) (default kubewire-node-)")
    parser.add_argument("--node-naming", choices=("index", "kind"), default=None,
                        help="index: PREFIX0, PREFIX1, ...; kind: PREFIX, PREFIX2, ..., as "
                             "kind names its workers (default index)")
    parser.add_argument("--node-cpu", default=None,
                        help="each node's cpu capacity and allocatable, a quantity (default 8)")
    parser.add_argument("--node-memory", default=None,
                        help="each node's memory, a quantity (default 32Gi)")
    parser.add_argument("--node-pods", default=None,
                        help="how many pods each node takes (default 110)")
    parser.add_argument("--node-ephemeral-storage", default=None,
                        help="each node's ephemeral-storage, a quantity (default 100Gi)")
    parser.add_argument("--node-labels", type=node_labels, default=None,
                        help="labels every node gets besides kubelet's own, key=value,... "
                             "(kubectl's form; they win over kubelet's) (default none)")
    parser.add_argument("--node-pod-cidr", default=None,
                        help="the cluster's pod CIDR; each node gets the next /24 of it as "
                             "spec.podCIDR (default 10.224.0.0/12)")
    parser.add_argument("--node-stages", type=stages_path, default=None, metavar="FILE",
                        help="kwok Stage documents (YAML, several in one file, as kwok's "
                             "kustomize/stage/pod/* files) that move the nodes' Pods instead "
                             "of kubewire's built-in stages; Stages of other kinds are "
                             "ignored (default: built-in stages)")


def node_labels(text: str) -> dict[str, str]:
    """``--node-labels k=v,k2=v2`` (checked as label keys and values by ``node_flags_error``)."""
    from kubewire.cluster.nodes.node_status import parse_labels

    try:
        return parse_labels(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def stages_path(text: str) -> Path:
    """``--node-stages``: absolute, so a ``--detach``ed server reads the file the user named."""
    return Path(text).expanduser().absolute()


NODE_FLAGS = ("name_prefix", "naming", "cpu", "memory", "pods", "ephemeral_storage", "labels",
              "pod_cidr", "stages")


def node_settings(args: argparse.Namespace) -> dict[str, object]:
    """The ``--node-*`` flags by ``FleetOptions`` field name (None: not given)."""
    return {("stages_file" if name == "stages" else name): getattr(args, f"node_{name}")
            for name in NODE_FLAGS}


def node_flags_error(args: argparse.Namespace) -> str | None:
    """One line refusing ``--node-*`` values that cannot make a fleet (a bad quantity, label,
    pod CIDR, or an unreadable stages file); None when they can or none was given."""
    settings = node_settings(args)
    if all(value is None for value in settings.values()):
        return None  # nothing to check: the defaults make a fleet (keeps the client unloaded)
    from kubewire.cluster.nodes.flags import fleet_options

    try:
        fleet_options(args.nodes, settings)
    except ValueError as err:
        return str(err)
    return None


def node_count(text: str) -> int:
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of nodes: {text!r}") from None
    if count < 0:
        raise argparse.ArgumentTypeError(f"the number of nodes must be 0 or more: {count}")
    return count


def controller_manager_command(args: argparse.Namespace) -> int:
    """``kubewire controller-manager``: until interrupted."""
    from kubewire.client import create_client
    from kubewire.cluster.components import ComponentOptions
    from kubewire.cluster.controllers.hpa import flag_options
    from kubewire.cluster.manager import Election, run_controller_manager
    from kubewire.cluster.nodes.flags import fleet_options
    from kubewire.server.controllers.selection import parse_controllers

    chosen = parse_controllers(args.controllers)
    election = Election(args.leader_elect_lease_duration, args.leader_elect_renew_deadline,
                        args.leader_elect_retry_period) if args.leader_elect else None

    async def run() -> None:
        async with await create_client(args.kubeconfig, context=args.context) as client:
            options = ComponentOptions(nodes=args.nodes, extra=flag_options(
                args.horizontal_pod_autoscaler_sync_period,
                args.horizontal_pod_autoscaler_tolerance,
                args.horizontal_pod_autoscaler_downscale_stabilization),
                fleet=fleet_options(args.nodes, node_settings(args)))
            await run_controller_manager(client, chosen.enabled, options, election)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run())
    return 0


def go_bool(text: str) -> bool:
    """A boolean flag's value as pflag reads it (Go's ``strconv.ParseBool``)."""
    if text in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if text in ("0", "f", "F", "FALSE", "false", "False"):
        return False
    raise argparse.ArgumentTypeError(f'strconv.ParseBool: parsing "{text}": invalid syntax')


def leader_election_error(args: argparse.Namespace) -> str | None:
    """client-go's refusal of the leader election durations, when --leader-elect is on."""
    if args.leader_elect is False or (args.leader_elect is None and not (
            args.storage_backend or args.etcd_servers or args.workers > 1)):
        return None
    from kubewire.client.leaderelection.decision import LeaderElectionConfig, config_errors

    errors = config_errors(LeaderElectionConfig(
        name=args.leader_elect_resource_name, namespace=args.leader_elect_resource_namespace,
        identity="-", lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period))
    return errors[0] if errors else None


DEFAULT_ISSUER = "https://kubernetes.default.svc.cluster.local"


def service_account_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The ``ServerConfig`` fields of the service-account flags."""
    issuers = args.service_account_issuer or [DEFAULT_ISSUER]
    return {"service_account_issuer": issuers[0],
            "service_account_other_issuers": tuple(issuers[1:]),
            "service_account_key_files": tuple(args.service_account_key_file),
            "service_account_signing_key_file": args.service_account_signing_key_file,
            "api_audiences": tuple(a for a in args.api_audiences.split(",") if a),
            "service_account_jwks_uri": args.service_account_jwks_uri,
            "service_account_max_token_expiration_s":
                int(args.service_account_max_token_expiration)}


def service_account_error(args: argparse.Namespace) -> str | None:
    """kube-apiserver's refusal of the service-account flags (``sa_keys``)."""
    from kubewire.server.access.sa_options import issuer_errors, max_expiration_error

    errors = issuer_errors(args.service_account_issuer or [DEFAULT_ISSUER],
                           args.service_account_jwks_uri)
    cap = max_expiration_error(args.service_account_max_token_expiration)
    if cap:
        errors.append(cap)
    return errors[0] if errors else None


def _add_access_flags(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--insecure-http", action="store_true",
                       help="serve plain HTTP (local experiments only: without a token file "
                            "every request is admin; default: HTTPS)")
    serve.add_argument("--tls-cert-file", type=Path, default=None,
                       help="serving certificate (default: made in DIR/pki by kubewire's CA)")
    serve.add_argument("--tls-private-key-file", type=Path, default=None,
                       help="the serving certificate's key (default: made in DIR/pki)")
    serve.add_argument("--tls-san", action="append", default=[],
                       help="extra DNS name or IP for the serving certificate (repeatable; "
                            "default: none)")
    serve.add_argument("--client-ca-file", type=Path, default=None,
                       help="CA that signs client certificates (default: DIR/pki/ca.crt)")
    serve.add_argument("--token-auth-file", type=Path, default=None,
                       help="kube-apiserver token file: token,user,uid[,\"groups\"] "
                            "(default: DIR/tokens.csv)")
    serve.add_argument("--anonymous-auth", type=go_bool, nargs="?", const=True, default=False,
                       help="requests without credentials are system:anonymous on every path, "
                            "authorized as any user's, as kube's default (default: false: "
                            "only /healthz, /livez, /readyz, /version without credentials, "
                            "401 elsewhere)")
    serve.add_argument("--service-account-issuer", action="append", default=None,
                       help="iss of the service-account tokens (repeatable: the first issues, "
                            "all are accepted; default: "
                            "https://kubernetes.default.svc.cluster.local)")
    serve.add_argument("--service-account-key-file", type=Path, action="append", default=[],
                       help="PEM file of public (or private) keys that verify service-account "
                            "tokens (repeatable; default: the signing key)")
    serve.add_argument("--service-account-signing-key-file", type=Path, default=None,
                       help="private key (RSA or ECDSA PEM) that signs service-account tokens "
                            "(default: DIR/pki/sa.key, made on first use)")
    serve.add_argument("--api-audiences", default="",
                       help="comma-separated audiences a token must name to authenticate "
                            "(default: the first service-account issuer)")
    serve.add_argument("--service-account-jwks-uri", default="",
                       help="jwks_uri of /.well-known/openid-configuration (default: "
                            "https://ADDRESS/openid/v1/jwks)")
    serve.add_argument("--service-account-max-token-expiration", type=duration(zero=True),
                       default=0.0,
                       help="longest service-account token a TokenRequest gets, e.g. 48h "
                            "(1h to 2^32s; default: no limit)")
    serve.add_argument("--authorization-mode", action="append", default=[],
                       help="ordered, comma-separated authorizers, as kube-apiserver's (the flag "
                            "may repeat: its lists are joined): "
                            "AlwaysAllow, AlwaysDeny, ABAC, RBAC (default: ABAC with "
                            "--authorization-policy-file, else AlwaysAllow; system:masters "
                            "may always do everything)")
    serve.add_argument("--authorization-policy-file", type=Path, default=None,
                       help="ABAC policy, one JSON Policy per line, for mode ABAC (default: none)")
    serve.add_argument("--audit-log-path", default=None,
                       help="append audit.k8s.io/v1 events, one JSON line each, to this file "
                            "('-': standard output); needs --audit-policy-file (default: "
                            "no audit log)")
    serve.add_argument("--audit-policy-file", type=Path, default=None,
                       help="kube's audit Policy (YAML or JSON) deciding what is audited, at "
                            "levels None, Metadata, Request and RequestResponse (default: none)")
    serve.add_argument("--audit-log-maxsize", type=non_negative, default=0,
                       help="megabytes of audit log before it rotates (0: 100, as kube)")
    serve.add_argument("--audit-log-maxbackup", type=non_negative, default=10,
                       help="rotated audit logs kept (0: all, kube's default; kubewire keeps 10 "
                            "so the log stays bounded)")
    serve.add_argument("--audit-log-maxage", type=non_negative, default=0,
                       help="days a rotated audit log is kept (0: no limit)")


def positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text}")
    return value


def non_negative(text: str) -> int:
    """An audit log rotation flag: kube refuses negative ones."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid int value: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} can't be a negative number")
    return value


def _add_user_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    user = sub.add_parser(
        "user", help="issue, list and revoke users' credentials (kubewire user add|list|revoke)",
        description="kubewire user add NAME: issue credentials and print a kubeconfig "
                    "(`kubewire user NAME ...` is the same); kubewire user list; kubewire user "
                    "revoke NAME.", formatter_class=HelpFormatter)
    actions = user.add_subparsers(dest="user_action", metavar="{add,list,revoke}")
    add = actions.add_parser("add", help="issue credentials for a user and print a kubeconfig",
                             formatter_class=HelpFormatter)
    add.add_argument("name", type=user_name, help="the user's name (the certificate's CN)")
    add.add_argument("--group", action="append", default=[],
                     help="a group (repeatable; default: none)")
    add.add_argument("--token", action="store_true",
                     help="a bearer token in the token file instead of a client certificate")
    add.add_argument("--role", choices=USER_ROLES, default=None,
                     help="bind the user to kube's default ClusterRole of that name: in "
                          "--namespace (a RoleBinding), else cluster-wide (a "
                          "ClusterRoleBinding); needs the server running (default: no binding)")
    add.add_argument("--namespace", default=None,
                     help="the namespace --role applies to, and the kubeconfig's namespace "
                          "(default: cluster-wide, and 'default' in the kubeconfig)")
    add.add_argument("--server", default=None, help="server URL (default: DIR/kubeconfig's)")
    _add_user_files(add)
    listing = actions.add_parser("list", help="users the data dir issued credentials to, and "
                                              "their bindings when the server is running",
                                 formatter_class=HelpFormatter)
    _add_user_files(listing)
    revoke = actions.add_parser(
        "revoke", help="remove a user's tokens (refused at once) and the bindings --role made; "
                       "client certificates stay valid until they expire (kube has no CRL)",
        formatter_class=HelpFormatter)
    revoke.add_argument("name", type=user_name, help="the user's name")
    _add_user_files(revoke)


USER_ACTIONS = ("add", "list", "revoke")



def user_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("a user name cannot be empty")
    return text


def _add_user_files(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, default=Path("./data"),
                        help="the server's data directory, with its CA and kubeconfig "
                             "(default ./data)")
    parser.add_argument("--token-auth-file", type=Path, default=None,
                        help="the token file the server reads (default: DIR/tokens.csv)")


def user_argv(argv: list[str]) -> list[str]:
    """``kubewire user NAME ...`` (the first form) is ``kubewire user add NAME ...``; an action
    after options (``kubewire user --data-dir d list``) is put first."""
    if len(argv) < 2 or argv[0] != "user":
        return argv
    rest, at = argv[1:], 0
    while at < len(rest):  # the first positional word, past options and their values
        word = rest[at]
        if word in ("-h", "--help"):
            return argv
        if not word.startswith("-") or word == "-":
            break
        at += 1 if word == "--token" or "=" in word else 2
    if at < len(rest) and rest[at] in USER_ACTIONS:
        return ["user", rest[at], *rest[:at], *rest[at + 1:]]
    return ["user", "add", *rest] if at < len(rest) else argv


def _add_repair_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    repair = sub.add_parser(
        "repair", help="serve a store that lost revisions again: keep what it holds, move its "
                       "revision past every one it gave out, and make clients relist",
        formatter_class=HelpFormatter)
    repair.add_argument("--data-dir", type=Path, default=Path("./data"),
                        help="the data directory whose store to repair (default ./data)")
    repair.add_argument("--accept-data-loss", action="store_true",
                        help="do it (default: only report what the store holds)")


# --- kubewire record, replay, snapshot (kubewire/testing: record, replay, snapshot) ----------

def _add_server_flags(command: argparse.ArgumentParser, *, data_dir: bool) -> None:
    command.add_argument("--kubeconfig", type=Path, default=None,
                         help="the cluster's kubeconfig (default: "
                              + ("DIR/kubeconfig of --data-dir" if data_dir
                                 else "$KUBECONFIG, else ~/.kube/config") + ")")
    command.add_argument("--context", default=None,
                         help="the kubeconfig's context (default: its current one)")
    if data_dir:
        command.add_argument("--data-dir", type=Path, default=Path("./data"),
                             help="a kubewire server's data directory, for its kubeconfig "
                                  "(default ./data)")


def _add_trace_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    record = sub.add_parser(
        "record", help="list and watch kinds of any cluster into a trace (JSON lines)",
        formatter_class=HelpFormatter,
        description="Write a trace: a header, every object the lists hold, then every watch "
                    "event, until --duration or Ctrl-C. 'kubewire replay' plays it into a "
                    "kubewire server.")
    _add_server_flags(record, data_dir=False)
    record.add_argument("--kinds", default=None,
                        help="comma-separated plural.group names: pods,configmaps,"
                             "deployments.apps,widgets.example.com (default: every kind that "
                             "can be listed and watched)")
    record.add_argument("--namespaces", default=None,
                        help="comma-separated namespaces of namespaced kinds (default: all)")
    record.add_argument("--duration", type=duration(), default=None,
                        help="stop after this long, a Go duration or seconds (default: at "
                             "Ctrl-C)")
    record.add_argument("--redact-secrets", action="store_true",
                        help="replace the values of Secrets' data and stringData")
    record.add_argument("--redact-annotations", nargs="?", const="*", default=None,
                        metavar="KEYS",
                        help="replace annotation values: all of them (no KEYS), or only "
                             "these comma-separated keys (default: none)")
    record.add_argument("--out", "-o", type=Path, default=None,
                        help="the trace file (default: standard output)")
    replay = sub.add_parser(
        "replay", help="play a trace into a kubewire server (objects as recorded)",
        formatter_class=HelpFormatter,
        description="Write a trace's objects and events, in order, into a kubewire server "
                    "through its /kubewire/import admin endpoint: uid, timestamps, "
                    "generation, managedFields and status as recorded.")
    replay.add_argument("trace", type=Path, metavar="TRACE", help="the trace file ('-': stdin)")
    _add_server_flags(replay, data_dir=True)
    replay.add_argument("--speed", type=replay_speed, default=None,
                        help="fast (as fast as the server takes it), recorded (the recorded "
                             "pace) or a factor of it such as 2.0 (default: fast)")
    snapshot = sub.add_parser("snapshot", help="save or load a kubewire server's whole state",
                              formatter_class=HelpFormatter)
    snapshot_sub = snapshot.add_subparsers(dest="action", metavar="ACTION", required=True)
    for action, text in (("save", "write every stored object to FILE"),
                         ("load", "write FILE's objects into the server")):
        one = snapshot_sub.add_parser(action, help=text, formatter_class=HelpFormatter)
        one.add_argument("file", type=Path, metavar="FILE", help="the snapshot file")
        _add_server_flags(one, data_dir=True)


def _add_simulate_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    simulate = sub.add_parser(
        "simulate", help="churn a cluster: create, scale, update and delete objects at a rate",
        formatter_class=HelpFormatter,
        description="Create, scale, update (an image change: a rollout) and delete "
                    "Deployments, Pods, Services and ConfigMaps against any server at a "
                    "chosen rate, holding at most --max-objects, until --duration, --max-ops "
                    "or Ctrl-C; a summary line each second and a table at the end.")
    _add_server_flags(simulate, data_dir=True)
    simulate.add_argument("--rate", type=float, default=10.0, metavar="OPS_PER_S",
                          help="operations a second (default 10)")
    where = simulate.add_mutually_exclusive_group()
    where.add_argument("--namespace", "-n", default=None,
                       help="the one namespace to work in (default: default)")
    where.add_argument("--namespaces", type=int, default=None, metavar="N",
                       help="work in N namespaces sim-0..sim-N-1, created if missing "
                            "(default: the one --namespace)")
    simulate.add_argument("--duration", type=duration(), default=None,
                          help="stop after this long (default: at Ctrl-C)")
    simulate.add_argument("--max-ops", type=int, default=None,
                          help="stop after this many operations (default: no limit)")
    simulate.add_argument("--max-objects", type=int, default=100,
                          help="hold at most this many objects, all kinds together "
                               "(default 100)")
    simulate.add_argument("--seed", type=int, default=0, help="the random seed (default 0)")
    simulate.add_argument("--ops", default=None, metavar="WEIGHTS",
                          help="operation mix, e.g. create=4,scale=2,update=2,delete=2 "
                               "(the default)")
    simulate.add_argument("--kinds", default=None, metavar="WEIGHTS",
                          help="kind mix, e.g. deployment=2,pod=1,service=1,configmap=2 "
                               "(the default)")
    simulate.add_argument("--cleanup", action="store_true",
                          help="at the end, delete every object this run made (and the "
                               "namespaces it created)")


def simulate(args: argparse.Namespace) -> int:
    """``kubewire simulate``: run a churn plan; Ctrl-C ends it cleanly."""
    import os
    import signal

    from kubewire.client import ClientError, ConfigError, StatusError, create_client
    from kubewire.cluster.churn import (
        DEFAULT_KIND_WEIGHTS,
        DEFAULT_OP_WEIGHTS,
        KINDS,
        OPS,
        ChurnOptions,
        ChurnPlan,
        parse_weights,
    )
    from kubewire.cluster.churn_runner import ChurnRunner

    try:
        if args.rate <= 0 or args.max_objects < 0 or (args.max_ops or 0) < 0:
            raise ValueError("--rate must be above 0, --max-objects and --max-ops 0 or more")
        namespaces = ((args.namespace or "default",) if args.namespaces is None
                      else tuple(f"sim-{i}" for i in range(args.namespaces)))
        if not namespaces:
            raise ValueError("--namespaces must be 1 or more")
        options = ChurnOptions(
            rate=args.rate, namespaces=namespaces, max_objects=args.max_objects,
            duration=args.duration, max_ops=args.max_ops, seed=args.seed,
            run_id=os.urandom(3).hex(),
            op_weights=parse_weights(args.ops, OPS) if args.ops else DEFAULT_OP_WEIGHTS,
            kind_weights=(parse_weights(args.kinds, KINDS) if args.kinds
                          else DEFAULT_KIND_WEIGHTS))
    except ValueError as exc:
        print(f"kubewire: simulate: {exc}", file=sys.stderr)
        return 2
    kubeconfig = args.kubeconfig
    if kubeconfig is None and args.data_dir is not None:
        kubeconfig = args.data_dir / "kubeconfig"

    async def run() -> int:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGINT, stop.set)
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        async with await create_client(kubeconfig, context=args.context) as client:
            runner = ChurnRunner(client, ChurnPlan(options), out=sys.stderr)
            made = await runner.ensure_namespaces() if args.namespaces is not None else []
            print(f"run {options.run_id}: {options.rate:g} ops/s in "
                  f"{', '.join(namespaces)}", file=sys.stderr)
            stats = await runner.run(stop)
            print(stats.table())
            if args.cleanup:
                deleted = await runner.cleanup(made, options.run_id)
                print(f"cleanup: deleted {deleted} objects"
                      + (f" and namespaces {', '.join(made)}" if made else ""))
        return 0

    try:
        return asyncio.run(run())
    except (ConfigError, ClientError, StatusError, OSError) as exc:
        print(f"kubewire: simulate: {exc}", file=sys.stderr)
        return 1


def replay_speed(text: str) -> float | None:
    from kubewire.testing.trace import parse_speed

    try:
        return parse_speed(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def trace_command(args: argparse.Namespace) -> int:
    """``kubewire record``, ``replay``, ``snapshot save|load``: one line on failure."""
    from kubewire.client import ClientError, ConfigError, NotFound, StatusError, create_client
    from kubewire.testing.trace import TraceError

    kubeconfig = args.kubeconfig
    if kubeconfig is None and getattr(args, "data_dir", None) is not None:
        kubeconfig = args.data_dir / "kubeconfig"
    name = args.command if args.command != "snapshot" else f"snapshot {args.action}"

    async def run() -> int:
        async with await create_client(kubeconfig, context=args.context) as client:
            if args.command == "record":
                return await _record(client, args)
            if args.command == "replay":
                return await _replay(client, args)
            return await _snapshot(client, args)

    try:
        return asyncio.run(run())
    except KeyboardInterrupt:
        return 130
    except (ConfigError, StatusError, ClientError, TraceError, OSError, ValueError) as exc:
        hint = (" (is it a kubewire server? this needs its /kubewire/ admin API)"
                if isinstance(exc, NotFound) and args.command != "record" else "")
        print(f"kubewire: {name}: {exc}{hint}", file=sys.stderr)
        return 1


async def _record(client: Client, args: argparse.Namespace) -> int:
    from kubewire.testing.record import (
        DISCOVER_EVERY_S,
        Recorder,
        RecordError,
        RecordOptions,
        choose,
        parse_kinds,
        served_kinds,
    )
    from kubewire.testing.trace import Redaction, parse_annotation_keys

    redaction = Redaction(args.redact_secrets, None if args.redact_annotations is None
                          else parse_annotation_keys(args.redact_annotations))
    namespaces = None if args.namespaces is None else parse_kinds(args.namespaces)
    try:
        kinds = choose(await served_kinds(client),
                       None if args.kinds is None else parse_kinds(args.kinds))
    except RecordError as exc:
        raise ValueError(str(exc)) from None
    with contextlib.ExitStack() as stack:
        out = (sys.stdout.buffer if args.out is None
               else stack.enter_context(args.out.open("wb")))
        options = RecordOptions(namespaces, redaction, discover_every_s=(
            DISCOVER_EVERY_S if args.kinds is None else None))  # every kind: new ones too
        recorder = Recorder(client, kinds, out, options)
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(signum, recorder.stop)
        run = asyncio.create_task(recorder.run(args.duration))
        ready = asyncio.create_task(recorder.ready.wait())
        await asyncio.wait((run, ready), return_when=asyncio.FIRST_COMPLETED)
        if ready.done():  # the initial state is written and the watches run
            print(f"kubewire: recording {len(kinds)} kinds"
                  + (" (Ctrl-C to stop)" if args.duration is None else ""),
                  file=sys.stderr, flush=True)
        ready.cancel()
        events = await run
    print(f"kubewire: recorded {len(kinds)} kinds, {events} events"
          + (f" into {args.out}" if args.out else ""), file=sys.stderr)
    return 0


async def _replay(client: Client, args: argparse.Namespace) -> int:
    from kubewire.testing.replay import replay

    with contextlib.ExitStack() as stack:
        lines = (sys.stdin.buffer if str(args.trace) == "-"
                 else stack.enter_context(args.trace.open("rb")))
        result = await replay(client, lines, args.speed)
    print(f"kubewire: replayed {result.events} events ({result.imported} writes, "
          f"{result.skipped} skipped) in {result.seconds:.2f}s", file=sys.stderr)
    return 0


async def _snapshot(client: Client, args: argparse.Namespace) -> int:
    from kubewire.testing import snapshot

    if args.action == "save":
        with args.file.open("wb") as out:
            count = await snapshot.save(client, out)
        print(f"kubewire: saved {count} objects to {args.file}", file=sys.stderr)
        return 0
    with args.file.open("rb") as lines:
        result = await snapshot.load(client, lines)
    print(f"kubewire: loaded {result.events} objects ({result.imported} writes)",
          file=sys.stderr)
    return 0


# --- kubewire serve --detach, kubewire stop (server/daemon/background.py) ----------------------

def _add_background_flags(serve: argparse.ArgumentParser) -> None:
    serve.add_argument("--detach", action="store_true",
                       help="run in the background: return once the server is ready, its "
                            "output going to DIR/kubewire.log; stop it with 'kubewire stop'")
    serve.add_argument("--merge-kubeconfig", action="store_true",
                       help="with --detach: add a 'kubewire' context to the kubeconfig "
                            "kubectl writes to ($KUBECONFIG, else ~/.kube/config) and make it "
                            "current (default: leave it alone)")
    serve.add_argument("--ready-timeout", type=duration(), default=60.0,
                       help="with --detach: how long to wait for the server to be ready "
                            "(default 1m0s)")
    serve.add_argument("--ready-fd", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--workers", type=positive, default=1,
                       help="server processes sharing the port (SO_REUSEPORT), each with its "
                            "own watch cache, over one store: etcd, or the SQLite file, whose "
                            "one writer the parent runs for them all; the parent restarts a "
                            "worker that dies (default 1: one process)")
    # a worker of --workers: its index and its parent's pid (server/daemon/workers.py)
    serve.add_argument("--worker", type=int, default=None, help=argparse.SUPPRESS)
    serve.add_argument("--worker-parent", type=int, default=0, help=argparse.SUPPRESS)
    # a worker on SQLite: the parent's writer hub (storage/sqlite/writer_hub.py)
    serve.add_argument("--sqlite-hub", default=None, help=argparse.SUPPRESS)


def _add_stop_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    stop = sub.add_parser("stop", help="stop the server running on a data directory",
                          formatter_class=HelpFormatter)
    stop.add_argument("--data-dir", type=Path, default=Path("./data"),
                      help="the server's data directory (default ./data)")
    stop.add_argument("--timeout", type=duration(), default=30.0,
                      help="how long to wait for it to stop (default 30s)")


def _add_models_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    models = sub.add_parser(
        "models", help="write typed client models (msgspec) of the custom resources that "
                       "CRD YAML files define", formatter_class=HelpFormatter,
        description="Print a Python module with a model class for every served version of "
                    "every CustomResourceDefinition in the files, for kubewire.client.Api.")
    models.add_argument("files", nargs="+", metavar="FILE",
                        help="YAML with one or more CRDs ('-': standard input)")
    models.add_argument("-o", "--output", type=Path, default=None,
                        help="write the module to this file (default: standard output)")


# --- kubewire fault ... (server/faults: the /kubewire/faults and /kubewire/clock endpoints) ---

_WATCH_SCOPE = ("resource", "group", "namespace", "label_selector")
_REQUEST_SCOPE = ("verb", "resource", "group", "namespace")


def _scope_flags(parser: argparse.ArgumentParser, names: Sequence[str]) -> None:
    helps = {"verb": "kube's verb: get, list, watch, create, update, patch, delete, "
                     "deletecollection (default: any)",
             "resource": "the resource's plural, e.g. pods (default: any)",
             "group": "the API group, '' for the core group (default: any)",
             "namespace": "only in this namespace (default: any)",
             "label_selector": "only watches that asked with this label selector "
                               "(default: any)"}
    for name in names:
        parser.add_argument("--" + name.replace("_", "-"), default=None, help=helps[name])


def _rate_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=None,
                        help="the share of matching requests it acts on, 0..1 (default 1)")
    parser.add_argument("--count", type=int, default=None,
                        help="end the fault after this many injections (default: never)")


def _add_fault_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    fault = sub.add_parser("fault", help="inject faults into a running server (and move its "
                                         "manual clock)", formatter_class=HelpFormatter)
    fault.add_argument("--data-dir", type=Path, default=Path("./data"),
                       help="the server's data directory: its admin kubeconfig is used "
                            "(default ./data)")
    fault.add_argument("--kubeconfig", type=Path, default=None,
                       help="an admin's kubeconfig (default: DIR/kubeconfig)")
    faults = fault.add_subparsers(dest="fault_command", metavar="FAULT", required=True)
    faults.add_parser("list", help="the active faults")
    clear = faults.add_parser("clear", help="clear one fault, or all")
    clear.add_argument("id", nargs="?", default=None, help="the fault's id (default: all)")
    drop = faults.add_parser("drop-watches", help="end matching watch streams now")
    _scope_flags(drop, _WATCH_SCOPE)
    faults.add_parser("expire-history", help="resumes from older revisions get 410 Gone")
    stall = faults.add_parser("stall", help="matching watch streams get nothing for a while")
    _scope_flags(stall, _WATCH_SCOPE)
    stall.add_argument("--seconds", type=float, default=None,
                       help="end the stall after this long (default: when cleared)")
    bookmarks = faults.add_parser("bookmarks", help="suppress or delay watch bookmarks")
    bookmarks.add_argument("--mode", choices=("suppress", "delay"), default="suppress",
                           help="leave periodic bookmarks out, or send them late (default "
                                "suppress)")
    bookmarks.add_argument("--seconds", type=float, default=None,
                           help="with delay: how late (no default: required then)")
    bookmarks.add_argument("--initial-events-end", action="store_true",
                           help="with suppress: leave out watch-lists' initial-events-end "
                                "bookmark too (default: keep it)")
    _scope_flags(bookmarks, _WATCH_SCOPE)
    error = faults.add_parser("error", help="answer matching requests with an error Status")
    error.add_argument("--code", type=int, required=True,
                       help="429, 500, 503 or 504 (no default: required)")
    error.add_argument("--retry-after", type=int, default=None,
                       help="with 429: the Retry-After seconds (default 1)")
    _scope_flags(error, _REQUEST_SCOPE)
    _rate_flags(error)
    reset = faults.add_parser("reset", help="abort matching requests' connections")
    _scope_flags(reset, _REQUEST_SCOPE)
    _rate_flags(reset)
    latency = faults.add_parser("latency", help="delay matching requests")
    latency.add_argument("--seconds", type=float, required=True,
                         help="how long each waits (no default: required)")
    _scope_flags(latency, _REQUEST_SCOPE)
    _rate_flags(latency)
    faults.add_parser("fail-store", help="writes answer 500 and /readyz fails")
    faults.add_parser("recover-store", help="clear store failures")
    faults.add_parser("clock", help="the server's clock")
    advance = faults.add_parser("advance-clock", help="move a manual clock forward")
    advance.add_argument("seconds", type=float, help="how far to move it")


_FAULT_TYPES = {"drop-watches": "dropWatches", "expire-history": "expireHistory",
                "stall": "stall", "bookmarks": "bookmarks", "error": "error",
                "reset": "reset", "latency": "latency", "fail-store": "storeFailure"}
_SPEC_KEYS = {"label_selector": "labelSelector", "initial_events_end": "initialEventsEnd",
              "retry_after": "retryAfterSeconds"}
_SPEC_FIELDS = ("verb", "resource", "group", "namespace", "label_selector", "seconds", "mode",
                "code", "rate", "count", "retry_after", "initial_events_end")


def fault_spec(args: argparse.Namespace) -> dict[str, object]:
    """The JSON spec a ``kubewire fault`` command posts (flags not given are left out)."""
    spec: dict[str, object] = {"type": _FAULT_TYPES[args.fault_command]}
    for name in _SPEC_FIELDS:
        value = getattr(args, name, None)
        if value is not None and value is not False:
            spec[_SPEC_KEYS.get(name, name)] = value
    return spec


def run_fault(args: argparse.Namespace) -> int:
    """``kubewire fault ...``: one call to the server's admin API; its JSON answer on stdout,
    or one line on stderr."""
    import asyncio

    from kubewire.client.errors import ClientError
    from kubewire.status import StatusError

    kubeconfig = args.kubeconfig or args.data_dir / "kubeconfig"
    try:
        answer = asyncio.run(_fault_call(kubeconfig, args))
    except (StatusError, ClientError, OSError) as exc:
        print(f"kubewire: {exc}", file=sys.stderr)
        return 1
    print(answer.decode() if isinstance(answer, bytes) else answer)
    return 0


async def _fault_call(kubeconfig: Path, args: argparse.Namespace) -> bytes:
    import json

    from kubewire.client.client import create_client
    from kubewire.client.transport import Request

    command = args.fault_command
    async with await create_client(kubeconfig) as client:
        if command == "list":
            return await client.request(Request("GET", "/kubewire/faults"))
        if command == "clear":
            path = "/kubewire/faults" + (f"/{args.id}" if args.id else "")
            return await client.request(Request("DELETE", path))
        if command == "clock":
            return await client.request(Request("GET", "/kubewire/clock"))
        if command == "advance-clock":
            body = json.dumps({"advanceSeconds": args.seconds}).encode()
            return await client.request(Request("POST", "/kubewire/clock", body=body))
        if command == "recover-store":
            listed = json.loads(await client.request(Request("GET", "/kubewire/faults")))
            cleared = 0
            for item in listed["items"]:
                if item["type"] == "storeFailure":
                    await client.request(Request("DELETE", f"/kubewire/faults/{item['id']}"))
                    cleared += 1
            return json.dumps({"cleared": cleared}).encode()
        body = json.dumps(fault_spec(args)).encode()
        return await client.request(Request("POST", "/kubewire/faults", body=body))


def write_models(args: argparse.Namespace) -> int:
    """``kubewire models``: CRD YAML in, a Python module out (client-only: no server code)."""
    from kubewire.client.crd_models import CRDError, generate_from_yaml

    try:
        texts = [(name, sys.stdin.read() if name == "-" else Path(name).read_text())
                 for name in args.files]
        module = generate_from_yaml([("<stdin>" if name == "-" else Path(name).name, text)
                                     for name, text in texts])
        if args.output is None:
            sys.stdout.write(module)
        else:
            args.output.write_text(module)
    except (OSError, UnicodeDecodeError, CRDError) as exc:
        print(f"kubewire: models: {exc}", file=sys.stderr)
        return 1
    return 0


def detach(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``kubewire serve --detach``: the same command in the background, ready when we return."""
    from kubewire.server.daemon.background import BackgroundError, start_detached

    try:
        started = start_detached(list(argv), args.data_dir, args.ready_timeout)
    except (BackgroundError, OSError) as exc:
        print(f"kubewire: {exc}", file=sys.stderr)
        return 1
    kubeconfig = started.kubeconfig.absolute()
    use = f"export KUBECONFIG={kubeconfig}\n  kubectl get namespaces"
    if args.merge_kubeconfig:
        from kubewire.server.daemon.kubeconfig_merge import kubeconfig_target, merge_into

        target = kubeconfig_target(os.environ, Path.home())
        try:
            context = merge_into(target, kubeconfig.read_text())
        except (OSError, ValueError) as exc:
            print(f"kubewire: the server runs, but merging into {target} failed: {exc}",
                  file=sys.stderr)
            return 1
        use = f"kubectl --context {context} get namespaces   # context {context} in {target}"
    print(f"kubewire is running in the background (pid {started.pid}) on {started.url}\n"
          f"  {use}\n"
          f"logs: {started.log}\n"
          f"stop: kubewire stop --data-dir {args.data_dir}")
    return 0


def stop(args: argparse.Namespace) -> int:
    from kubewire.server.daemon.background import BackgroundError, stop_server

    try:
        pid = stop_server(args.data_dir, args.timeout)
    except (BackgroundError, OSError) as exc:
        print(f"kubewire: cannot stop: {exc}", file=sys.stderr)
        return 1
    print(f"kubewire serve (pid {pid}) on {args.data_dir} stopped")
    return 0


# --- flag values ----------------------------------------------------------------------------

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
MAX_PORT = 65535


def log_level(text: str) -> str:
    level = text.strip().upper()
    if level not in LOG_LEVELS:
        raise argparse.ArgumentTypeError(
            f"unknown level {text!r}: use one of {', '.join(LOG_LEVELS)}")
    return level


def port_number(text: str) -> int:
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= port <= MAX_PORT:
        raise argparse.ArgumentTypeError(f"{port} is not a port: use 0-{MAX_PORT} "
                                         "(0 picks a free one)")
    return port


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


_DAYS = re.compile(r"(\d+(?:\.\d*)?|\.\d+)d")
SECONDS_PER_DAY = 86400.0


def parse_duration(text: str, *, days: bool = False) -> float:
    """Seconds in a duration flag: Go's ``time.ParseDuration`` (``90s``, ``1h30m``, kube's
    ``1m0s``), or bare seconds (``1800``, the form of kube's ``--min-request-timeout``); with
    ``days``, a leading ``7d`` too. Go durations have no day unit and no kube-apiserver
    duration flag takes one; ``days`` is for kubewire's own flags measured in days. Raises
    ``ValueError`` with Go's error text."""
    text = text.strip()
    if re.fullmatch(r"\d+(\.\d*)?|\.\d+", text):
        return float(text)
    found = _DAYS.match(text) if days else None
    if found is None:
        return parse_go_duration(text)
    rest = text[found.end():]
    return float(found[1]) * SECONDS_PER_DAY + (parse_go_duration(rest) if rest else 0.0)


def duration(*, zero: bool = False, days: bool = False) -> Callable[[str], float]:
    """An argparse type for a duration flag (``parse_duration``); above 0 unless ``zero``."""
    def parse(text: str) -> float:
        try:
            seconds = parse_duration(text, days=days)
        except ValueError as err:
            raise argparse.ArgumentTypeError(str(err)) from None
        if seconds < 0 or (seconds == 0 and not zero):
            raise argparse.ArgumentTypeError(
                f"must be {'0 or more' if zero else 'greater than 0'}: {text}")
        return seconds

    parse.__name__ = "duration"
    return parse


go_duration = duration()  # kube-apiserver's duration flags (``--request-timeout``)


def storage_backend(text: str) -> str:
    """``--storage-backend``: kube-apiserver's values and its message for the retired one."""
    if text == "etcd2":
        raise argparse.ArgumentTypeError("etcd2 is no longer a supported storage backend")
    return text


def etcd_servers(text: str) -> tuple[str, ...]:
    """``--etcd-servers``: a comma list of URLs (``http://127.0.0.1:2379``)."""
    servers = tuple(part.strip() for part in text.split(",") if part.strip())
    for server in servers:
        if not re.fullmatch(r"(https?://)?[^/\s]+:\d+/?", server):
            raise argparse.ArgumentTypeError(f"not an etcd endpoint (scheme://ip:port): {server}")
    return servers


def controller_list(text: str) -> tuple[str, ...]:
    """``--controllers``: comma-separated, checked as kube-controller-manager checks it."""
    from kubewire.server.controllers.selection import parse_controllers

    entries = tuple(part.strip() for part in text.split(",") if part.strip())
    try:
        parse_controllers(entries)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return entries


def config_from_args(args: argparse.Namespace) -> ServerConfig:
    from kubewire.server.context import ServerConfig
    from kubewire.server.wire.http_messages import Limits

    extra: dict[str, float | int] = {}
    if args.watch_cache_size:
        extra["ring_capacity"] = args.watch_cache_size
    if args.bookmark_interval:
        extra["bookmark_interval_s"] = args.bookmark_interval
    if args.min_request_timeout:
        extra["min_request_timeout_s"] = args.min_request_timeout
    if args.namespace_deletion_delay is not None:
        extra["namespace_deletion_delay_s"] = args.namespace_deletion_delay
    retention = Retention(max_changes=args.history_max_changes or None,
                          max_age_s=args.history_max_age or None)
    storage: Literal["sqlite", "memory", "etcd"] = (
        "etcd" if args.storage_backend or args.etcd_servers else args.storage)
    limits = Limits(request_timeout_s=args.request_timeout,
                    max_requests_inflight=args.max_requests_inflight,
                    max_mutating_requests_inflight=args.max_mutating_requests_inflight,
                    max_watches_per_user=args.max_watches_per_user)
    return ServerConfig(data_dir=args.data_dir, host=args.host, port=args.port,
                        retention=retention, limits=limits, durability=args.durability,
                        storage=storage, etcd_servers=args.etcd_servers,
                        etcd_prefix=args.etcd_prefix, etcd_cafile=args.etcd_cafile,
                        etcd_certfile=args.etcd_certfile, etcd_keyfile=args.etcd_keyfile,
                        etcd_compaction_interval_s=args.etcd_compaction_interval,
                        pod_grace_cap_s=args.pod_grace_cap,
                        manual_clock=args.manual_clock,
                        controllers=args.controllers,
                        cluster_signing_duration_s=args.cluster_signing_duration,
                        cluster=True, nodes=args.nodes,
                        node_name_prefix=args.node_name_prefix, node_naming=args.node_naming,
                        node_cpu=args.node_cpu, node_memory=args.node_memory,
                        node_pods=args.node_pods,
                        node_ephemeral_storage=args.node_ephemeral_storage,
                        node_labels=args.node_labels, node_pod_cidr=args.node_pod_cidr,
                        node_stages_file=args.node_stages,
                        hpa_sync_period_s=args.horizontal_pod_autoscaler_sync_period,
                        hpa_tolerance=args.horizontal_pod_autoscaler_tolerance,
                        hpa_downscale_stabilization_s=(
                            args.horizontal_pod_autoscaler_downscale_stabilization),
                        enable_garbage_collector=args.enable_garbage_collector,
                        components_loop=args.components_loop,
                        leader_elect=args.leader_elect,
                        leader_elect_lease_duration_s=args.leader_elect_lease_duration,
                        leader_elect_renew_deadline_s=args.leader_elect_renew_deadline,
                        leader_elect_retry_period_s=args.leader_elect_retry_period,
                        leader_elect_resource_name=args.leader_elect_resource_name,
                        leader_elect_resource_namespace=args.leader_elect_resource_namespace,
                        service_cluster_ip_range=args.service_cluster_ip_range,
                        insecure_http=args.insecure_http, tls_cert_file=args.tls_cert_file,
                        tls_key_file=args.tls_private_key_file, tls_sans=tuple(args.tls_san),
                        client_ca_file=args.client_ca_file,
                        token_auth_file=args.token_auth_file,
                        anonymous_auth=args.anonymous_auth,
                        **service_account_settings(args),
                        authorization_mode=",".join(args.authorization_mode),
                        authorization_policy_file=args.authorization_policy_file,
                        audit_log_path=args.audit_log_path,
                        audit_policy_file=args.audit_policy_file,
                        audit_log_maxsize_mb=args.audit_log_maxsize,
                        audit_log_maxbackup=args.audit_log_maxbackup,
                        audit_log_maxage_days=args.audit_log_maxage,
                        worker=args.worker is not None, sqlite_hub=args.sqlite_hub,
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


GC_GEN0_THRESHOLD = 10_000  # allocations net of frees between young collections (CPython: 700)


def tune_gc() -> None:
    """Make the cyclic garbage collector cheaper for a server whose start-up made its lasting
    objects (modules, registries, schemas, the caches' first fill).

    ``gc.freeze()`` moves every object alive now to the permanent generation: no collection
    walks them again. The young generation's threshold goes from 700 to ``GC_GEN0_THRESHOLD``:
    each write allocates (and mostly frees by reference counting) thousands of containers, so at
    700 the collector ran several young collections per request and promoted each write's
    short-lived objects to older generations, where the full collections (15-50 ms every ~0.8 s
    under a merge PATCH load, with the watch cache's objects per write) walked them. Garbage in
    reference cycles is still collected, only in larger batches (the thresholds of the older
    generations are unchanged).

    Measured with ``bench.patch_cpu`` (since merged into ``bench.request_cpu``; 16 writers, loop
    CPU per request, medians of 5 interleaved repetitions, all trees with the same code
    otherwise): no tuning 536 µs per merge PATCH and
    414 µs per create; ``freeze`` alone 522 / 413; with a young threshold of 2,000: 500 / 382;
    10,000: 483 / 388; 50,000: 470 / 374. 10,000 takes most of the gain (PATCH 0.91x untuned,
    create 0.97x) while a young collection stays short. RSS is unchanged (``bench.store_memory
    --smoke``, ``bench.idle_memory --smoke``, and ``tests/integration/test_server_gc.py``: about
    51 MB either way after rounds of creates, patches and deletes).
    """
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GC_GEN0_THRESHOLD, gen1, gen2)


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


# --- kubewire user add | list | revoke -------------------------------------------------------

def user_command(args: argparse.Namespace) -> int:
    """``kubewire user``: add (the default), list or revoke."""
    action = getattr(args, "user_action", None)
    if action == "list":
        return list_users(args)
    if action == "revoke":
        return revoke_user(args)
    if action is None:
        print("kubewire: user: say what to do: kubewire user add NAME | list | revoke NAME",
              file=sys.stderr)
        return 2
    return issue_user(args)


CN_MAX = 64


class ServerDown(Exception):
    """The data dir's server does not answer (or has never written its kubeconfig)."""


class BindingTaken(Exception):
    """The binding ``--role`` would make exists with another role or other subjects."""


def _token_file(args: argparse.Namespace) -> Path:
    return cast(Path, args.token_auth_file or args.data_dir / "tokens.csv")


def _admin_api(args: argparse.Namespace, work: Callable[..., Any]) -> Any:
    """Run ``await work(bindings_api, cluster_bindings_api)`` with the data dir's admin
    kubeconfig; ``ServerDown`` when the server is not there to answer."""
    from kubewire.client import Api, ConfigError, TransportError, create_client

    kubeconfig = args.data_dir / "kubeconfig"
    if not kubeconfig.exists():
        raise ServerDown(f"{kubeconfig} does not exist: start the server (kubewire serve "
                         f"--data-dir {args.data_dir})")

    async def run() -> Any:
        async with await create_client(kubeconfig) as client:
            group = "rbac.authorization.k8s.io/v1"
            bindings = Api(dict, client=client, api_version=group, kind="RoleBinding")
            cluster = Api(dict, client=client, api_version=group, kind="ClusterRoleBinding")
            return await work(bindings, cluster)

    try:
        return asyncio.run(run())
    except (TransportError, ConfigError) as exc:
        from kubewire.server.access.users import admin_server_url

        try:
            url = admin_server_url(args.data_dir)
        except (OSError, ValueError, KeyError, TypeError, IndexError):
            url = str(kubeconfig)
        refused = getattr(exc.__cause__, "errno", None) == errno.ECONNREFUSED
        what = "is not running" if refused else f"does not answer ({exc})"
        raise ServerDown(f"the server at {url} {what}: start it with kubewire serve "
                         f"--data-dir {args.data_dir}") from exc


async def _all_bindings(bindings: Any, cluster: Any) -> list[dict[str, Any]]:
    """Every RoleBinding (all namespaces) and ClusterRoleBinding, as plain objects with their
    kind (a list's items come without it)."""
    found: list[dict[str, Any]] = []
    for kind, items in (("RoleBinding", (await bindings.list(namespace=None)).items),
                        ("ClusterRoleBinding", (await cluster.list()).items)):
        found += [{**item, "kind": kind} for item in items]
    return found


def _bind(args: argparse.Namespace) -> str:
    """Create the binding ``--role`` asks for; say what was done (an existing one is kept)."""
    from kubewire.client import AlreadyExists
    from kubewire.server.access.user_bindings import user_binding

    body = user_binding(args.name, args.role, args.namespace)
    kind, name = body["kind"], body["metadata"]["name"]
    where = f" in {args.namespace}" if args.namespace else " cluster-wide"

    async def work(bindings: Any, cluster: Any) -> str:
        api = bindings if args.namespace else cluster
        try:
            await api.create(body, namespace=args.namespace)
        except AlreadyExists:
            found = await api.get(name, namespace=args.namespace)
            if (found.get("roleRef") != body["roleRef"]
                    or body["subjects"][0] not in (found.get("subjects") or ())):
                raise BindingTaken(f"{kind} {name}{where} exists and does not bind "
                                   f"{args.name} to ClusterRole {args.role}: delete it or "
                                   "edit it by hand") from None
            return f"{kind} {name}{where} already binds {args.name} to {args.role}"
        return f"{kind} {name}{where} binds {args.name} to ClusterRole {args.role}"

    return cast(str, _admin_api(args, work))


def issue_user(args: argparse.Namespace) -> int:
    """``kubewire user add``: the new user's kubeconfig on stdout (with ``--role``, the binding
    is made first, on the running server); one line on stderr when it cannot be done."""
    from kubewire.client import StatusError
    from kubewire.server.access.pki import load_ca
    from kubewire.server.access.users import UserRequest, user_kubeconfig

    long = [n for n in (args.name, *args.group) if len(n) > CN_MAX]
    if long and not args.token:  # X.509 bounds CN and O (RFC 5280's ub-common-name)
        print(f"kubewire: cannot issue a certificate: {long[0]!r} is longer than {CN_MAX} "
              "characters, the most a certificate's CN or O holds (use --token)",
              file=sys.stderr)
        return 1
    token_file = _token_file(args) if args.token else None
    request = UserRequest(args.name, tuple(args.group), token_file=token_file,
                          namespace=args.namespace or "default")
    try:
        if args.role is not None:
            load_ca(args.data_dir / "pki")  # no server ever ran here: say that, bind nothing
            said = _bind(args)
        text = user_kubeconfig(args.data_dir, request, server=args.server)
    except FileNotFoundError as exc:
        why = (f"{exc.filename} does not exist: start the server once first (kubewire serve "
               f"--data-dir {args.data_dir})") if exc.filename else str(exc)
        print(f"kubewire: cannot issue credentials: {why}", file=sys.stderr)
        return 1
    except (ServerDown, BindingTaken) as exc:
        print(f"kubewire: cannot bind {args.name} to {args.role}: {exc}", file=sys.stderr)
        return 1
    except StatusError as exc:
        hint = (f" (create it first: kubectl create namespace {args.namespace})"
                if (exc.details or {}).get("kind") == "namespaces" else "")
        print(f"kubewire: cannot bind {args.name} to {args.role}: {exc.message}{hint}",
              file=sys.stderr)
        return 1
    except (OSError, ValueError, KeyError, TypeError) as exc:  # a damaged or foreign file
        print(f"kubewire: cannot issue credentials: {exc}", file=sys.stderr)
        return 1
    if args.role is not None:
        print(f"kubewire: {said}", file=sys.stderr)
    print(text, end="")
    return 0


def list_users(args: argparse.Namespace) -> int:
    """``kubewire user list``: one row per credential, with the user's bindings when the
    server answers (else ``?`` and one line on stderr saying why)."""
    from kubewire.client import StatusError
    from kubewire.server.access.user_bindings import grants, table
    from kubewire.server.access.users import credentials

    try:
        known = credentials(args.data_dir, _token_file(args))
    except (OSError, ValueError) as exc:
        print(f"kubewire: cannot list users: {exc}", file=sys.stderr)
        return 1
    if not known:
        print(f"kubewire: no users in {args.data_dir} yet (kubewire user add NAME)",
              file=sys.stderr)
        return 0
    bindings: list[dict[str, Any]] | None = None
    try:
        bindings = cast(list[dict[str, Any]], _admin_api(args, _all_bindings))
    except ServerDown as exc:
        print(f"kubewire: bindings not shown: {exc}", file=sys.stderr)
    except StatusError as exc:
        print(f"kubewire: bindings not shown: {exc.message}", file=sys.stderr)
    rows = [["NAME", "CREDENTIAL", "GROUPS", "EXPIRES", "BINDINGS"]]
    for cred in known:
        expires = ("never" if cred.expires is None
                   else cred.expires.strftime("%Y-%m-%dT%H:%M:%SZ"))
        if bindings is None:
            bound = "?"
        else:
            bound = ", ".join(g.text() for g in grants(bindings, cred.user, cred.groups))
        rows.append([cred.user, cred.kind, ",".join(cred.groups) or "<none>", expires,
                     bound or "<none>"])
    print(table(rows), end="")
    return 0


def revoke_user(args: argparse.Namespace) -> int:
    """``kubewire user revoke``: remove the user's tokens (the server re-reads its token file
    and refuses them within a second), delete the bindings ``add --role`` made, and say what
    stays: client certificates (kube cannot revoke them) and bindings written by hand."""
    import time

    from kubewire.client import StatusError
    from kubewire.server.access.authn import RECHECK_SECONDS
    from kubewire.server.access.users import issued_certificates, revoke_tokens

    name = args.name
    try:
        removed = revoke_tokens(_token_file(args), name)
        revoked_at = time.monotonic()
        certs = [c for c in issued_certificates(args.data_dir) if c.user == name]
    except OSError as exc:
        print(f"kubewire: cannot revoke {name}: {exc}", file=sys.stderr)
        return 1
    down = ""
    deleted: list[str] = []
    others: list[str] = []
    try:
        deleted, others = _revoke_bindings(args, tuple({g for c in certs for g in c.groups}))
    except ServerDown as exc:
        down = str(exc)
    except StatusError as exc:
        down = exc.message
    if removed:  # past the server's re-check interval, no request gets in with them
        time.sleep(max(0.0, RECHECK_SECONDS + 0.05 - (time.monotonic() - revoked_at)))
    lines = [f"removed {removed} token(s) of {name}: the server refuses them from now on"
             ] if removed else []
    lines += [f"deleted {what}" for what in deleted]
    lines += [f"{name}'s client certificate {cert.serial} (groups: "
              f"{','.join(cert.groups) or '<none>'}) stays valid until "
              f"{cert.expires:%Y-%m-%dT%H:%M:%SZ}: kube has no revocation list for client "
              "certificates; it gets only what RBAC still grants its user and groups"
              for cert in certs]
    lines += [f"still bound, not by kubewire user: {grant}" for grant in others]
    for line in lines:
        print(f"kubewire: {line}")
    if down:
        print(f"kubewire: cannot delete {name}'s bindings: {down}", file=sys.stderr)
        return 1
    if not lines:
        print(f"kubewire: unknown user {name}: no token, certificate or binding in "
              f"{args.data_dir}", file=sys.stderr)
        return 1
    return 0


def _revoke_bindings(args: argparse.Namespace,
                     groups: tuple[str, ...]) -> tuple[list[str], list[str]]:
    """Delete the bindings ``add --role`` made for ``args.name``; return what was deleted and
    the other bindings that still name the user or ``groups``."""
    from kubewire.client import NotFound
    from kubewire.server.access.user_bindings import grants, made_for

    name = args.name

    async def work(bindings: Any, cluster: Any) -> tuple[list[str], list[str]]:
        everything = await _all_bindings(bindings, cluster)
        ours = [binding for binding in everything if made_for(binding, name)]
        deleted: list[str] = []
        for binding in ours:
            meta = binding["metadata"]
            api = bindings if binding["kind"] == "RoleBinding" else cluster
            with contextlib.suppress(NotFound):  # gone meanwhile: as good as deleted
                await api.delete(meta["name"], namespace=meta.get("namespace"))
            where = f" in {meta['namespace']}" if meta.get("namespace") else ""
            deleted.append(f"{binding['kind']} {meta['name']}{where}")
        rest = [binding for binding in everything if not made_for(binding, name)]
        return deleted, [grant.text() for grant in grants(rest, name, groups)]

    return cast(tuple[list[str], list[str]], _admin_api(args, work))


class CannotStart(Exception):
    """Why the server could not start, in one line for its user."""


# What a server that cannot start raises: its disk, its store, a file it reads at start that it
# refuses (token, policy, audit policy); anything else is a bug and keeps its traceback.
START_ERRORS = (OSError, sqlite3.Error, StorageError, AuditPolicyError, PolicyFileError,
                TokenFileError, ServiceAccountKeyError, AuthorizationModeError)


def start_error_text(exc: BaseException, data_dir: Path) -> str:
    """One line saying why the server did not start and, for lost revisions, what to do."""
    from kubewire.server.context import DATABASE_NAME

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


async def serve(config: ServerConfig, ready_fd: int | None = None) -> int:
    """Serve until SIGINT or SIGTERM (0), or until the store's writer hub drops it (1: a worker
    of ``serve --workers`` on SQLite); once listening (kubeconfig written), say so on stdout and,
    for ``serve --detach``'s parent, on ``ready_fd``."""
    from kubewire.server.app import APIServer
    from kubewire.server.daemon.background import ready_line

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
        if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
            raise CannotStart(f"{address_text(config.host, config.port)} is already in use "
                              "(another server? pick another --port, or 0 for a free one)"
                              ) from exc
        raise CannotStart(start_error_text(exc, config.data_dir)) from exc
    tune_gc()
    url = server.url
    kubeconfig = config.data_dir / "kubeconfig"
    if config.insecure_http:
        log.warning("INSECURE: serving plain HTTP%s; use it for local experiments only",
                    "" if config.token_auth_file else " and every request is admin")
    listening = ", ".join(address_text(*address) for address in server.http.addresses())
    log.info("kubewire serving on %s, listening on %s (kubeconfig: %s)", url, listening,
             kubeconfig)
    if not config.worker:  # a worker's parent says it once for all
        print(f"kubewire ready: {url} kubeconfig={kubeconfig} listening on {listening}",
              flush=True)
    if ready_fd is not None:
        with contextlib.suppress(OSError):  # the parent gave up waiting: serve on regardless
            os.write(ready_fd, ready_line(url, kubeconfig))
        os.close(ready_fd)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    trimming = asyncio.get_running_loop().create_task(trim_heap_every(HEAP_TRIM_INTERVAL_S))
    stopping = asyncio.ensure_future(stop.wait())
    lost = asyncio.ensure_future(server.store_lost.wait())
    await asyncio.wait([stopping, lost], return_when=asyncio.FIRST_COMPLETED)
    stopping.cancel()
    lost.cancel()
    trimming.cancel()
    if server.store_lost.is_set():  # a worker the writer hub dropped: its parent restarts it
        log.error("the SQLite writer hub dropped this worker's store: exiting")
    log.info("shutting down")
    await server.stop()
    return 1 if server.store_lost.is_set() else 0


def repair(args: argparse.Namespace) -> int:
    """``kubewire repair``: report, and with ``--accept-data-loss`` repair (``sqlite.repair``)."""
    from kubewire.server.context import DATABASE_NAME

    path = args.data_dir / DATABASE_NAME
    if not path.is_file():
        print(f"kubewire: cannot repair: there is no store in {args.data_dir}", file=sys.stderr)
        return 1
    try:  # never beside a server (nor another repair): the data directory's lock, then the
        lock = DataDirLock.acquire(args.data_dir, "repair")  # store's record (repair_store)
    except (DataDirInUse, OSError) as exc:
        print(f"kubewire: cannot repair: {exc} (stop it first)", file=sys.stderr)
        return 1
    try:
        return _repair_locked(args, path)
    finally:
        lock.release()


def _repair_locked(args: argparse.Namespace, path: Path) -> int:
    from kubewire.storage.sqlite.repair import inspect_store, repair_store

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


def _start_problem(args: argparse.Namespace) -> str | None:
    """Why ``serve``'s flags cannot start a server, before anything starts; None if they can."""
    if problem := data_dir_problem(args.data_dir):
        return f"--data-dir {args.data_dir}: {problem}"
    if problem := host_problem(args.host, args.port):
        return problem
    if args.storage_backend and not args.etcd_servers:
        return "--etcd-servers must be specified"
    return None


def address_text(host: str, port: int) -> str:
    """``host:port`` as bound (``[::1]:6443`` for IPv6)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def data_dir_problem(data_dir: Path) -> str | None:
    """Why ``data_dir`` cannot hold a server's files, in a few words; None if it can."""
    if data_dir.exists() and not data_dir.is_dir():
        return "not a directory"
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"cannot be made ({exc.strerror or exc})"
    if not os.access(data_dir, os.W_OK | os.X_OK):
        return "not writable"
    return None


def host_problem(host: str, port: int) -> str | None:
    """Why ``--host`` cannot be listened on (a name that does not resolve); None if it can."""
    try:
        socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM,
                           flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"--host {host}: {exc.strerror or exc}"
    except UnicodeError as exc:
        return f"--host {host}: {exc}"
    return None


WORKERS_NEED = ("--workers {n} needs a store its workers share: SQLite (the default) or "
                "--storage-backend etcd3 --etcd-servers URL (the {store} store is one process's)")


def run_server(args: argparse.Namespace, argv: Sequence[str]) -> int:
    if args.worker is not None:  # the parent holds the lock and made what is made once
        from kubewire.server.daemon.workers import die_with_parent

        return _run_locked(args) if die_with_parent(args.worker_parent) else 1
    if args.workers > 1 and args.storage == "memory" and not (
            args.storage_backend or args.etcd_servers):
        print(f"kubewire: cannot start: {WORKERS_NEED.format(n=args.workers, store='in-memory')}",
              file=sys.stderr)
        return 1
    if args.detach and args.ready_fd is None:
        return detach(args, argv)
    if problem := _start_problem(args):
        print(f"kubewire: cannot start: {problem}", file=sys.stderr)
        return 1
    try:  # one server per data directory, for this process's life (server/daemon/lock.py)
        lock = DataDirLock.acquire(args.data_dir, "serve")
    except DataDirInUse as exc:
        print(f"kubewire: cannot start: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:
        print(f"kubewire: cannot start: --data-dir {args.data_dir}: not writable "
              f"({exc.strerror or exc}: {exc.filename})", file=sys.stderr)
        return 1
    try:
        if args.workers > 1:
            return _run_workers(args, argv)
        return _run_locked(args)
    finally:
        lock.release()


def _run_workers(args: argparse.Namespace, argv: Sequence[str]) -> int:
    """``serve --workers N``: make what must exist once (the port, the PKI, the service
    account key, the admin kubeconfig), then run N workers until SIGINT or SIGTERM
    (``server/daemon/workers.py``)."""
    from kubewire.server.daemon.workers import reserve_port

    config = config_from_args(args)
    try:
        held = reserve_port(args.host, args.port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            print(f"kubewire: cannot start: {address_text(args.host, args.port)} is already in "
                  "use (another server? pick another --port, or 0 for a free one)",
                  file=sys.stderr)
        else:
            print(f"kubewire: cannot start: {exc}", file=sys.stderr)
        return 1
    try:
        host, port = held[0].getsockname()[:2]
        try:
            url = _prepare_workers(config, host, port)
        except START_ERRORS as exc:
            print(f"kubewire: cannot start: {start_error_text(exc, config.data_dir)}",
                  file=sys.stderr)
            return 1
        listening = ", ".join(address_text(*sock.getsockname()[:2]) for sock in held)
        worker_argv = _without_ready_fd(argv)
        hub = None
        if config.storage == "sqlite":  # one writer for them all (storage/sqlite/writer_hub)
            try:
                hub = _start_hub(config)
            except START_ERRORS as exc:
                print(f"kubewire: cannot start: {start_error_text(exc, config.data_dir)}",
                      file=sys.stderr)
                return 1
            worker_argv += ["--sqlite-hub", hub.socket_path]

        def command(index: int) -> list[str]:
            return [sys.executable, "-m", "kubewire.cli", *worker_argv, "--port", str(port),
                    "--worker", str(index), "--worker-parent", str(os.getpid())]

        try:
            return asyncio.run(_supervise(args, command, url, listening, hub))
        finally:
            if hub is not None:
                _stop_hub(hub)
    finally:
        for sock in held:
            sock.close()


def _start_hub(config: ServerConfig) -> HubProcess:
    """The SQLite writer hub of ``serve --workers`` on the default store, started and ready."""
    from kubewire.server.context import DATABASE_NAME
    from kubewire.storage.sqlite.writer_hub import HubProcess

    hub = HubProcess(config.data_dir / DATABASE_NAME, config.durability, config.retention,
                     config.limits.max_object_bytes)
    hub.start()
    return hub


def _stop_hub(hub: HubProcess) -> None:
    """After the workers: the hub commits what it read and exits (idempotent)."""
    if hub.process is None or hub.process.returncode is not None:
        hub.stop()  # its private socket directory
        return
    code = hub.stop()
    if code:
        log.error("the SQLite writer hub exited with %s", exit_text_of(code))


def exit_text_of(code: int) -> str:
    from kubewire.server.daemon.workers import exit_text

    return exit_text(code)


def _prepare_workers(config: ServerConfig, host: str, port: int) -> str:
    """The PKI and service account key, made once before the workers read them (each would
    make its own), and the admin kubeconfig; the server's URL."""
    from kubewire.server.access.chain import tls_files
    from kubewire.server.access.kubeconfig import server_url
    from kubewire.server.access.pki import service_account_key
    from kubewire.server.app import write_admin_kubeconfig

    tls = None if config.insecure_http else tls_files(config)
    if config.service_account_signing_key_file is None:
        service_account_key(config.data_dir / "pki")  # tokens one worker issues, all accept
    url = server_url(host, port, tls=tls is not None)
    write_admin_kubeconfig(config.data_dir, url, tls)
    return url


def _without_ready_fd(argv: Sequence[str]) -> list[str]:
    """The command line without ``--ready-fd N`` (the parent's, from ``--detach``)."""
    out: list[str] = []
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--ready-fd":
            skip = True
        elif not arg.startswith("--ready-fd="):
            out.append(arg)
    return out


async def _supervise(args: argparse.Namespace, command: Callable[[int], list[str]], url: str,
                     listening: str, hub: HubProcess | None = None) -> int:
    """Run the workers; say ready once all are; stop them all on SIGINT or SIGTERM, or when
    the SQLite writer hub exits (returning 1 then)."""
    from kubewire.server.daemon.workers import Supervisor

    supervisor = Supervisor(command, args.workers)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    hub_died = asyncio.Event()
    watching = None if hub is None else asyncio.ensure_future(_watch_hub(hub, stop, hub_died))
    try:
        code = await _run_supervisor(args, supervisor, stop, (url, listening))
    finally:
        if watching is not None:
            watching.cancel()
        if hub is not None:  # after the workers (which wrote through it), and before the loop
            await asyncio.to_thread(_stop_hub, hub)  # ends: its watch waits in a thread
    return 1 if hub_died.is_set() else code


async def _watch_hub(hub: HubProcess, stop: asyncio.Event, died: asyncio.Event) -> None:
    """Stop everything if the hub exits: without it no worker can write."""
    assert hub.process is not None
    code = await asyncio.to_thread(hub.process.wait)
    if not stop.is_set():
        log.error("the SQLite writer hub (pid %d) exited with %s: stopping every worker",
                  hub.process.pid, exit_text_of(code))
        died.set()
        stop.set()


async def _run_supervisor(args: argparse.Namespace, supervisor: Supervisor,
                          stop: asyncio.Event, where: tuple[str, str]) -> int:
    from kubewire.server.daemon.background import ready_line
    from kubewire.server.daemon.workers import StartFailed

    url, listening = where
    starting = asyncio.ensure_future(supervisor.start())
    stopped = asyncio.ensure_future(stop.wait())
    await asyncio.wait([starting, stopped], return_when=asyncio.FIRST_COMPLETED)
    if not starting.done():  # stopped while starting
        starting.cancel()
        await supervisor.stop()
        return 0
    try:
        starting.result()
    except StartFailed as exc:
        stopped.cancel()
        print(f"kubewire: cannot start: {exc}", file=sys.stderr)
        return 1
    kubeconfig = args.data_dir / "kubeconfig"
    pids = ",".join(map(str, supervisor.pids))
    log.info("kubewire serving on %s with %d workers (pids %s), listening on %s (kubeconfig: "
             "%s)", url, args.workers, pids, listening, kubeconfig)
    print(f"kubewire ready: {url} kubeconfig={kubeconfig} listening on {listening} "
          f"workers={args.workers} pids={pids}", flush=True)
    if args.ready_fd is not None:
        with contextlib.suppress(OSError):
            os.write(args.ready_fd, ready_line(url, kubeconfig))
        os.close(args.ready_fd)
    await stopped
    log.info("shutting down %d workers", args.workers)
    await supervisor.stop()
    return 0


def _run_locked(args: argparse.Namespace) -> int:
    if not args.insecure_http:
        mmap_tls_read_buffers()
    run = asyncio.run
    with contextlib.suppress(ImportError):
        import uvloop

        run = uvloop.run
    try:
        code = run(serve(config_from_args(args), args.ready_fd))
    except CannotStart as exc:
        log.debug("start failed", exc_info=exc.__cause__)  # the traceback, for --log-level debug
        if args.worker is not None and args.ready_fd is not None:
            from kubewire.server.daemon.workers import report_failure

            with contextlib.suppress(OSError):  # the parent says it, once for all workers
                report_failure(args.ready_fd, str(exc))
                return 1
        print(f"kubewire: cannot start: {exc}", file=sys.stderr)
        return 1
    return code


# Each subcommand but ``serve`` (which also reads its argv) and ``user`` (the default).
_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "repair": repair, "stop": stop, "models": write_models, "fault": run_fault,
    "record": trace_command, "replay": trace_command, "snapshot": trace_command,
    "controller-manager": controller_manager_command, "simulate": simulate}


def main(argv: Sequence[str] | None = None) -> int:
    argv = user_argv(list(sys.argv[1:] if argv is None else argv))
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare ``kubewire``: what it can do
        parser.print_help()
        return 0
    if getattr(args, "merge_kubeconfig", False) and not args.detach:
        parser.error("--merge-kubeconfig goes with --detach")
    if args.command == "serve" and (refused := leader_election_error(args)) is not None:
        parser.error(refused)
    if args.command == "serve" and (refused := service_account_error(args)) is not None:
        parser.error(refused)
    if args.command in ("serve", "controller-manager") and \
            (refused := node_flags_error(args)) is not None:
        parser.error(refused)
    worker = getattr(args, "worker", None)  # ``serve --workers``: say which worker logs
    who = "" if worker is None else f"worker {worker} pid {os.getpid()} "
    logging.basicConfig(level=getattr(args, "log_level", "INFO"),
                        format=f"%(asctime)s %(levelname)s {who}%(name)s: %(message)s")
    if args.command in ("serve", "controller-manager"):  # long-running, as Go's: many sockets
        raise_open_file_limit()
    try:
        if args.command == "serve":
            return run_server(args, argv)
        run: Callable[[argparse.Namespace], int] = _COMMANDS.get(args.command, user_command)
        return run(args)
    except ModuleNotFoundError as exc:  # a client-only install
        if (exc.name or "").split(".")[0] not in SERVER_EXTRA_MODULES:
            raise
        print(f"kubewire: {args.command} needs the server's dependencies ({exc.name} is "
              "missing): pip install 'kubewire[server]'", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
