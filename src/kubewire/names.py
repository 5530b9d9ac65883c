"""Name, key and label-value rules with kube-apiserver's exact messages.

Sources: ``apimachinery:pkg/util/validation/validation.go`` (DNS-1123/1035 names, qualified
names, label values, ``RegexError``) and ``.../api/validation/path/name.go`` (path segments).
Shared by label selectors (keys and values) and object-metadata validation (names, labels,
annotations, finalizers). Each check returns kube's list of messages, empty when the value is
valid, and never raises. Lengths are Go's ``len``: UTF-8 bytes.
"""

from __future__ import annotations

import functools
import re

from kubewire.go_text import go_byte_len

DNS1123_LABEL_MAX_CHARS = 63
DNS1123_SUBDOMAIN_MAX_CHARS = 253
DNS1035_LABEL_MAX_CHARS = 63
QUALIFIED_NAME_MAX_CHARS = 63
LABEL_VALUE_MAX_CHARS = 63

_DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS1123_SUBDOMAIN_FMT = _DNS1123_LABEL_FMT + "(\\." + _DNS1123_LABEL_FMT + ")*"
_DNS1035_LABEL_FMT = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE_FMT = "(" + _QUALIFIED_NAME_FMT + ")?"

_DNS1123_LABEL_RE = re.compile(_DNS1123_LABEL_FMT)
_DNS1123_SUBDOMAIN_RE = re.compile(_DNS1123_SUBDOMAIN_FMT)
_DNS1035_LABEL_RE = re.compile(_DNS1035_LABEL_FMT)
_QUALIFIED_NAME_RE = re.compile(_QUALIFIED_NAME_FMT)
_LABEL_VALUE_RE = re.compile(_LABEL_VALUE_FMT)

_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                      "characters or '-', and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case "
                          "alphanumeric characters, '-' or '.', and must start and end with an "
                          "alphanumeric character")
_DNS1035_LABEL_MSG = ("a DNS-1035 label must consist of lower case alphanumeric characters or "
                      "'-', start with an alphabetic character, and end with an alphanumeric "
                      "character")
_QUALIFIED_NAME_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start "
                       "and end with an alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric "
                    "characters, '-', '_' or '.', and must start and end with an alphanumeric "
                    "character")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``RegexError``: message, examples and the regex, spacing exactly as kube prints it."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    # kube joins "'x', " with " or ", which is what puts two spaces before each "or".
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def max_len_error(length: int) -> str:
    """``MaxLenError``."""
    return f"must be no more than {length} characters"


def is_dns1123_label(value: str) -> list[str]:
    """``IsDNS1123Label``: problems of ``value`` as a DNS-1123 label (empty when valid)."""
    errs = ([max_len_error(DNS1123_LABEL_MAX_CHARS)]
            if go_byte_len(value) > DNS1123_LABEL_MAX_CHARS else [])
    if not _DNS1123_LABEL_RE.fullmatch(value):
        if _DNS1123_SUBDOMAIN_RE.fullmatch(value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, _DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_dns1123_subdomain(value: str) -> list[str]:
    """``IsDNS1123Subdomain``: problems of ``value`` as a DNS-1123 subdomain."""
    errs = ([max_len_error(DNS1123_SUBDOMAIN_MAX_CHARS)]
            if go_byte_len(value) > DNS1123_SUBDOMAIN_MAX_CHARS else [])
    if not _DNS1123_SUBDOMAIN_RE.fullmatch(value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, _DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def dns1123_label_ok(value: str) -> bool:
    """``is_dns1123_label(value) == []`` without building messages (every write's names and
    namespace are checked; nearly all pass). A match is ASCII, so ``len`` is Go's ``len``."""
    return (len(value) <= DNS1123_LABEL_MAX_CHARS
            and _DNS1123_LABEL_RE.fullmatch(value) is not None)


def dns1123_subdomain_ok(value: str) -> bool:
    """``is_dns1123_subdomain(value) == []`` without building messages (as
    ``dns1123_label_ok``)."""
    return (len(value) <= DNS1123_SUBDOMAIN_MAX_CHARS
            and _DNS1123_SUBDOMAIN_RE.fullmatch(value) is not None)


def is_dns1035_label(value: str) -> list[str]:
    """``IsDNS1035Label``: problems of ``value`` as a DNS-1035 label."""
    errs = ([max_len_error(DNS1035_LABEL_MAX_CHARS)]
            if go_byte_len(value) > DNS1035_LABEL_MAX_CHARS else [])
    if not _DNS1035_LABEL_RE.fullmatch(value):
        errs.append(regex_error(_DNS1035_LABEL_MSG, _DNS1035_LABEL_FMT, "my-name", "abc-123"))
    return errs


def is_path_segment_name(value: str, prefix: bool = False) -> list[str]:
    """``ValidatePathSegmentName``: not ``.``/``..`` (unless a prefix), no ``/`` or ``%``."""
    if not prefix and value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def _qualified_regex_error() -> str:
    return regex_error(_QUALIFIED_NAME_MSG, _QUALIFIED_NAME_FMT, "MyName", "my.name", "123-abc")


def is_qualified_name(value: str) -> list[str]:
    """``IsQualifiedName``: label and annotation keys, finalizers, label-selector keys."""
    return list(_qualified_name_problems(value))


@functools.lru_cache(maxsize=4096)  # keys repeat across objects; every write checks them all
def _qualified_name_problems(value: str) -> tuple[str, ...]:
    parts = value.split("/")
    if len(parts) > 2:
        return (f"a qualified name {_qualified_regex_error()} with an optional DNS subdomain "
                "prefix and '/' (e.g. 'example.com/MyName')",)
    errs: list[str] = []
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in is_dns1123_subdomain(prefix)]
    if not name:
        errs.append("name part must be non-empty")
    elif go_byte_len(name) > QUALIFIED_NAME_MAX_CHARS:
        errs.append("name part " + max_len_error(QUALIFIED_NAME_MAX_CHARS))
    if not _QUALIFIED_NAME_RE.fullmatch(name):
        errs.append("name part " + _qualified_regex_error())
    return tuple(errs)


def is_valid_label_value(value: str) -> list[str]:
    """``IsValidLabelValue``: label values, including those in label selectors."""
    errs = ([max_len_error(LABEL_VALUE_MAX_CHARS)]
            if go_byte_len(value) > LABEL_VALUE_MAX_CHARS else [])
    if not _LABEL_VALUE_RE.fullmatch(value):
        errs.append(regex_error(_LABEL_VALUE_MSG, _LABEL_VALUE_FMT, "MyValue", "my_value",
                                "12345"))
    return errs


PORT_NAME_MAX_CHARS = 15  # validation.IsValidPortName: an IANA_SVC_NAME


def is_valid_port_name(name: str) -> list[str]:
    """``IsValidPortName``: problems of ``name`` as a port name (an IANA service name)."""
    problems = []
    if len(name) > PORT_NAME_MAX_CHARS:
        problems.append(max_len_error(PORT_NAME_MAX_CHARS))
    if not re.fullmatch(r"[-a-z0-9]+", name):
        problems.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search(r"[a-z]", name):
        problems.append("must contain at least one letter (a-z)")
    if "--" in name:
        problems.append("must not contain consecutive hyphens (-)")
    if name and (name[0] == "-" or name[-1] == "-"):
        problems.append("must not begin or end with a hyphen (-)")
    return problems
