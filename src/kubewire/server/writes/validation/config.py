"""ConfigMap and Secret validation: data keys and total size (kube ``ValidateConfigMap``,
``ValidateSecret`` in pkg/apis/core/validation/validation.go; ``IsConfigMapKey`` in
apimachinery pkg/util/validation).

Pure: objects in, ``FieldError``s out.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping

from kubewire.json_types import JSON
from kubewire.names import max_len_error, regex_error
from kubewire.resources import Resource
from kubewire.server.writes.validation.meta import dict_at
from kubewire.status import FieldError, invalid

MAX_SIZE_BYTES = 1024 * 1024  # core.MaxSecretSize, also ConfigMaps' limit
KEY_MAX_CHARS = 253  # DNS1123SubdomainMaxLength
_KEY_FMT = "[-._a-zA-Z0-9]+"
_KEY_ERROR = regex_error("a valid config key must consist of alphanumeric characters, '-', "
                         "'_' or '.'", _KEY_FMT, "key.name", "KEY_NAME", "key-name")


def config_key_problems(key: str) -> list[str]:
    """``IsConfigMapKey``."""
    problems = []
    if len(key) > KEY_MAX_CHARS:
        problems.append(max_len_error(KEY_MAX_CHARS))
    if not re.fullmatch(_KEY_FMT, key):
        problems.append(_KEY_ERROR)
    if key == ".":
        problems.append("must not be '.'")
    elif key == "..":
        problems.append("must not be '..'")
    elif key.startswith(".."):
        problems.append("must not start with '..'")
    return problems


def _decoded_len(text: JSON) -> int:
    try:
        return len(base64.b64decode(str(text), validate=False))
    except (binascii.Error, ValueError):
        return len(str(text))


def _too_long(path: str) -> FieldError:
    return FieldError("FieldValueTooLong", path, "", f"must have at most {MAX_SIZE_BYTES} bytes")


def validate_config_map(resource: Resource, obj: Mapping[str, JSON],
                        old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    errors: list[FieldError] = []
    data, binary = dict_at(obj, "data"), dict_at(obj, "binaryData")
    total = 0
    for key, value in data.items():
        errors += [invalid(f"data[{key}]", key, m) for m in config_key_problems(key)]
        if key in binary:
            errors.append(invalid(f"data[{key}]", key, "duplicate of key present in binaryData"))
        total += len(str(value).encode())
    for key, value in binary.items():
        errors += [invalid(f"binaryData[{key}]", key, m) for m in config_key_problems(key)]
        if key in data:
            errors.append(invalid(f"binaryData[{key}]", key, "duplicate of key present in data"))
        total += _decoded_len(value)
    if total > MAX_SIZE_BYTES:
        errors.append(_too_long(""))  # kube: "" names the whole object
    return errors


def validate_secret(resource: Resource, obj: Mapping[str, JSON],
                    old: Mapping[str, JSON] | None = None) -> list[FieldError]:
    errors: list[FieldError] = []
    total = 0
    for key, value in dict_at(obj, "data").items():
        errors += [invalid(f"data[{key}]", key, m) for m in config_key_problems(key)]
        total += _decoded_len(value)
    if total > MAX_SIZE_BYTES:
        errors.append(_too_long("data"))
    return errors
