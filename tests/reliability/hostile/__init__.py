"""The hostile-client suite: each attack on the real server, with the figures that judge it.

What it holds: ``server`` (a TLS ``kubewire serve`` subprocess with token users and an ABAC
policy; ``launch`` starts it with ``Limits`` no flag sets), ``probe`` (the well-behaved client:
a subprocess doing GETs at a steady rate and timing them), ``measure`` (RSS of the server and of
its writer child, and latency percentiles), ``harness`` (one attack run: idle RSS, the attack
beside the probe, the report and its bounds), ``wire`` (raw TLS and WebSocket bytes for the
attackers), and the attacks themselves by what they abuse: ``floods`` (pipelining, bodies),
``frames`` (WebSocket pings), ``requests`` (bodies, selectors, identities, watch limits) and
``stalls`` (the writer process stopped). ``suite`` lists them for the tests and the CLI.

It imports kubewire only in ``launch`` (the server's own process): the attackers speak bytes.
"""
