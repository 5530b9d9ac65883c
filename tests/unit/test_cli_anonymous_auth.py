"""``kubewire serve --anonymous-auth``: a boolean flag as pflag reads kube-apiserver's."""

from __future__ import annotations

import pytest

from kubewire.cli import build_parser, config_from_args


def anonymous(*flags: str) -> bool:
    args = build_parser().parse_args(["serve", *flags])
    return config_from_args(args).anonymous_auth


def test_off_unless_asked_for() -> None:
    assert anonymous() is False


@pytest.mark.parametrize(("flags", "on"), [
    (["--anonymous-auth"], True), (["--anonymous-auth=true"], True),
    (["--anonymous-auth", "1"], True), (["--anonymous-auth=false"], False),
    (["--anonymous-auth=F"], False),
])
def test_values_as_go_parses_them(flags: list[str], on: bool) -> None:
    assert anonymous(*flags) is on


def test_a_bad_value_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stopped:
        anonymous("--anonymous-auth=yes")
    assert stopped.value.code == 2
    assert 'strconv.ParseBool: parsing "yes": invalid syntax' in capsys.readouterr().err
