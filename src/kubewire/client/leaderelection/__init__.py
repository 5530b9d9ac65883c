"""Leader election on a ``coordination.k8s.io/v1`` Lease, as client-go's
``tools/leaderelection`` does it, for operators that run several replicas and want one to act.

``record`` (pure) is the election record and its Lease spec form; ``decision`` (pure) what one
try decides from what was seen, the identity, the clock and the configuration; ``lock`` the
Lease lock over a small ``Leases`` protocol (``ClientLeases``: HTTP through
``kubewire.client``; kubewire's server drives the same elector through its own write path);
``elector`` the acquire, renew and release loops; ``events`` the ``became leader`` and
``stopped leading`` Events. It imports the rest of the client and the
shared core; never the server or storage.
"""

from kubewire.client.leaderelection.decision import (
    DEFAULT_LEASE_DURATION_S,
    DEFAULT_RENEW_DEADLINE_S,
    DEFAULT_RETRY_PERIOD_S,
    JITTER_FACTOR,
    LeaderElectionConfig,
)
from kubewire.client.leaderelection.elector import (
    ElectionClock,
    LeaderCallbacks,
    LeaderElector,
    RealElectionClock,
    new_identity,
)
from kubewire.client.leaderelection.events import ClientEventRecorder, EventRecorder
from kubewire.client.leaderelection.lock import ClientLeases, LeaseLock, Leases
from kubewire.client.leaderelection.record import LeaderElectionRecord

__all__ = [
    "DEFAULT_LEASE_DURATION_S",
    "DEFAULT_RENEW_DEADLINE_S",
    "DEFAULT_RETRY_PERIOD_S",
    "JITTER_FACTOR",
    "ClientEventRecorder",
    "ClientLeases",
    "ElectionClock",
    "EventRecorder",
    "LeaderCallbacks",
    "LeaderElectionConfig",
    "LeaderElectionRecord",
    "LeaderElector",
    "LeaseLock",
    "Leases",
    "RealElectionClock",
    "new_identity",
]
