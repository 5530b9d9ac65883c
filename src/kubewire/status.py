"""Kubernetes ``Status`` objects and the exceptions that map to them.

Shared by server and client. Modelled on apimachinery's ``pkg/api/errors/errors.go``: one
exception class per ``reason``, constructors that produce kube-apiserver's exact messages, and
``to_status()`` giving the wire form in kube's field order (watch-protocol.md §8).

    StatusError
     ├── BadRequest (400)            ├── Gone / Expired (410)
     ├── Unauthorized (401)          ├── RequestEntityTooLarge (413)
     ├── Forbidden (403)             ├── UnsupportedMediaType (415)
     ├── NotFound (404)              ├── Invalid (422)
     ├── MethodNotAllowed (405)      ├── TooManyRequests (429)
     ├── NotAcceptable (406)         ├── InternalError (500)
     ├── AlreadyExists (409)         ├── ServiceUnavailable (503)
     └── Conflict (409)              └── Timeout (504)
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import ClassVar

from kubewire.json_types import JSON


class StatusError(Exception):
    """An error a client can see: a ``Status`` with code, reason, message and details."""

    code: ClassVar[int] = 500
    reason: ClassVar[str] = ""

    def __init__(
        self,
        message: str,
        details: dict[str, JSON] | None = None,
        *,
        metadata: dict[str, JSON] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.details = details
        self.metadata = metadata or {}

    @property
    def retry_after_seconds(self) -> int:
        if self.details is None:
            return 0
        value = self.details.get("retryAfterSeconds", 0)
        return value if isinstance(value, int) else 0

    def to_status(self) -> dict[str, JSON]:
        """The ``metav1.Status`` dict, keys in kube-apiserver's order."""
        status: dict[str, JSON] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": dict(self.metadata),
            "status": "Failure",
            "message": self.message,
        }
        if self.reason:
            status["reason"] = self.reason
        if self.details is not None:
            status["details"] = self.details
        status["code"] = self.code
        return status

    @classmethod
    def from_status(cls, status: dict[str, JSON]) -> StatusError:
        """Rebuild the most specific error class for a decoded ``Status`` (client side)."""
        code = int(status.get("code") or 500)
        reason = str(status.get("reason") or "")
        err_cls = _BY_REASON.get(reason) or _BY_CODE.get(code) or StatusError
        err = err_cls(
            str(status.get("message") or ""),
            status.get("details"),
            metadata=status.get("metadata") or {},
        )
        if err_cls is StatusError:
            err.code = code  # type: ignore[misc]
        return err

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.code}, {self.message!r})"


class BadRequest(StatusError):
    code = 400
    reason = "BadRequest"


class Unauthorized(StatusError):
    code = 401
    reason = "Unauthorized"


class Forbidden(StatusError):
    code = 403
    reason = "Forbidden"


class NotFound(StatusError):
    code = 404
    reason = "NotFound"


class MethodNotAllowed(StatusError):
    code = 405
    reason = "MethodNotAllowed"


class NotAcceptable(StatusError):
    code = 406
    reason = "NotAcceptable"


class AlreadyExists(StatusError):
    code = 409
    reason = "AlreadyExists"


class Conflict(StatusError):
    code = 409
    reason = "Conflict"


class Gone(StatusError):
    """410 with reason ``Gone`` (servers older than 1.18) — clients treat it like Expired."""

    code = 410
    reason = "Gone"


class Expired(Gone):
    reason = "Expired"


class RequestEntityTooLarge(StatusError):
    code = 413
    reason = "RequestEntityTooLarge"


