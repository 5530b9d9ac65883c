"""``kubewire serve --service-cluster-ip-range``: parsed as kube-apiserver takes the flag."""

from __future__ import annotations

import pytest

from kubewire.cli import build_parser, config_from_args


def serve_config(*flags: str) -> str:
    args = build_parser().parse_args(["serve", "--insecure-http", *flags])
    return config_from_args(args).service_cluster_ip_range


def test_default_is_kubeadms_range() -> None:
    assert serve_config() == "10.96.0.0/12"


@pytest.mark.parametrize(("flag", "stored"), [
    ("10.0.0.0/24", "10.0.0.0/24"),
    ("10.0.0.77/24", "10.0.0.0/24"),  # net.ParseCIDR keeps the network, drops host bits
    ("fd00:10:96::/108", "fd00:10:96::/108"),
])
def test_ranges_are_stored_as_networks(flag: str, stored: str) -> None:
    assert serve_config("--service-cluster-ip-range", flag) == stored


@pytest.mark.parametrize(("flag", "error"), [
    ("10.0.0.0/8", "specified --service-cluster-ip-range is too large; for 32-bit addresses, "
                   "the mask must be >= 12"),
    ("fd00::/64", "specified --service-cluster-ip-range is too large; for 128-bit addresses, "
                  "the mask must be >= 108"),
    ("ten/8", "invalid CIDR address: ten/8"),
])
def test_bad_ranges_are_refused(flag: str, error: str, capsys: pytest.CaptureFixture[str],
                                ) -> None:
    with pytest.raises(SystemExit):
        serve_config("--service-cluster-ip-range", flag)
    assert capsys.readouterr().err.endswith(
        f"argument --service-cluster-ip-range: {error}\n")
