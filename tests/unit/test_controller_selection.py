"""``--controllers`` read as kube-controller-manager reads it (IsControllerEnabled, aliases,
unknown names)."""

from __future__ import annotations

import pytest

from kubewire.server.controllers.selection import (
    NAMESPACE,
    POD_TERMINATION,
    ROOT_CA_PUBLISHER,
    SERVICE_ACCOUNT,
    parse_controllers,
)


def test_the_default_runs_every_controller_kubewire_has() -> None:
    chosen = parse_controllers(["*"])
    assert all(chosen.enabled(name) for name in
               (NAMESPACE, SERVICE_ACCOUNT, ROOT_CA_PUBLISHER, POD_TERMINATION))


def test_star_leaves_kubes_disabled_by_default_controllers_off() -> None:
    chosen = parse_controllers(["*"])
    assert not chosen.enabled("bootstrap-signer-controller")
    assert parse_controllers(["*", "bootstrapsigner"]).enabled("bootstrap-signer-controller")


def test_aliases_name_the_canonical_controller() -> None:
    chosen = parse_controllers(["*", "-namespace", "-root-ca-cert-publisher"])
    assert not chosen.enabled(NAMESPACE) and not chosen.enabled(ROOT_CA_PUBLISHER)
    assert chosen.enabled(SERVICE_ACCOUNT)


def test_the_first_entry_naming_a_controller_decides() -> None:
    assert parse_controllers(["namespace", "-namespace"]).enabled(NAMESPACE)
    assert not parse_controllers(["-namespace", "*", "namespace"]).enabled(NAMESPACE)


def test_without_star_only_what_is_named_runs() -> None:
    chosen = parse_controllers(["serviceaccount"])
    assert chosen.enabled(SERVICE_ACCOUNT)
    assert not chosen.enabled(NAMESPACE) and not chosen.enabled(POD_TERMINATION)
    assert not parse_controllers([]).enabled(SERVICE_ACCOUNT)


@pytest.mark.parametrize("entry, named", [("nosuch", "nosuch"), ("-nosuch", "nosuch"),
                                          ("-*", "*")])
def test_an_unknown_name_is_refused_with_kubes_message(entry: str, named: str) -> None:
    with pytest.raises(ValueError) as caught:
        parse_controllers(["*", entry])
    assert str(caught.value) == f'"{named}" is not in the list of known controllers'


def test_names_kube_knows_are_accepted_even_where_kubewire_runs_nothing() -> None:
    chosen = parse_controllers(["*", "-deployment", "-garbage-collector-controller"])
    assert not chosen.enabled("deployment-controller")


def test_cluster_components_are_named_in_the_selection() -> None:
    """Every component of the registry is a name ``--controllers`` switches, and the server's
    list of them (which spares a server running none the client's import) is the registry's."""
    from kubewire.cluster.components import COMPONENTS
    from kubewire.server.controllers.selection import CLUSTER_COMPONENTS, CONTROLLERS, KNOWN

    assert set(CLUSTER_COMPONENTS) == set(COMPONENTS)
    assert set(COMPONENTS) <= set(CONTROLLERS) & KNOWN
    assert parse_controllers(["garbagecollector"]).enabled("garbage-collector-controller")
    assert not parse_controllers([]).enabled("garbage-collector-controller")
