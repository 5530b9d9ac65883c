"""The audit log: kube-apiserver's log backend (``--audit-log-path``, ``--audit-policy-file``).

Each request the policy audits gets an ``AuditRecord`` once it is authenticated, and its stages
are written as kube's audit filter writes them:

- ``RequestReceived`` at once (before impersonation and authorization, as in kube's filter
  chain); the policy is evaluated for the authenticated user, not the impersonated one;
- for watches (kube's long-running requests), ``ResponseStarted`` when the answer begins (code
  200, 101 for a WebSocket, or the error's) and ``ResponseComplete`` when the stream ends;
- ``ResponseComplete`` for everything else, with the answer's code, and for a Status answer its
  status, message, reason and details.

A request that fails authentication gets one ``ResponseStarted`` event with an empty user and
the 401 Status (kube's ``WithFailedAuthenticationAudit``). Events carry the impersonated user
and the authorization decision (``authorization.k8s.io/decision`` and ``/reason``) once known.

The log is a file opened in append mode (created 0600 in a 0700 directory, as kube creates it)
or standard output for ``-``. A request's lines are written before its answer leaves (a
reader of the log after a request sees it, as with kube's blocking backend); lines written
meanwhile (watch stages, other requests) are joined into one ``write`` per loop turn. The file
rotates as kube's does (``--audit-log-maxsize``/``-maxbackup``/``-maxage``: ``log_rotation``),
so it holds at most the size bound (100 MB by default) and, with ``--audit-log-maxbackup``, a
bounded number of backups; a failed write is logged and the request goes on (kube's
default ``blocking`` mode ignores backend errors too). Without ``--audit-log-path`` nothing of
this runs: the app holds no auditor.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import os
import sys
import uuid
from pathlib import Path
from typing import Any

from kubewire.server.access.authn import ANONYMOUS_USER, UserInfo
from kubewire.server.access.chain import attributes
from kubewire.server.observe.audit import (
    COMPLETE,
    LEVEL_METADATA,
    LEVEL_NONE,
    LEVEL_REQUEST_RESPONSE,
    RECEIVED,
    STARTED,
    AuditEvent,
    AuditPolicy,
    PolicyError,
    RequestConfig,
    complete_object_ref,
    event_line,
    object_json,
    object_ref,
    parse_policy,
    raw_json,
    request_uri,
    response_status,
    source_ips,
    user_agent,
)
from kubewire.server.observe.httplog import audit_id
from kubewire.server.observe.log_rotation import Rotation, backup_name, backup_time
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import decode_object
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.wire.websocket import WebSocketStream
from kubewire.status import StatusError

log = logging.getLogger(__name__)

def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class AuditFile:
    """Where event lines go: appended to a file (rotated as ``log_rotation`` decides), or
    standard output for ``-``."""

    def __init__(self, path: str, rotation: Rotation | None = None) -> None:
        self.path = path
        self.rotation = rotation or Rotation()
        self._size = 0
        if path == "-":
            self._fd = sys.stdout.fileno()
            self._owned = False
        else:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._fd = self._open()
            self._owned = True
        self._pending: list[bytes] = []
        self._scheduled = False

    def _open(self) -> int:
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self._size = os.fstat(fd).st_size
        return fd

    def _rotate(self) -> None:
        """Move the file aside as a backup, start a new one, drop expired backups."""
        path = Path(self.path)
        now = utc_now()
        os.close(self._fd)
        self._fd = -1
        os.replace(path, backup_name(path, now))
        self._fd = self._open()
        backups = []
        for name in path.parent.iterdir():
            stamp = backup_time(path, name)
            if stamp is not None:
                backups.append((name, stamp))
        for old in self.rotation.expired(backups, now):
            with contextlib.suppress(OSError):
                old.unlink()

    def write(self, line: bytes) -> None:
        """Queue ``line``; the queue is written at the end of this loop turn."""
        self._pending.append(line)
        if self._scheduled:
            return
        try:
            asyncio.get_running_loop().call_soon(self.flush)
        except RuntimeError:  # no loop (a test, or shutting down): write now
            self.flush()
            return
        self._scheduled = True

    def flush(self) -> None:
        self._scheduled = False
        if not self._pending:
            return
        data = b"".join(self._pending)
        self._pending.clear()
        if self._fd < 0:
            return
        if not self._owned:
            with contextlib.suppress(ValueError, OSError):
                sys.stdout.flush()  # keep lines print() wrote before ours in order
        try:
            if self._owned and self.rotation.needs_rotation(self._size, len(data)):
                self._rotate()
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError:
            log.exception("cannot write to the audit log %s", self.path)
        self._size += len(data)

    def close(self) -> None:
        self.flush()
        if self._owned and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1


class AuditRecord:
    """One audited request: its event and the stages still to write."""

    __slots__ = ("_config", "_file", "_omit", "_route", "_watch", "event")

    def __init__(self, event: AuditEvent, config: RequestConfig, file: AuditFile,
                 route: Route | None) -> None:
        self.event = event
        self._config = config
        self._omit = config.omit_stages
        self._file = file
        self._route = route
        # kube's long-running check: ResponseStarted is written too
        self._watch = event.verb == "watch"

    def write(self, stage: str) -> None:
        if stage not in self._omit:
            self._file.write(event_line(self.event, stage, utc_now()))

    # The access layer reports these as it decides (``Access.admit``).
    def impersonated(self, user: UserInfo) -> None:
        self.event.impersonated_user = user

    def authorized(self, allowed: bool, reason: str) -> None:
        self.event.authorized(allowed, reason)

    def _request_object(self, request: Request) -> None:
        """``LogRequestObject``: complete objectRef from a create's or update's object, and
        at ``Request`` level and above keep what was sent as ``requestObject``."""
        event = self.event
        if event.object_ref is None:
            return  # a non-resource request: kube logs no object for it
        if request.method in ("POST", "PUT"):
            sent = _sent_object(request, self._route)
            if sent is not None:
                event.object_ref = complete_object_ref(event.object_ref, sent)
                if event.level != LEVEL_METADATA and self._route is not None:
                    # encoded in the request's version, as kube's encoder writes it
                    resource = self._route.resource
                    typed = {"kind": resource.kind, "apiVersion": resource.api_version,
                             **{k: v for k, v in sent.items()
                                if k not in ("kind", "apiVersion")}}
                    event.request_object = object_json(typed, self._config.omit_managed_fields)
        elif event.level != LEVEL_METADATA and request.body:
            event.request_object = _request_body(request, self._config.omit_managed_fields)

    def _response_object(self, response: Response) -> None:
        """``LogResponseObject`` at ``RequestResponse`` level: the answer's object (JSON
        answers; a watch's stream is never logged)."""
        if (self.event.level == LEVEL_REQUEST_RESPONSE and self.event.object_ref is not None
                and response.content_type.startswith("application/json")):
            self.event.response_object = raw_json(response.body,
                                                  self._config.omit_managed_fields)

    def finish(self, request: Request, response: Response | None, error: StatusError | None,
               code: int) -> None:
        """The request was answered (or its stream began): write the remaining stages."""
        event = self.event
        self._request_object(request)
        stream = request.stream
        if response is None and stream is not None:  # a watch streams: the head is sent
            event.response_status = response_status(
                101 if isinstance(stream, WebSocketStream) else 200)
            self.write(STARTED)
            if stream.closed:
                self.write(COMPLETE)
                return
            previous = stream.on_close

            def closed() -> None:
                if previous is not None:
                    previous()
                self.write(COMPLETE)

            stream.on_close = closed
            return
        if response is not None:
            code = response.status
            self._response_object(response)
        event.response_status = response_status(
            code, error.to_status() if error is not None else None)
        if self._watch:
            self.write(STARTED)
        self.write(COMPLETE)


