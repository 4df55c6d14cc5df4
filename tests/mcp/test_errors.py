"""The one error boundary: HatpError -> MCPError with a stable code, and back; no answer is TransportFailed."""

from __future__ import annotations

from mcp import MCPError

from hatp_mcp.core.model.wire import WireError
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import CODES, DEFAULT_CODE, TransportFailed, from_mcp_error, to_mcp_error


def test_HATP_MCP_3_a_refusal_becomes_its_stable_code_with_the_whole_refusal_as_data() -> None:
    exc = HatpError(
        "HATP-MCP-3", "seat version moved", path="$.preconditions", fix="re-prepare", code="PRECONDITION_CHANGED"
    )
    err = to_mcp_error(exc)
    assert (err.code, err.message) == (-32051, "PRECONDITION_CHANGED")
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
