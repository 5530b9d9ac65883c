"""The string formats a CRD schema enforces: kube-openapi's ``strfmt.Default`` registry.

Cases follow the registered validators (``kube-openapi:pkg/validation/strfmt/default.go``,
``date.go``, ``time.go`` ``IsDateTime``, ``duration.go`` ``ParseDuration``, ``bson.go``; the
govalidator functions they name) and apiextensions' supported list
(``pkg/apiserver/validation/formats.go``).
"""

from __future__ import annotations

import pytest

from kubewire.server.apiextensions.schemas import formats
from kubewire.server.apiextensions.schemas.structural import SUPPORTED_FORMATS

CASES = [
    ("date", "2024-02-29", True), ("date", "2023-02-29", False), ("date", "2024-1-02", False),
    ("date-time", "2024-01-02T03:04:05Z", True), ("datetime", "2024-01-02t03:04:05.5+01:00", True),
    ("date-time", "2024-01-02 03:04:05Z", False), ("date-time", "2024-01-02T24:00:00Z", False),
    ("duration", "1h30m", True), ("duration", "3 days", True), ("duration", "abc", False),
    ("ipv4", "10.0.0.1", True), ("ipv4", "010.0.0.1", True), ("ipv4", "::1", False),
    ("ipv4", "::ffff:1.2.3.4", True), ("ipv6", "::1", True), ("ipv6", "1.2.3.4", False),
    ("cidr", "10.0.0.0/8", True), ("cidr", "fd00::/64", True), ("cidr", "10.0.0.0/33", False),
    ("mac", "00:11:22:33:44:55", True), ("mac", "0011.2233.4455", True), ("mac", "00:11", False),
    ("hostname", "example.com", True), ("hostname", "-bad", False),
    ("uuid", "123e4567-e89b-12d3-a456-426614174000", True), ("uuid", "123", False),
    ("uuid4", "123e4567-e89b-42d3-a456-426614174000", True),
    ("uuid4", "123e4567-e89b-12d3-a456-426614174000", False),
    ("byte", "aGVsbG8=", True), ("byte", "abc", False), ("byte", "", False),
    ("ssn", "123-45-6789", True), ("ssn", "123456789", False),
    ("isbn10", "0321751043", True), ("isbn13", "978-0321751041", True), ("isbn", "123", False),
    ("creditcard", "4111 1111 1111 1111", True), ("creditcard", "4111 1111 1111 1112", False),
    ("hexcolor", "#fff", True), ("hexcolor", "#ffff", False),
    ("rgbcolor", "rgb(0, 128, 255)", True), ("rgbcolor", "rgb(256,0,0)", False),
    ("bsonobjectid", "507f1f77bcf86cd799439011", True), ("bsonobjectid", "507f", False),
    ("email", "a@example.com", True), ("email", "Jo <jo@example.com>", True),
    ("email", "nope", False), ("uri", "https://example.com/x", True), ("uri", "/x", True),
    ("uri", "example", False), ("password", "anything", True),
]


@pytest.mark.parametrize(("name", "value", "ok"), CASES)
def test_format_checks(name: str, value: str, ok: bool) -> None:
    assert formats.check(name, value) is ok


def test_registry_is_apiextensions_supported_list() -> None:
    """Every format apiextensions keeps is in the registry, and nothing else."""
    assert formats.KNOWN == SUPPORTED_FORMATS
    assert formats.known("date-time") and not formats.known("int32")
