"""Simulated nodes and their kubelets, in kwok's manner: no containers run; Nodes, Leases and
Pods move through the states a kubelet reports.

- ``fleet``: ``NodeFleet`` (component ``kubelet``; ``make_fleet(ctx, FleetOptions)``) registers
  the nodes, renews their Leases, reports their status, and drives the pods bound to them
  through stages: status PATCHes, kubelet events, graceful termination, deletion.
- ``node_status`` (pure): the options, node names/IPs/pod CIDRs, the Node, its status, its Lease,
  the per-node pod IP pool.
- ``stages`` (pure): kwok's ``Stage`` read as is (selectors, delays, next), the choice of stage,
  the built-in pod stages; ``query`` (pure): the jq-like selector keys; ``gotemplate`` (pure): the
  Go templates of ``statusTemplate``.
- ``pod_status`` (pure): the kubelet's pod statuses (Pending → Running → terminal) and events.
- ``flags``: the command line's ``--node-*`` settings as a checked ``FleetOptions`` (reads the
  stages file at start).

Imports the client, the cluster runtime and the shared core only.
"""

from kubewire.cluster.nodes.fleet import NodeFleet, make_fleet
from kubewire.cluster.nodes.node_status import FleetOptions

__all__ = ["FleetOptions", "NodeFleet", "make_fleet"]
