"""`autodoc index`'s arguments as a CI job writes them (README, For a team)."""

from __future__ import annotations

import argparse

import pytest

from autodoc import indexcli


def parse(*argv: str) -> tuple[str | None, float]:
    parser = argparse.ArgumentParser(prog="autodoc")
    indexcli.add_parser(parser.add_subparsers(dest="cmd"))
    args = parser.parse_args(["index", *argv])
    return indexcli.name_and_wait_lock(args.name, args.wait_lock)


@pytest.mark.parametrize(
    "argv, want",
    [
        # `--wait-lock kb` read kb as SECONDS: "argument --wait-lock: invalid float value: 'kb'"
        (["--wait", "--wait-lock", "kb"], ("kb", indexcli.WAIT_LOCK_S)),
        (["--wait-lock", "kb"], ("kb", indexcli.WAIT_LOCK_S)),
        (["kb", "--wait-lock"], ("kb", indexcli.WAIT_LOCK_S)),
        (["--wait-lock", "90", "kb"], ("kb", 90.0)),
        (["kb", "--wait-lock", "0.5"], ("kb", 0.5)),
        (["--wait-lock"], (None, indexcli.WAIT_LOCK_S)),
        (["kb"], ("kb", 0.0)),
        ([], (None, 0.0)),
    ],
)
def test_wait_lock_takes_seconds_and_leaves_a_workspace_name_alone(argv, want):
    assert parse(*argv) == want


def test_two_names_are_refused_saying_what_wait_lock_takes(capsys):
    with pytest.raises(SystemExit) as e:
        parse("--wait-lock", "kb", "notes")
    assert e.value.code == 2
    assert "--wait-lock takes SECONDS" in capsys.readouterr().err
