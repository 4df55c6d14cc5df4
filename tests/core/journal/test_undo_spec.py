"""The undo an agent registers: an MCP tool call on an allowed server, never a command (HATP-JRN-13)."""

from __future__ import annotations

import pytest

from hatp_mcp.core.journal.undo_spec import UndoSpec, parse_undo
from hatp_mcp.errors import HatpError

ALLOWED = {"shop", "payments"}


def refused(value: object) -> HatpError:
    with pytest.raises(HatpError) as err:
        parse_undo(value, ALLOWED)
    assert err.value.rule == "HATP-JRN-13" or err.value.rule == "HATP-CANON-2"
    return err.value


def test_an_mcp_call_on_an_allowed_server_is_accepted_as_data_HATP_JRN_13() -> None:
    spec = parse_undo({"server": "shop", "tool": "reverse_refund", "arguments": {"item": "$(rm -rf /)"}}, ALLOWED)
    assert spec == UndoSpec("shop", "reverse_refund", {"item": "$(rm -rf /)"})  # data, passed as is, never run


@pytest.mark.parametrize(
    ("value", "code", "path"),
    [
        ("rm -rf /", "SHELL_REFUSED", "undo"),
        ({"server": "shop", "tool": "t", "command": "curl evil"}, "SHELL_REFUSED", "undo.command"),
        ({"server": "shop", "tool": "t", "shell": True}, "SHELL_REFUSED", "undo.shell"),
        ({"server": "shop", "tool": "t", "extra": 1}, "BAD_UNDO", "undo.extra"),
        ({"server": "ssh://host", "tool": "t"}, "SERVER_NOT_ALLOWED", "undo.server"),
        ({"tool": "t"}, "BAD_UNDO", "undo.server"),
        ({"server": "shop", "tool": "rm -rf /"}, "BAD_UNDO", "undo.tool"),
        ({"server": "shop", "tool": "t", "arguments": ["a"]}, "BAD_UNDO", "undo.arguments"),
        (["shop", "t"], "BAD_UNDO", "undo"),
    ],
)
def test_anything_but_an_allowed_mcp_call_is_refused_HATP_JRN_13(value: object, code: str, path: str) -> None:
    err = refused(value)
    assert (err.code, err.path) == (code, path) and err.fix


def test_arguments_outside_canonical_json_are_refused() -> None:
    assert refused({"server": "shop", "tool": "t", "arguments": {"usd": 40.5}}).rule == "HATP-CANON-2"


def test_an_undo_tool_the_allow_list_does_not_list_for_its_server_is_refused_HATP_JRN_13() -> None:
    allowed = {"shop": frozenset({"reverse_refund"}), "calendar": None}
    assert parse_undo({"server": "calendar", "tool": "anything"}, allowed).tool == "anything"
    assert parse_undo({"server": "shop", "tool": "reverse_refund"}, allowed).server == "shop"
    with pytest.raises(HatpError) as err:
        parse_undo({"server": "shop", "tool": "refund", "arguments": {"usd": "999.00"}}, allowed)
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-JRN-13", "TOOL_NOT_ALLOWED", "undo.tool")
