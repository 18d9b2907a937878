"""An operator's own flags: declared by the operator, defaulted from ``OPSUITE_*`` variables."""

from __future__ import annotations

import argparse

import pytest

from opsuite_common.options import bool_flag, parse_operator_flags


def _declare(parser: argparse.ArgumentParser) -> None:
    bool_flag(parser, "--allow-thing")
    parser.add_argument("--thing-name", default="default")


def test_an_operator_flag_defaults_to_its_variable_and_a_flag_given_wins() -> None:
    flags, rest = parse_operator_flags(_declare, ["--log-level=debug"], {})
    assert (flags.allow_thing, flags.thing_name, rest) == (False, "default", ["--log-level=debug"])
    env = {"OPSUITE_ALLOW_THING": "true", "OPSUITE_THING_NAME": "from-env"}
    flags, rest = parse_operator_flags(_declare, [], env)
    assert (flags.allow_thing, flags.thing_name, rest) == (True, "from-env", [])
    flags, _ = parse_operator_flags(_declare, ["--allow-thing=false", "--thing-name=x"], env)
    assert (flags.allow_thing, flags.thing_name) == (False, "x")
    flags, _ = parse_operator_flags(_declare, ["--allow-thing"], {})
    assert flags.allow_thing


def test_a_bad_variable_is_reported_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        parse_operator_flags(_declare, [], {"OPSUITE_ALLOW_THING": "maybe"})
    assert "OPSUITE_ALLOW_THING: expected true or false, got 'maybe'" in capsys.readouterr().err
