"""Every default is in --help: each option of every command (simweb, simweb
check and sim included) whose value is not given is either documented as a
default in its help or means "off" (a flag, an empty list, none)."""

from __future__ import annotations

import argparse

import pytest

from courtly.cli_parser import build_parser as _build_parser
from courtly.sim.command import _check_parser, _serve_parser
from courtly.sim.vsim_command import parser as sim_parser

CONFIG_BACKED = {"--max-pages", "--duration-s", "--intent", "--delay-s", "--scope", "--contact"}


def _options(parser: argparse.ArgumentParser, name: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub, p in action.choices.items():
                if sub not in ("simweb", "sim"):       # stand-ins: their parsers are walked below
                    yield from _options(p, f"{name} {sub}")
        elif action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            yield name, action


ALL = [*_options(_build_parser(), "courtly"), *_options(_serve_parser(), "courtly simweb"),
       *_options(_check_parser(), "courtly simweb check"), *_options(sim_parser(), "courtly sim")]


@pytest.mark.parametrize("command, action", ALL, ids=[f"{c} {a.option_strings[-1]}" for c, a in ALL])
def test_every_default_is_documented(command, action):
    documented = "default" in (action.help or "").lower()
    off = action.default in (None, False, []) and action.option_strings[-1] not in CONFIG_BACKED
    assert documented or off, f"{command} {action.option_strings[-1]}: default {action.default!r}, help {action.help!r}"
    assert action.help, f"{command} {action.option_strings[-1]} has no help"