class UnsupportedMediaType(StatusError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(StatusError):
    code = 422
    reason = "Invalid"


class TooManyRequests(StatusError):
    code = 429
    reason = "TooManyRequests"


class InternalError(StatusError):
    code = 500
    reason = "InternalError"


class ServiceUnavailable(StatusError):
    code = 503
    reason = "ServiceUnavailable"


class Timeout(StatusError):
    code = 504
    reason = "Timeout"


_BY_REASON: dict[str, type[StatusError]] = {
    c.reason: c
    for c in (
        BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed, NotAcceptable,
        AlreadyExists, Conflict, Gone, Expired, RequestEntityTooLarge, UnsupportedMediaType,
        Invalid, TooManyRequests, InternalError, ServiceUnavailable, Timeout,
    )
}
_BY_CODE: dict[int, type[StatusError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    406: NotAcceptable, 409: Conflict, 410: Gone, 413: RequestEntityTooLarge,
    415: UnsupportedMediaType, 422: Invalid, 429: TooManyRequests, 500: InternalError,
    503: ServiceUnavailable, 504: Timeout,
}


def success_status(details: dict[str, JSON] | None = None) -> dict[str, JSON]:
    """The ``Status`` kube returns for a completed delete of a kind without ReturnDeletedObject."""
    status: dict[str, JSON] = {"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Success"}
    if details is not None:
        status["details"] = details
    return status


# --- field errors (apimachinery pkg/util/validation/field/errors.go) -------------------------

_FIELD_ERROR_TEXT = {
    "FieldValueRequired": "Required value",
    "FieldValueInvalid": "Invalid value",
    "FieldValueNotSupported": "Unsupported value",
    "FieldValueForbidden": "Forbidden",
    "FieldValueDuplicate": "Duplicate value",
    "FieldValueNotFound": "Not found",
    "FieldValueTooLong": "Too long",
    "FieldValueTooMany": "Too many",
    "InternalError": "Internal error",
    "FieldValueTypeInvalid": "Invalid value",
}
# ErrorBody prints no value for these; TooMany prints its count (``Too many: 9: must have at
# most 8 items``: field.TooMany's BadValue is the actual quantity).
_OMITS_VALUE = {"FieldValueRequired", "FieldValueForbidden", "FieldValueTooLong",
                "InternalError"}
_NO_VALUE = object()


@dataclass(frozen=True)
class FieldError:
    """One field error: ``<field>: <Type>[: <value>][: <detail>]``."""

    type: str
    field: str
    value: JSON = dataclass_field(default=_NO_VALUE)
    detail: str = ""

    @property
    def body(self) -> str:
        """The message after ``<field>: `` (a cause's ``message``)."""
        parts = [_FIELD_ERROR_TEXT[self.type]]
        if self.type not in _OMITS_VALUE and self.value is not _NO_VALUE:
            parts.append(format_field_value(self.value))
        if self.detail:
            parts.append(self.detail)
        return ": ".join(parts)

    def __str__(self) -> str:
        return f"{self.field}: {self.body}" if self.field else self.body

    def to_cause(self) -> dict[str, JSON]:
        return {"reason": self.type, "message": self.body, "field": self.field}


def format_field_value(value: JSON) -> str:
    """Render a value the way Go's field errors do: strings quoted, numbers and bools bare."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, int | float):
        return str(value)
    return repr(value)


def required(path: str, detail: str = "") -> FieldError:
    return FieldError("FieldValueRequired", path, detail=detail)


def invalid(path: str, value: JSON, detail: str = "") -> FieldError:
    return FieldError("FieldValueInvalid", path, value, detail)


def not_supported(path: str, value: JSON, supported: Sequence[str]) -> FieldError:
    detail = "supported values: " + ", ".join(f'"{s}"' for s in supported)
    return FieldError("FieldValueNotSupported", path, value, detail)


def forbidden(path: str, detail: str) -> FieldError:
    return FieldError("FieldValueForbidden", path, detail=detail)


def aggregate_messages(errors: Sequence[FieldError]) -> str:
    """Join field errors as kube's ``utilerrors.NewAggregate`` does (de-duplicated)."""
    texts: list[str] = []
    for err in errors:
        text = str(err)
        if text not in texts:
            texts.append(text)
    return texts[0] if len(texts) == 1 else "[" + ", ".join(texts) + "]"


# --- constructors with kube-apiserver's exact messages ---------------------------------------

def _details(name: str, group: str, kind: str) -> dict[str, JSON]:
    details: dict[str, JSON] = {}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    details["kind"] = kind
    return details


def _qualified(name: str, group: str) -> str:
    return f"{name}.{group}" if group else name


def not_found(group: str, resource: str, name: str) -> NotFound:
    """``pods "web-0" not found`` with details ``{name, group?, kind: <resource>}``."""
    return NotFound(f'{_qualified(resource, group)} "{name}" not found',
                    _details(name, group, resource))


def already_exists(group: str, resource: str, name: str) -> AlreadyExists:
    return AlreadyExists(f'{_qualified(resource, group)} "{name}" already exists',
                         _details(name, group, resource))


def generate_name_conflict(group: str, resource: str, name: str) -> AlreadyExists:
    details = _details(name, group, resource)
    details["retryAfterSeconds"] = 1
    return AlreadyExists(
        f'{_qualified(resource, group)} "{name}" already exists, the server was not able to '
        "generate a unique name for the object", details)


OPTIMISTIC_LOCK_MESSAGE = (
    "the object has been modified; please apply your changes to the latest version and try again"
)


def conflict(group: str, resource: str, name: str, why: str = OPTIMISTIC_LOCK_MESSAGE) -> Conflict:
    return Conflict(
        f'Operation cannot be fulfilled on {_qualified(resource, group)} "{name}": {why}',
        _details(name, group, resource))


def invalid_object(group: str, kind: str, name: str, errors: Sequence[FieldError]) -> Invalid:
    """``Pod "x" is invalid: spec.containers: Required value`` with causes (details.kind = Kind)."""
    details = _details(name, group, kind)
    details["causes"] = [e.to_cause() for e in errors]
    return Invalid(f'{_qualified(kind, group)} "{name}" is invalid: {aggregate_messages(errors)}',
                   details)


def forbidden_resource(group: str, resource: str, name: str, why: str) -> Forbidden:
    prefix = _qualified(resource, group) + (f' "{name}"' if name else "")
    return Forbidden(f"{prefix} is forbidden: {why}", _details(name, group, resource))


def method_not_supported(group: str, resource: str, verb: str) -> MethodNotAllowed:
    return MethodNotAllowed(
        f'{verb} is not supported on resources of kind "{_qualified(resource, group)}"',
        _details("", group, resource))


def too_large_resource_version(requested: int, current: int) -> Timeout:
    return Timeout(
        f"Timeout: Too large resource version: {requested}, current: {current}",
        {"causes": [{"reason": "ResourceVersionTooLarge",
                     "message": "Too large resource version"}],
         "retryAfterSeconds": 1})


def too_old_resource_version(requested: int, oldest: int) -> Expired:
    """The watch-cache form: ``too old resource version: <requested> (<oldest resumable - 1>)``."""
    return Expired(f"too old resource version: {requested} ({oldest})")


def internal_error(text: str) -> InternalError:
    return InternalError(f"Internal error occurred: {text}", {"causes": [{"message": text}]})
