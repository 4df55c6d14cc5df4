"""The Human Gateway of `make demo-gated`, as its own MCP server process: an agent asks it to approve one tool
call, the finance approvers decide, and it signs the Approval (subject tool-call) with the gateway key.

`python -m demo.gated_gateway --org ORG_DIR --key GATEWAY_KEY.json` serves stdio. Tools: `request_approval`
(route the call, return who was asked and who was excluded and why) and `decide` (a person approves or
rejects; once the quorum decided it returns the signed approval). Asks live in memory: the durable gateway is
hatp_mcp/runtime/gateway.py; this process only shows the tool-call seam (hatp_mcp/core/toolcall.py).
"""

from __future__ import annotations

import argparse
import json
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mcp.server import MCPServer

from hatp_mcp.core.evidence import sign_model
from hatp_mcp.core.gate import GateRequirement
from hatp_mcp.core.gateway import decide, state_of
from hatp_mcp.core.keys import SigningKey
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.toolcall import ToolCall
from hatp_mcp.core.toolcall import build_tool_call_approval, open_tool_call_ask
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import to_mcp_error
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.gateway import load_org

__all__ = ["build", "main"]


@dataclass
class _Ask:
    rec: AskRecord
    call: ToolCall
    approval: dict[str, Any] | None = None


def build(org: str | Path, key: SigningKey) -> MCPServer:
    directory, _ignored, _contacts = load_org(org)
    gateway_id = directory.well_known.gateway
    clock = SystemClock()
    asks: dict[str, _Ask] = {}
    server = MCPServer("human-gateway", log_level="WARNING")

    def request_approval(
        server_id: str,
        tool: str,
        arguments: dict[str, Any],
        requires: dict[str, Any],
        requester: str,
        call_digest: str,
        tool_digest: str | None = None,
    ) -> dict[str, Any]:
        """Ask the humans at `requires.address` to approve this exact tool call."""
        try:
            rec, call = open_tool_call_ask(
                server=server_id,
                tool=tool,
                arguments=arguments,
                requirement=GateRequirement.from_config(requires),
                tool_digest=tool_digest,
                requester=requester,
                directory=directory,
                gateway=gateway_id,
                now=clock.now(),
                call_digest_seen=call_digest,
            )
        except HatpError as exc:
            raise to_mcp_error(exc) from None
        asks[rec.ask.ask_id] = _Ask(rec, call)
        seats = [{"human": s.human, "status": s.status, "detail": s.detail} for s in rec.seats]
        return {
            "askId": rec.ask.ask_id,
            "state": rec.state,
            "quorum": [rec.quorum_required, rec.quorum_of],
            "seats": seats,
        }

    def decide_ask(ask_id: str, human: str, decision: str) -> dict[str, Any]:
        """A person the gateway asked approves or rejects."""
        entry = asks.get(ask_id)
        if entry is None:
            raise to_mcp_error(HatpError("HATP-GW-11", f"no ask {ask_id}", code="NO_SUCH_ASK"))
        try:
            entry.rec = decide(entry.rec, human, decision, clock.now())
        except HatpError as exc:
            raise to_mcp_error(exc) from None
        now = clock.now()
        built = build_tool_call_approval(
            entry.rec, entry.call, gateway=gateway_id, nonce=secrets.token_hex(16), now=now
        )
        if built is not None and entry.approval is None:
            entry.approval = sign_model(built, key).wire()
        return {"askId": ask_id, "state": state_of(entry.rec).value, "approval": entry.approval}

    server.add_tool(request_approval)
    server.add_tool(decide_ask, name="decide")
    return server


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--org", required=True, help="organisation dir (.well-known, cards)")
    ap.add_argument("--key", required=True, help="the gateway's private JWK (roles: gateway)")
    args = ap.parse_args(argv)
    key = SigningKey.from_jwk(json.loads(Path(args.key).read_text()))
    build(args.org, key).run("stdio")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
