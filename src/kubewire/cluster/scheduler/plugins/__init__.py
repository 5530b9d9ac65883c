"""The scheduler's decisions, pure: what a Pod asks for and a Node offers (``infos``), the
filter plugins with kube's reasons (``filters``), the score plugins with kube's weights
(``scores``), the ``FitError`` text of an unschedulable Pod (``fit_error``) and
DefaultPreemption's victims and choice of node (``preemption``).

No I/O: these take parsed Pods and Nodes and answer; the loop in ``scheduler.scheduler``
applies them. Written by hand after kube v1.32's ``pkg/scheduler/framework/plugins`` (no Python
library schedules Kubernetes pods).
"""
