"""Cells of the issue-20 kinds that read several fields: Jobs, CronJobs, PodDisruptionBudgets,
PriorityClasses and IngressClasses. Each is a named formatter ``(value, now) -> Cell`` used by
the column tables (columns.py).

Source: ``kubernetes/kubernetes:pkg/printers/internalversion/printers.go`` v1.32
(``printJob``, ``printCronJob``, ``printPodDisruptionBudget``, ``printPriorityClass``,
``printIngressClass``).
"""

from __future__ import annotations

from datetime import datetime

from kubewire.json_types import JSON
from kubewire.server.tables.cells import (
    NONE,
    UNSET,
    Cell,
    as_dict,
    as_int,
    dicts,
    human_duration,
    since,
)
from kubewire.times import parse_time_or_none

# printJob's STATUS: the first condition (status True) in this order wins, a deletion mark
# between Failed and Suspended; otherwise Running.
_JOB_STATES = (("Complete", "Complete"), ("Failed", "Failed"), ("", "Terminating"),
               ("Suspended", "Suspended"), ("FailureTarget", "FailureTarget"),
               ("SuccessCriteriaMet", "SuccessCriteriaMet"))


def _has_condition(status: dict[str, JSON], kind: str) -> bool:
    return any(c.get("type") == kind and c.get("status") == "True"
               for c in dicts(status.get("conditions")))


def job_status(value: JSON, now: datetime) -> Cell:
    """``printJob``'s STATUS (the whole Job)."""
    job = as_dict(value)
    status = as_dict(job.get("status"))
    for condition, shown in _JOB_STATES:
        if condition == "":
            if as_dict(job.get("metadata")).get("deletionTimestamp"):
                return shown
        elif _has_condition(status, condition):
            return shown
    return "Running"


def job_completions(value: JSON, now: datetime) -> Cell:
    """``printJob``'s COMPLETIONS: ``succeeded/completions``, or ``succeeded/1`` (``of N``
    when more than one pod runs in parallel) for a Job without completions."""
    job = as_dict(value)
    spec, status = as_dict(job.get("spec")), as_dict(job.get("status"))
    succeeded = as_int(status.get("succeeded"))
    if spec.get("completions") is not None:
        return f"{succeeded}/{as_int(spec.get('completions'))}"
    parallelism = as_int(spec.get("parallelism"))
    return f"{succeeded}/1 of {parallelism}" if parallelism > 1 else f"{succeeded}/1"


def job_duration(value: JSON, now: datetime) -> Cell:
    """``printJob``'s DURATION: nothing before it starts, the time since its start while it
    runs, start to completion after."""
    status = as_dict(value)
    start = parse_time_or_none(status.get("startTime"))
    if start is None:
        return ""
    end = parse_time_or_none(status.get("completionTime"))
    return since(status.get("startTime"), now) if end is None else human_duration(end - start)


def bool_pointer(value: JSON, now: datetime) -> Cell:
    """``printBoolPtr``: ``<unset>``, ``True`` or ``False``."""
    if not isinstance(value, bool):
        return UNSET
    return "True" if value else "False"


def last_schedule(value: JSON, now: datetime) -> Cell:
    """``printCronJob``'s LAST SCHEDULE: ``<none>`` before the first."""
    return NONE if value is None else since(value, now)


def text_or_none_if_unset(value: JSON, now: datetime) -> Cell:
    """A ``*string`` printed as itself, ``<none>`` when nil (CronJob's TIMEZONE)."""
    return value if isinstance(value, str) else NONE


def int_or_string_or_na(value: JSON, now: datetime) -> Cell:
    """``printPodDisruptionBudget``: an IntOrString's ``String()``, ``N/A`` when nil."""
    if isinstance(value, bool) or value is None:
        return "N/A"
    return str(value) if isinstance(value, int | str) else "N/A"


def true_false(value: JSON, now: datetime) -> Cell:
    """A Go ``bool`` cell (``boolean`` column): false when absent."""
    return value is True


def ingress_class_parameters(value: JSON, now: datetime) -> Cell:
    """``printIngressClass``'s PARAMETERS: ``Kind[.apiGroup]/name``, ``<none>`` without."""
    if not isinstance(value, dict):
        return NONE
    shown = str(value.get("kind") or "")
    if isinstance(value.get("apiGroup"), str):
        shown += "." + str(value["apiGroup"])
    return f"{shown}/{value.get('name') or ''}"
