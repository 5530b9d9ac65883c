"""One apply request: its body decoded as kube decodes it, and the apply it asks for.

The body is YAML (JSON is YAML), decoded as ``handlers/patch.go`` ``applyPatcher`` does:
``sigs.k8s.io/yaml`` into a map (``yaml_bodies``; 400 ``error decoding YAML: ...`` otherwise).
With ``fieldValidation=Strict`` a key repeated in one map is refused after the apply itself
succeeded (``yaml.UnmarshalStrict``; go-yaml v2's ``line N: key "k" already set in map``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kubewire.go_text import go_json_kind
from kubewire.json_types import JSON
from kubewire.schema import TypeNode
from kubewire.server.patch.apply import ApplyRequest, apply_config
from kubewire.server.wire.json_depth import EXCEEDED_MAX_DEPTH, too_deep
from kubewire.server.wire.yaml_bodies import YAMLBodyError, load_yaml_body
from kubewire.status import BadRequest, conflict

__all__ = ["AppliedConfig", "ServerSideApply", "decode_apply_body"]


@dataclass(frozen=True, slots=True)
class AppliedConfig:
    """The applied configuration and the go-yaml strict errors its text has (repeated keys)."""

    config: dict[str, JSON]
    strict_errors: tuple[str, ...] = ()


def decode_apply_body(body: bytes) -> AppliedConfig:
    """The applied configuration; BadRequest when it is not YAML or not a map."""
    try:
        decoded = load_yaml_body(body)
    except YAMLBodyError as exc:
        # applyPatcher: sigs.k8s.io/yaml's Unmarshal wraps go-yaml's error
        raise BadRequest(f"error decoding YAML: error converting YAML to JSON: {exc}") from None
    except RecursionError:
        raise BadRequest(f"error decoding YAML: {EXCEEDED_MAX_DEPTH}") from None
    value = decoded.value
    if too_deep(value):
        raise BadRequest(f"error decoding YAML: {EXCEEDED_MAX_DEPTH}")
    if value is None:
        value = {}
    if not isinstance(value, dict):
        kind = go_json_kind(value)
        raise BadRequest("error decoding YAML: error unmarshaling JSON: while decoding JSON: "
                         f"json: cannot unmarshal {kind} into Go value of type "
                         "map[string]interface {}")
    return AppliedConfig(value, decoded.repeated_keys)


@dataclass(frozen=True, slots=True)
class ServerSideApply:
    """One decoded apply: called with the live object it gives the object to store."""

    applied: AppliedConfig
    schema: TypeNode | None
    request: ApplyRequest
    strict: bool = field(default=False)
    plural: str = ""  # for the optimistic-lock Conflict's text

    def __call__(self, live: dict[str, JSON]) -> dict[str, JSON]:
        obj = self.applied_to(live)
        # store.go Update: a resourceVersion in the configuration is a precondition.
        sent = (self.applied.config.get("metadata") or {}).get("resourceVersion")
        live_meta = live.get("metadata") or {}
        if sent and sent != live_meta.get("resourceVersion"):
            group = self.request.api_version.rpartition("/")[0]
            raise conflict(group, self.plural, str(live_meta.get("name") or ""))
        return obj

    def applied_to(self, live: dict[str, JSON]) -> dict[str, JSON]:
        """The apply's result without the resourceVersion precondition: for an endpoint whose
        storage checks it against another object (``/scale``: the parent's)."""
        return self._checked(apply_config(live, self.applied.config, self.schema, self.request))

    def create(self, url_name: str) -> dict[str, JSON]:
        """The object an apply creates; BadRequest when it names another object than the URL
        (``handlers/patch.go`` ``checkName``)."""
        obj = self._checked(apply_config(None, self.applied.config, self.schema, self.request))
        name = (obj.get("metadata") or {}).get("name") or ""
        if name != url_name:
            raise BadRequest(f"the name of the object ({name}) does not match the name on the "
                             f"URL ({url_name})")
        return obj

    def _checked(self, obj: dict[str, JSON]) -> dict[str, JSON]:
        if self.strict and self.applied.strict_errors:
            raise BadRequest("error strict decoding YAML: error converting YAML to JSON: yaml: "
                             "unmarshal errors:\n  " + "\n  ".join(self.applied.strict_errors))
        return obj
