"""kube-controller-manager's control loops, as clients of the API.

``replicaset`` (``replicaset-controller``) and ``deployment`` (``deployment-controller``) with
their pure decisions in ``replica_rules`` and ``rollout``.

``job`` (``job-controller``), ``cronjob`` (``cronjob-controller``) and ``ttl_after_finished``
(``ttl-after-finished-controller``), with the pure ``job_rules`` and ``cron_schedule``
(robfig/cron schedules, ``mostRecentScheduleTime``).
"""
