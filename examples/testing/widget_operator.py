"""A kopf operator for Widgets (``widget-crd.yaml``): each new Widget's status says Ready.

Run by ``test_kopf_operator.py`` with ``kopf.testing.KopfRunner``; on a cluster:
``kopf run --standalone -n NAMESPACE widget_operator.py``.
"""

from __future__ import annotations

from typing import Any

import kopf


@kopf.on.create("example.com", "v1", "widgets")
def widget_created(patch: kopf.Patch, **_: Any) -> None:
    patch.status["phase"] = "Ready"
