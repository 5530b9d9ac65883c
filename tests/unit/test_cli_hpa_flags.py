"""kube-controller-manager's HPA flags on ``kubewire serve`` and ``kubewire controller-manager``
(kube's duration syntax, kube's defaults); tests/integration/test_hpa_controller.py shows them
reaching the controller."""

from __future__ import annotations

import pytest

from kubewire.cli import build_parser, config_from_args


def serve_args(*flags: str) -> tuple[float, float, float]:
    config = config_from_args(build_parser().parse_args(["serve", "--insecure-http", *flags]))
    return (config.hpa_sync_period_s, config.hpa_tolerance,
            config.hpa_downscale_stabilization_s)


def test_defaults_are_kubes() -> None:
    assert serve_args() == (15.0, 0.1, 300.0)
    cm = build_parser().parse_args(["controller-manager"])
    assert (cm.horizontal_pod_autoscaler_sync_period, cm.horizontal_pod_autoscaler_tolerance,
            cm.horizontal_pod_autoscaler_downscale_stabilization) == (15.0, 0.1, 300.0)


def test_go_durations_and_floats() -> None:
    assert serve_args("--horizontal-pod-autoscaler-sync-period", "500ms",
                      "--horizontal-pod-autoscaler-tolerance", "0.25",
                      "--horizontal-pod-autoscaler-downscale-stabilization", "1m30s") == \
        (0.5, 0.25, 90.0)
    assert serve_args("--horizontal-pod-autoscaler-downscale-stabilization", "0s")[2] == 0.0


@pytest.mark.parametrize(("flag", "value", "error"), [
    ("--horizontal-pod-autoscaler-sync-period", "0s", "must be greater than 0"),
    ("--horizontal-pod-autoscaler-sync-period", "fast", "invalid duration"),
    ("--horizontal-pod-autoscaler-tolerance", "x",
     'strconv.ParseFloat: parsing "x": invalid syntax'),
    ("--horizontal-pod-autoscaler-tolerance", "-0.1", "must be 0 or more"),
])
def test_bad_values_are_refused(flag: str, value: str, error: str,
                                capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["controller-manager", flag, value])
    assert error in capsys.readouterr().err
