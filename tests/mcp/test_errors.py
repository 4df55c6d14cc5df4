"""The one error boundary: HatpError -> MCPError with a stable code, and back; no answer is TransportFailed."""

from __future__ import annotations

from mcp import MCPError

from hatp_mcp.core.model.wire import WireError
from hatp_mcp.errors import HatpError, TransportFailed
from hatp_mcp.mcp.errors import (
    CODES,
    DEFAULT_CODE,
    LISTED,
    from_mcp_error,
    refusal_text,
    to_mcp_error,
    tool_refusal,
)


def test_HATP_MCP_3_a_refusal_becomes_its_stable_code_with_the_whole_refusal_as_data() -> None:
    exc = HatpError(
        "HATP-MCP-3", "seat version moved", path="$.preconditions", fix="re-prepare", code="PRECONDITION_CHANGED"
    )
    err = to_mcp_error(exc)
    assert err.code == -32051
    assert err.message == (
        "PRECONDITION_CHANGED: refused under HATP-MCP-3 at $.preconditions: seat version moved\nWhat to do: re-prepare"
    )
    assert err.data == {
        "rule": "HATP-MCP-3",
        "code": "PRECONDITION_CHANGED",
        "reason": "seat version moved",
        "path": "$.preconditions",
        "fix": "re-prepare",
    }


def test_HATP_MCP_3_approval_required_is_minus_32050() -> None:
    assert to_mcp_error(HatpError("HATP-MCP-3", "ask a human", code="APPROVAL_REQUIRED")).code == -32050
    assert CODES["APPROVAL_REQUIRED"] == -32050


def test_schema_refusals_are_invalid_params_and_unknown_codes_fall_back_to_the_generic_refusal() -> None:
    assert to_mcp_error(WireError("HATP-OBJ-3", "bad", path="x")).code == -32602
    assert to_mcp_error(HatpError("HATP-MCP-3", "new", code="SOMETHING_NEW")).code == DEFAULT_CODE


def test_codes_are_distinct() -> None:
    assert len(set(CODES.values())) == len(CODES)
    assert DEFAULT_CODE not in CODES.values()


def test_a_refusal_survives_the_round_trip_with_rule_path_and_fix() -> None:
    exc = HatpError(
        "HATP-MCP-5", "stale token", path="$.token", fix="acquire again", code="STALE_TOKEN", data={"current": 4}
    )
    back = from_mcp_error(to_mcp_error(exc), "hatp/lock/renew")
    assert (back.rule, back.code, back.path, back.fix, back.data) == (
        "HATP-MCP-5",
        "STALE_TOKEN",
        "$.token",
        "acquire again",
        {"current": 4},
    )
    assert not isinstance(back, TransportFailed)


def test_HATP_MCP_3_an_error_without_a_hatp_refusal_is_still_a_refusal() -> None:
    back = from_mcp_error(MCPError(-32603, "Internal error"), "hatp/txn/commit")
    assert (back.rule, back.code) == ("HATP-MCP-3", "RPC_ERROR")
    assert from_mcp_error(MCPError(-32601, "Method not found"), "hatp/txn/x").code == "METHOD_NOT_FOUND"


def test_HATP_MCP_6_a_timeout_or_closed_connection_is_no_answer_not_a_refusal() -> None:
    timeout = from_mcp_error(MCPError(-32001, "Request 'hatp/txn/commit' timed out"), "hatp/txn/commit")
    closed = from_mcp_error(MCPError(-32000, "Connection closed"), "hatp/txn/commit")
    assert isinstance(timeout, TransportFailed) and timeout.code == "TIMEOUT"
    assert isinstance(closed, TransportFailed) and closed.code == "CONNECTION_CLOSED"
    assert timeout.rule == closed.rule == "HATP-MCP-6"


def _plan_refusal(n: int) -> HatpError:
    violations = [
        {"rule": "HATP-VAL-9", "path": f"approvals[{i}].decideBy", "message": f"already past. Set deadline {i} later."}
        for i in range(n)
    ]
    return HatpError(
        "HATP-TXN-1",
        f"the plan is invalid: {n} violation(s)",
        path="approvals[0].decideBy",
        code="PLAN_INVALID",
        fix="fix the violations and begin again",
        data={"violations": violations},
    )


def test_HATP_MCP_3_the_message_says_what_was_refused_why_and_every_violation_with_its_fix() -> None:
    err = to_mcp_error(_plan_refusal(2))
    assert err.message.split("\n") == [
        "PLAN_INVALID: refused under HATP-TXN-1 at approvals[0].decideBy: the plan is invalid: 2 violation(s)",
        "What to do: fix the violations and begin again",
        "Every problem (2), each with its rule, JSON path and fix:",
        "- HATP-VAL-9 at approvals[0].decideBy: already past. Set deadline 0 later.",
        "- HATP-VAL-9 at approvals[1].decideBy: already past. Set deadline 1 later.",
    ]
    assert from_mcp_error(err, "hatp/txn/begin").code == "PLAN_INVALID"


def test_HATP_MCP_3_a_schema_refusal_lists_each_error_with_its_path() -> None:
    text = refusal_text(
        WireError(
            "HATP-OBJ-3",
            "plan: bad",
            path="txnId",
            data={
                "errors": [
                    {"path": "txnId", "message": "txnId is required and missing. Add txnId."},
                    {"path": "branches[0].tier", "message": "branches[0].tier: Input should be 'hold'. Make it match."},
                ]
            },
        )
    )
    assert "- HATP-OBJ-3 at txnId: txnId is required and missing. Add txnId." in text
    assert "- HATP-OBJ-3 at branches[0].tier: branches[0].tier: Input should be 'hold'. Make it match." in text


def test_HATP_MCP_3_a_long_list_is_cut_in_the_text_and_kept_whole_in_the_data() -> None:
    exc = _plan_refusal(LISTED + 3)
    text = refusal_text(exc)
    assert text.count("\n- HATP-VAL-9") == LISTED and text.endswith("... and 3 more (in the structured content)")
    assert len(to_mcp_error(exc).data["data"]["violations"]) == LISTED + 3


def test_HATP_MCP_25_a_tool_refusal_is_an_error_result_with_the_text_and_the_refusal_structured() -> None:
    exc = _plan_refusal(1)
    result = tool_refusal(exc)
    assert result.is_error is True
    assert [c.text for c in result.content] == [refusal_text(exc)]  # type: ignore[union-attr]
    assert result.structured_content == {"refusal": exc.to_dict()}
