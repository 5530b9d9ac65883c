"""kube-scheduler, as a client of the API: ``Scheduler`` (the loop, ``scheduler``), its queue
(``queue``: activeQ, backoffQ, unschedulable pods) and the pure plugins (``plugins``: filters,
scores, DefaultPreemption and the ``FailedScheduling`` text of kube v1.32's default
profile).

``make_scheduler(ctx, options)`` builds the component ``kube-scheduler`` for a
``ClusterContext``.
"""

from kubewire.cluster.scheduler.scheduler import Scheduler, make_scheduler

__all__ = ["Scheduler", "make_scheduler"]
