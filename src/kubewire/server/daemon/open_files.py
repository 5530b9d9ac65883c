"""The open-file limit, raised to the hard limit when a server starts, as Go programs do.

Since Go 1.19 a program that imports ``os`` raises its ``RLIMIT_NOFILE`` soft limit to the hard
limit as it starts (``syscall``'s ``init`` in ``rlimit.go``), so kube-apiserver and
kube-controller-manager hold as many connections as the hard limit allows. A Python process
keeps the soft limit it inherited, 1024 on most distributions: a server with a thousand
watchers would refuse the next connection (``EMFILE``; the listeners then pause accepting for a
second). ``raise_open_file_limit`` does what Go's ``init`` does on Linux. Processes this one
starts (the SQLite writer, ``serve --workers``' workers) inherit the raised limit; Go restores
the original for the programs it executes, which are never kubewire's own.
"""

from __future__ import annotations

import resource


def raise_open_file_limit() -> tuple[int, int] | None:
    """Set the soft ``RLIMIT_NOFILE`` to the hard one; ``(before, after)`` when it rose, None
    when it was there already or could not be raised (an unlimited hard limit, which Linux does
    not give and other systems refuse as a soft one)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == hard or hard == resource.RLIM_INFINITY:
        return None
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (OSError, ValueError):
        return None
    return soft, hard


__all__ = ["raise_open_file_limit"]
