"""Testing a kopf operator with kubewire: ``kopf.testing.KopfRunner`` runs ``widget_operator.py``
against the plugin's server (it finds it by ``KUBECONFIG``), and the test checks what the
operator did: each Widget Ready, after a dropped watch too, patched and never deleted.

    pytest examples/testing/test_kopf_operator.py
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kopf.testing import KopfRunner

from kubewire import Server

OPERATOR = str(Path(__file__).with_name("widget_operator.py"))


def widget(name: str, namespace: str) -> dict[str, Any]:
    return {"apiVersion": "example.com/v1", "kind": "Widget", "spec": {"size": 1},
            "metadata": {"name": name, "namespace": namespace}}


def ready(obj: dict[str, Any]) -> bool:
    return bool((obj.get("status") or {}).get("phase") == "Ready")


@pytest.mark.kubewire(crds=["widget-crd.yaml"])
def test_each_widget_becomes_ready(kubewire_server: Server, kubewire_kubeconfig: Path,
                                   kubewire_namespace: str) -> None:
    namespace = kubewire_namespace
    args = ["run", "--standalone", "--namespace", namespace, OPERATOR]
    with KopfRunner(args, timeout=60) as runner:
        kubewire_server.apply_sync(widget("first", namespace))
        kubewire_server.wait_for_sync("widgets.example.com", "first", namespace=namespace,
                                      condition=ready, timeout=30)
        # The operator's watch ends (as on an apiserver restart); kopf must watch again.
        assert kubewire_server.faults.drop_watches(resource="widgets") >= 1
        kubewire_server.apply_sync(widget("second", namespace))
        kubewire_server.wait_for_sync("widgets.example.com", "second", namespace=namespace,
                                      condition=ready, timeout=30)
    assert runner.exception is None, runner.output
    assert runner.exit_code == 0, runner.output
    # What kopf asked of the server: two watches at least (the dropped one and the next), a
    # status patch for each Widget, and no deletion.
    assert len(kubewire_server.requests(verb="watch", resource="widgets")) >= 2
    patched = kubewire_server.requests(verb="patch", resource="widgets", subresource="status",
                                       code=200)
    assert {entry.name for entry in patched} == {"first", "second"}
    assert kubewire_server.requests(verb="delete", resource="widgets") == []
