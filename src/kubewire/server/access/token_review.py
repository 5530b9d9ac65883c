"""A TokenReview's verdict: the server's token authenticators asked about one token, as kube's
``pkg/registry/authentication/tokenreview`` asks them (pure: no I/O but the lookups).

kube hands the token to its request authenticator as ``Authorization: Bearer <token>`` (so the
bearer-token rules apply: the header is trimmed, the token ends at its first space, an empty one
has no opinion), with the review's ``spec.audiences`` (default: the server's
``--api-audiences``) as the audiences wanted. In kube's union order: the token file, which is not
audience-aware (kube's ``WrapAudienceAgnosticToken``: it answers only when the wanted audiences
meet the server's, and then for those), then the service-account tokens, which are (their
``aud`` must meet the wanted ones). The first user found wins; else the errors (kube's
``utilerrors.NewAggregate``: one is its own text, several are ``[a, b]``), or ``invalid bearer
token`` when every authenticator had no opinion of a non-empty token. An authenticated user is
also in ``system:authenticated``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from kubewire.server.access.authn import UserInfo, with_authenticated

__all__ = ["ReviewVerdict", "review_token"]

INVALID_TOKEN = "invalid bearer token"


class TokenLookup(Protocol):
    def get(self, token: str) -> UserInfo | None: ...


class AudienceAwareTokens(Protocol):
    def review(self, token: str, audiences: Sequence[str] | None = None) -> _Verdict: ...


class _Verdict(Protocol):
    @property
    def user(self) -> UserInfo | None: ...

    @property
    def audiences(self) -> tuple[str, ...]: ...

    @property
    def error(self) -> str: ...


@dataclass(frozen=True, slots=True)
class ReviewVerdict:
    """``status`` of a TokenReview: whether the token authenticates, as whom, for which of
    the wanted audiences, and the authenticators' errors."""

    authenticated: bool
    user: UserInfo | None = None
    audiences: tuple[str, ...] = ()
    error: str = ""


def bearer_token(token: str) -> str:
    """What kube's bearer-token authenticator reads of ``Authorization: Bearer <token>``."""
    parts = ("Bearer " + token).strip().split(" ", 2)
    return parts[1] if len(parts) >= 2 else ""


def review_token(token: str, wanted: Sequence[str], api_audiences: Sequence[str],
                 tokens: TokenLookup,
                 service_accounts: AudienceAwareTokens | None) -> ReviewVerdict:
    """The verdict on ``token`` for the audiences ``wanted`` (empty: ``api_audiences``)."""
    token = bearer_token(token)
    if not token:
        return ReviewVerdict(False)
    targets = tuple(wanted) or tuple(api_audiences)
    errors: list[str] = []
    agnostic = tuple(aud for aud in targets if aud in api_audiences)
    if agnostic:
        found = tokens.get(token)
        if found is not None:
            return ReviewVerdict(True, with_authenticated(found), agnostic)
    if service_accounts is not None:
        verdict = service_accounts.review(token, targets)
        if verdict.user is not None:
            return ReviewVerdict(True, with_authenticated(verdict.user), verdict.audiences)
        if verdict.error:
            errors.append(verdict.error)
    return ReviewVerdict(False, error=_aggregate(errors) or INVALID_TOKEN)


def _aggregate(errors: list[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``: duplicates once, one alone, else bracketed."""
    unique = list(dict.fromkeys(errors))
    if len(unique) <= 1:
        return unique[0] if unique else ""
    return "[" + ", ".join(unique) + "]"
