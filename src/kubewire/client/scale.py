"""``Scale`` (``autoscaling/v1``): what the ``/scale`` subresource of a kind answers and takes
(``Api.get_scale``, ``replace_scale``, ``patch_scale``), for built-in kinds and custom
resources whose CRD enables it alike. Written by hand: ``Scale`` is a subresource's kind,
not a served resource, so the generated models (one per served kind) do not have it."""

from __future__ import annotations

from typing import ClassVar

import msgspec

from kubewire.models import KubeObject, Model, ObjectMeta


class ScaleSpec(Model, kw_only=True, omit_defaults=True):
    replicas: int | None = None


class ScaleStatus(Model, kw_only=True, omit_defaults=True):
    replicas: int | None = None
    selector: str | None = None  # the label selector, in kube's string form


class Scale(KubeObject, kw_only=True, omit_defaults=True):
    """A kind's replicas as its ``/scale`` subresource reads and sets them."""

    API_VERSION: ClassVar[str] = "autoscaling/v1"
    KIND: ClassVar[str] = "Scale"

    api_version: str | None = msgspec.field(default=None, name="apiVersion")
    kind: str | None = None
    metadata: ObjectMeta | None = None
    spec: ScaleSpec | None = None
    status: ScaleStatus | None = None
