"""``kubewire serve`` flags for a server without the cluster's components (``kubewire.cluster``:
controllers, scheduler, simulated nodes), which a plain ``kubewire serve`` runs: tests that
count requests, events or memory, or replay state, start subprocess servers with them."""

from kubewire.server.controllers.selection import CLUSTER_COMPONENTS

API_ONLY = ("--controllers", ",".join(("*", *(f"-{name}" for name in CLUSTER_COMPONENTS))),
            "--nodes", "0")
