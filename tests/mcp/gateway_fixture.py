"""A Human Gateway for in-memory MCP tests: GatewayApprover on the acme.com organisation, a fake clock, a store
under a temporary dir, and an MCPServer serving it as a voter (serve_gateway). Test data only."""

from __future__ import annotations

from pathlib import Path

from mcp.server import MCPServer

from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.mcp.gateway_server import serve_gateway
from hatp_mcp.runtime.clock import Clock, FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover, RecordingNotifier
from hatp_mcp.store.gateway_store import SqliteGatewayStore
from tests.acme_org import agent_keys, contacts, directory, gateway_key
from tests.coordinators import trusted

__all__ = ["make_gateway", "voter_server"]


def make_gateway(data: Path, clock: FakeClock, key: SigningKey | None = None) -> GatewayApprover:
    store = SqliteGatewayStore(data)
    for human, book in contacts().items():
        for channel, address in book.items():
            store.set_contact(human, channel, address)
    return GatewayApprover(
        directory=directory(),
        key=key or gateway_key(),
        store=store,
        clock=clock,
        notifier=RecordingNotifier(),
        agents=agent_keys(),
    )


def voter_server(gw: GatewayApprover, clock: Clock | None = None) -> MCPServer:
    """`gw` as a voter acting for the test coordinator (tests.coordinators), on `clock` (default the gateway's)."""
    server = MCPServer("human-gateway", log_level="WARNING")
    serve_gateway(server, gw, trust=trusted(clock or gw.clock))
    return server
