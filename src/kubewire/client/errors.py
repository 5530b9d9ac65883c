"""The exceptions the client raises.

API errors are the shared ``kubewire.status`` family, rebuilt from the ``Status`` the server
sent (so ``err.code``, ``err.reason``, ``err.message`` and ``err.details`` are kube's own).
Failures that never reached an API answer are ``ClientError``::

    Exception
     ├── StatusError (kubewire.status)      an API answer: code, reason, message, details
     │    ├── BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed
     │    ├── AlreadyExists, Conflict       (both 409, told apart by reason)
     │    ├── Gone ── Expired               (410: re-list, then watch again)
     │    ├── Invalid, TooManyRequests, InternalError, ServiceUnavailable, Timeout, ...
     └── ClientError
          ├── ConfigError                   no usable kubeconfig / in-cluster configuration
          │    └── NoKindMatch              discovery: the server does not serve that kind
          ├── CredentialError               an exec plugin or token file failed
          └── TransportError                connection refused, reset, TLS failure, timeout
"""

from __future__ import annotations

from kubewire.status import (
    AlreadyExists,
    BadRequest,
    Conflict,
    Expired,
    Forbidden,
    Gone,
    InternalError,
    Invalid,
    MethodNotAllowed,
    NotAcceptable,
    NotFound,
    RequestEntityTooLarge,
    ServiceUnavailable,
    StatusError,
    Timeout,
    TooManyRequests,
    Unauthorized,
    UnsupportedMediaType,
)


class ClientError(Exception):
    """A failure that is not an API answer."""


class ConfigError(ClientError):
    """The kubeconfig or in-cluster environment cannot be used."""


class NoKindMatch(ConfigError):
    """The server does not serve the kind an ``Api`` names (client-go's NoKindMatchError)."""


class CredentialError(ClientError):
    """Credentials could not be obtained (exec plugin failed, token file unreadable)."""


class TransportError(ClientError):
    """The request did not get an HTTP answer (connection, TLS or read timeout)."""


__all__ = [
    "AlreadyExists", "BadRequest", "ClientError", "ConfigError", "Conflict", "CredentialError",
    "Expired", "Forbidden", "Gone", "InternalError", "Invalid", "MethodNotAllowed",
    "NoKindMatch", "NotAcceptable", "NotFound", "RequestEntityTooLarge", "ServiceUnavailable",
    "StatusError", "Timeout", "TooManyRequests", "TransportError", "Unauthorized",
    "UnsupportedMediaType",
]
