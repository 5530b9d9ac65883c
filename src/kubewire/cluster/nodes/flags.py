"""The simulated nodes' command-line settings (``--node-cpu``, ``--node-labels``,
``--node-stages``, ...) as a checked ``FleetOptions``.

``kubewire serve``, ``kubewire controller-manager`` and ``kubewire.Server`` (``ServerConfig``'s
``node_*`` fields) pass what the user gave, None for what they left alone (``FleetOptions``'
default); ``fleet_options`` refuses, with one line, what cannot make a fleet: a bad quantity,
label, naming or CIDR, or a stages file that cannot be read, is not kwok ``Stage`` YAML, has no
Pod stage or a ``statusTemplate`` that does not parse. Checked at start, so a mistake is the
command's error rather than a kubelet that fails and restarts. Reads the stages file (I/O).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path

from kubewire.cluster.nodes.gotemplate import TemplateError, check_template
from kubewire.cluster.nodes.node_status import FleetOptions
from kubewire.cluster.nodes.stages import StageError, load_stages

MAX_STAGES_FILE_BYTES = 4 * 1024 * 1024  # kwok's own stage files are a few KiB


def fleet_options(count: int, settings: Mapping[str, object]) -> FleetOptions:
    """``FleetOptions(count=count, **settings)`` (``settings``: FleetOptions field names; None
    values left at the default), checked; ``ValueError`` with a one-line message otherwise."""
    fields = {f.name for f in dataclasses.fields(FleetOptions)}
    unknown = set(settings) - fields
    if unknown:
        raise ValueError(f"unknown node settings: {', '.join(sorted(unknown))}")
    given = {k: v for k, v in settings.items() if v is not None}
    if "labels" in given:
        given["labels"] = dict(given["labels"])  # type: ignore[call-overload]
    if "stages_file" in given:
        given["stages_file"] = str(given["stages_file"])
    for name in ("cpu", "memory", "pods", "ephemeral_storage"):
        if str(given.get(name, "")).strip().startswith("-"):
            raise ValueError(f"node {name.replace('_', '-')} {given[name]!r}: must not be "
                             "negative")
    try:
        options = FleetOptions(count=count, **given)  # type: ignore[arg-type]
        options.check()
    except (TypeError, ValueError) as err:
        raise ValueError(_one_line(str(err))) from None
    if options.stages_file is not None:
        check_stages_file(options.stages_file)
    return options


def check_stages_file(path: str) -> None:
    """``ValueError`` unless ``path`` holds kwok ``Stage`` documents with at least one for Pods
    whose templates parse (what the fleet reads at its start)."""
    file = Path(path)
    try:
        if file.stat().st_size > MAX_STAGES_FILE_BYTES:
            raise ValueError(f"node stages file {path}: larger than "
                             f"{MAX_STAGES_FILE_BYTES // (1024 * 1024)} MiB")
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as err:
        raise ValueError(f"node stages file {path}: {_one_line(str(err))}") from None
    try:
        stages = load_stages(text)
    except (StageError, ValueError, TypeError, AttributeError, KeyError) as err:
        raise ValueError(f"node stages file {path}: {_one_line(str(err))}") from None
    pods = [s for s in stages if s.kind == "Pod" and s.api_group in ("v1", "")]
    if not pods:
        raise ValueError(f"node stages file {path}: no kwok.x-k8s.io/v1alpha1 Stage for Pods "
                         "(spec.resourceRef kind Pod)")
    for stage in pods:
        if stage.next.status_template is None:
            continue
        try:
            check_template(stage.next.status_template)
        except TemplateError as err:
            raise ValueError(f"node stages file {path}: stage {stage.name!r}: statusTemplate: "
                             f"{_one_line(str(err))}") from None


def _one_line(text: str) -> str:
    return " ".join(text.split())
