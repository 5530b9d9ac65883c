"""Every attack of the hostile-client suite, by name, with what a hardened server does.

Issue 12's list, in its order; the lost-WAL check (a damaged store, not a client) has a test
of its own elsewhere and no form here.
"""

from __future__ import annotations

from tests.reliability.hostile import floods, frames, requests, stalls
from tests.reliability.hostile.harness import AttackSpec

ATTACKS: dict[str, AttackSpec] = {spec.name: spec for spec in [
    AttackSpec("yaml-alias-bomb", requests.alias_bomb,
               "400 at once: yaml: document contains excessive aliasing"),
    AttackSpec("pipelined-version-unauthenticated", floods.pipelined_version,
               "the server stops reading each connection (its writes stall), RSS bounded"),
    AttackSpec("pipelined-lists", floods.pipelined_lists,
               "the server stops reading each connection (its writes stall), RSS bounded",
               seed_configmaps=100, seed_bytes=1024),
    AttackSpec("unauthenticated-bodies", floods.unauthenticated_bodies,
               "401 for every connection without reading its body"),
    AttackSpec("trickled-body", floods.trickled_body,
               "504 Timeout once --request-timeout passed, body unfinished",
               args=floods.timeout_args),
    AttackSpec("websocket-big-pings", frames.big_pings,
               "connection closed (or pongs of at most 125 bytes)"),
    AttackSpec("websocket-unread-pongs", frames.unread_pongs,
               "connection closed once too many pongs are owed (or reading paused)"),
    AttackSpec("impersonation", requests.impersonation,
               "403 Forbidden: cannot impersonate resource \"users\""),
    AttackSpec("stalled-writer", stalls.stalled_writer,
               "504 for writes and /healthz 500 while the writer is stopped; both recover",
               args=floods.timeout_args),
    AttackSpec("watch-limit-spellings", requests.watch_limit,
               "429 past the per-user watch limit for watch=1|true|yes|on|(empty)",
               limits=requests.watch_limits),
    AttackSpec("invalid-utf8-json", requests.invalid_utf8,
               "201 with each invalid byte as U+FFFD"),
    AttackSpec("untrusted-client-cert", requests.client_certs,
               "200: the bearer token authenticates despite the certificate"),
    AttackSpec("big-label-selector", requests.selector, "200 for a 200 KiB labelSelector"),
    AttackSpec("big-label-selector-error", requests.selector_error,
               "400 naming the one bad value of a 200 KiB labelSelector"),
    AttackSpec("many-label-requirements", requests.selector_requirements,
               "200 for a labelSelector of 200 KiB of requirements"),
    AttackSpec("protocol-token-without-upgrade", requests.protocol_token,
               "401: the subprotocol token is no credential without an upgrade"),
]}
