"""The single boundary between core refusals (HatpError) and JSON-RPC errors on the MCP wire, both ways.

Server side, `to_mcp_error` turns a HatpError into `MCPError(code, message, data)` with a stable numeric code
from CODES and the refusal's rule, path, reason and fix as `data`. Client side, `from_mcp_error` turns a received
MCPError back into a HatpError, and a transport failure (timeout, connection closed, unreachable server) into
`TransportFailed`, which means "no answer": for a commit that is in doubt, never a refusal. No other module maps
errors; this one must not do IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mcp import MCPError

from hatp_mcp.errors import HatpError

__all__ = [
    "CODES",
    "DEFAULT_CODE",
    "INVALID_PARAMS",
    "REQUEST_TIMEOUT",
    "TransportFailed",
    "code_for",
    "from_mcp_error",
    "to_mcp_error",
]

INVALID_PARAMS = -32602
REQUEST_TIMEOUT = -32001  # the SDK's per-request read timeout
CONNECTION_CLOSED = -32000  # the SDK's "Connection closed" on a dead stdio child
METHOD_NOT_FOUND = -32601

# Stable machine name -> JSON-RPC error code. Codes never change meaning; new names get new codes.
CODES: dict[str, int] = {
    "APPROVAL_REQUIRED": -32050,
    "PRECONDITION_CHANGED": -32051,
    "PLAN_MISMATCH": -32052,
    "SIGNATURE_INVALID": -32053,
    "LOCKED": -32054,
    "STALE_TOKEN": -32055,
    "HOLD_LOST": -32056,
    "NOT_PREPARED": -32057,
    "IRREVERSIBLE": -32058,
    "UNDO_WINDOW_PASSED": -32059,
    "ILLEGAL_TRANSITION": -32060,
    "COST_UNDERSTATED": -32061,
    "UNKNOWN_TXN": -32062,
    "NOT_A_HOLD": -32063,
    "UNSUPPORTED": -32064,
    "APPROVAL_INVALID": -32065,  # gated tools (spec/gated-tools.md): an approval was given and does not fit
    # acting only for a trusted coordinator (spec/mcp-binding.md HATP-TRUST-1..12)
    "COORDINATOR_UNPROVEN": -32080,
    "AUTH_MISMATCH": -32081,
    "AUTH_EXPIRED": -32082,
    "TXN_BOUND": -32083,
    "NO_TRUSTED_COORDINATOR": -32084,
    "DECISION_UNPROVEN": -32085,
    "VOTE_MISMATCH": -32086,
}
DEFAULT_CODE = -32069  # any other HATP refusal: still a refusal, never a success


class TransportFailed(HatpError):
    """The call got no answer: a timeout, a closed connection or an unreachable server (HATP-MCP-6).

    It says nothing about what the server did. The caller treats it as "unknown", asks again (every hatp/* call
    is idempotent on its txnId and branchId) or, for a commit, records the branch as in doubt.
    """


def code_for(exc: HatpError) -> int:
    """The JSON-RPC code for a refusal: schema errors are invalid params, signatures one code, else CODES."""
    if exc.rule.startswith("HATP-OBJ-"):
        return INVALID_PARAMS
    if exc.rule.startswith("HATP-SIG-"):
        return CODES["SIGNATURE_INVALID"]
    return CODES.get(exc.code, DEFAULT_CODE)


def to_mcp_error(exc: HatpError) -> MCPError:
    """HATP-MCP-3: a refusal on the wire, with its code name as message and the whole refusal as data."""
    data: dict[str, Any] = dict(exc.to_dict())
    return MCPError(code=code_for(exc), message=exc.code, data=data)


def _str(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


def from_mcp_error(err: MCPError, method: str) -> HatpError:
    """The HatpError a received JSON-RPC error stands for.

    A timeout or closed connection gives TransportFailed (HATP-MCP-6); an error carrying a HATP refusal in
    `data` gives that refusal back with its rule, path and fix; any other error is a refusal under HATP-MCP-3
    naming the code, so an unknown error never reads as success.
    """
    code = err.code
    if code in (REQUEST_TIMEOUT, CONNECTION_CLOSED):
        name = "TIMEOUT" if code == REQUEST_TIMEOUT else "CONNECTION_CLOSED"
        return TransportFailed(
            "HATP-MCP-6",
            f"{method}: no answer ({err.message})",
            code=name,
            fix="ask again with the same txnId and branchId; the call is idempotent",
        )
    data = err.error.data if isinstance(err.error.data, Mapping) else {}
    rule = _str(data.get("rule"))
    if rule.startswith("HATP-"):
        extra = data.get("data")
        return HatpError(
            rule,
            _str(data.get("reason"), err.message),
            path=_str(data.get("path")),
            fix=_str(data.get("fix")),
            code=_str(data.get("code"), err.message),
            data=dict(extra) if isinstance(extra, Mapping) else None,
        )
    return HatpError(
        "HATP-MCP-3",
        f"{method}: JSON-RPC error {code}: {err.message}",
        code="METHOD_NOT_FOUND" if code == METHOD_NOT_FOUND else "RPC_ERROR",
        fix="check that the server speaks HATP (capabilities.extensions['ai.probita/human-gateway'])",
    )
