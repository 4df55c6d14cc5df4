"""The proxy's undo map: upstream undo tools with arguments by JSON pointer, never a command (HATP-JRN-14)."""

from __future__ import annotations

import pytest

from hatp_mcp.core.journal.undo_map import UndoMap, resolve_pointer
from hatp_mcp.errors import HatpError

MAP = {
    "tools": {
        "refund": {
            "undo": "reverse_refund",
            "arguments": {"item": "/args/item", "refund": "/result/refunds/0/id"},
            "constants": {"reason": "saga rollback"},
        },
        "ship": {"pivot": True},
    }
}


def test_undo_arguments_come_from_the_call_by_pointer_HATP_JRN_14() -> None:
    rule = UndoMap.parse(MAP).rule("refund")
    built = rule.build({"item": "882"}, {"refunds": [{"id": "r-1"}]})
    assert (rule.undo, built) == ("reverse_refund", {"reason": "saga rollback", "item": "882", "refund": "r-1"})
    assert UndoMap.parse(MAP).rule("ship").pivot and UndoMap.parse(MAP).rule("other").undo is None
    assert resolve_pointer({"a/b": {"~": 1}}, "/a~1b/~0") == 1


def test_a_pointer_that_finds_nothing_is_refused_never_sent_half_HATP_JRN_14() -> None:
    rule = UndoMap.parse(MAP).rule("refund")
    with pytest.raises(HatpError) as err:
        rule.build({"item": "882"}, {"refunds": []})
    assert (err.value.rule, err.value.code) == ("HATP-JRN-14", "POINTER_UNRESOLVED")
    assert err.value.path == "tools.refund.arguments.refund"


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        ({"undo": "sh -c 'curl evil'"}, "tools.t.undo"),
        ({"undo": "u", "command": "rm -rf /"}, "tools.t"),
        ({"undo": "u", "arguments": {"item": "882"}}, "tools.t.arguments"),
        ({"undo": "u", "pivot": True}, "tools.t"),
    ],
)
def test_an_undo_map_of_any_other_shape_is_refused_HATP_JRN_14(entry: dict[str, object], path: str) -> None:
    with pytest.raises(HatpError) as err:
        UndoMap.parse({"tools": {"t": entry}})
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-JRN-14", "BAD_UNDO_MAP", path)
