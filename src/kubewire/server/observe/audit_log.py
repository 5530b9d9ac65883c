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
or standard output for ``-``. Lines are written once per event-loop turn, so a burst of
requests costs one ``write`` call; a failed write is logged and the request goes on (kube's
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
    LEVEL_NONE,
    RECEIVED,
    STARTED,
    AuditEvent,
    AuditPolicy,
    PolicyError,
    complete_object_ref,
    event_line,
    object_ref,
    parse_policy,
    request_uri,
    response_status,
    source_ips,
    user_agent,
)
from kubewire.server.observe.httplog import audit_id
from kubewire.server.request.routes import Route
from kubewire.server.wire.encoding import decode_object
from kubewire.server.wire.http_messages import Request, Response
from kubewire.server.wire.websocket import WebSocketStream
from kubewire.status import StatusError

log = logging.getLogger(__name__)

def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)


class AuditFile:
    """Where event lines go: appended to a file, or standard output for ``-``."""

    def __init__(self, path: str) -> None:
        self.path = path
        if path == "-":
            self._fd = sys.stdout.fileno()
            self._owned = False
        else:
            target = Path(path)
            target.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            self._fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
            self._owned = True
        self._pending: list[bytes] = []
        self._scheduled = False

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
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view):]
        except OSError:
            log.exception("cannot write to the audit log %s", self.path)

    def close(self) -> None:
        self.flush()
        if self._owned and self._fd >= 0:
            os.close(self._fd)
        self._fd = -1


class AuditRecord:
    """One audited request: its event and the stages still to write."""

    __slots__ = ("_file", "_omit", "_route", "_watch", "event")

    def __init__(self, event: AuditEvent, omit: frozenset[str], file: AuditFile,
                 route: Route | None) -> None:
        self.event = event
        self._omit = omit
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

    def finish(self, request: Request, response: Response | None, error: StatusError | None,
               code: int) -> None:
        """The request was answered (or its stream began): write the remaining stages."""
        event = self.event
        if event.object_ref is not None and request.method in ("POST", "PUT"):
            sent = _sent_object(request, self._route)
            if sent is not None:
                event.object_ref = complete_object_ref(event.object_ref, sent)
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
        event.response_status = response_status(
            code, error.to_status() if error is not None else None)
        if self._watch:
            self.write(STARTED)
        self.write(COMPLETE)


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

    @classmethod
    def from_files(cls, log_path: str | None, policy_path: Path | None) -> Auditor | None:
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
        return cls(policy, AuditFile(log_path))

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
        record = AuditRecord(event, config.omit_stages, self.file, route)
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