def _request_body(request: Request, omit_managed_fields: bool) -> bytes | None:
    """``LogRequestPatch``'s patch (a YAML apply patch as JSON), or ``LogRequestObject``'s
    DeleteOptions for a delete with a body; None when it does not decode."""
    if request.method == "PATCH":
        found = raw_json(request.body, omit_managed_fields)
        if found is None and "yaml" in request.header("content-type"):
            import yaml

            with contextlib.suppress(yaml.YAMLError):
                return object_json(yaml.safe_load(request.body), omit_managed_fields)
        return found
    if request.method == "DELETE":
        return raw_json(request.body, False)
    return None


def _sent_object(request: Request, route: Route | None) -> dict[str, Any] | None:
    """The object a create or update sent, decoded as its handler decodes it (JSON, YAML or
    protobuf); None when it does not decode, as kube records nothing then."""
    if route is None or route.subresource not in ("", "status"):
        return None
    try:
        return decode_object(request.body, request.header("content-type"), route.resource)
    except (StatusError, ValueError):
        return None


class Auditor:
    """The policy and the file: starts a record for each audited request."""

    def __init__(self, policy: AuditPolicy, file: AuditFile) -> None:
        self.policy = policy
        self.file = file

    def flush(self) -> None:
        """Write the lines queued so far now (before the answer leaves, as kube's blocking
        backend has written them when the handler returns)."""
        self.file.flush()

    @classmethod
    def from_files(cls, log_path: str | None, policy_path: Path | None,
                   rotation: Rotation | None = None) -> Auditor | None:
        """An auditor when both are given; as kube, a log without a policy records nothing.
        Raises ``PolicyError`` for a policy kube (or kubewire) refuses."""
        if log_path is None and policy_path is None:
            return None
        policy = None
        if policy_path is not None:
            try:
                text = policy_path.read_text()
            except (OSError, UnicodeDecodeError) as err:
                raise PolicyError(f"failed to read file path {str(policy_path)!r}: {err}"
                                  ) from None
            policy = parse_policy(text, str(policy_path))
            for warning in policy.warnings:
                log.warning("audit policy %s: %s (ignored)", policy_path, warning)
        if policy is None or log_path is None:
            log.warning("no audit policy file or no audit log path: no audit events will be "
                        "recorded")
            return None
        return cls(policy, AuditFile(log_path, rotation))

    def begin(self, request: Request, route: Route | None,
              user: UserInfo | None) -> AuditRecord | None:
        """The record of a request by ``user`` (None: authentication failed), with its
        ``RequestReceived`` stage written; None when the policy does not audit it."""
        attrs = attributes(user or ANONYMOUS_USER, request, route)
        config = self.policy.evaluate(attrs, user)
        if config.level == LEVEL_NONE:
            return None
        peer = request.extra("peername")
        event = AuditEvent(
            level=config.level,
            audit_id=audit_id(request) or request.header("audit-id") or str(uuid.uuid4()),
            request_uri=request_uri(request.path, request.raw_query), verb=attrs.verb,
            user=user,
            source_ips=source_ips(request.header("x-forwarded-for"),
                                  request.header("x-real-ip"),
                                  str(peer[0]) if isinstance(peer, tuple) and peer else None),
            user_agent=user_agent(request.header("user-agent")),
            object_ref=object_ref(attrs), received=utc_now())
        record = AuditRecord(event, config, self.file, route)
        if user is not None:
            record.write(RECEIVED)
        return record

    def unauthenticated(self, request: Request, route: Route | None,
                        error: StatusError) -> None:
        """``WithFailedAuthenticationAudit``: one ``ResponseStarted`` event, user empty."""
        record = self.begin(request, route, None)
        if record is not None:
            record.event.response_status = response_status(error.code, error.to_status())
            record.write(STARTED)

    def close(self) -> None:
        self.file.close()
