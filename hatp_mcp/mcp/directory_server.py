"""`serve_directory(server, directory, ...)`: the Directory as an MCP server (spec/mcp-binding.md, HATP-MCP-14/15).

- `hatp/directory/resolve` (ResolveRequest -> ResolveResult): who may decide an action on an amount for an
  address, ranked, and who may not with the rule and a detail, exactly as hatp_mcp/core/gateway/directory.py computes;
- resources: each trusted Human Card as `cards://ORG/NAME` (also through the template `cards://{org}/{name}`),
  served as the very object the Directory signed so a reader verifies it offline, and the well-known document as
  `wellknown://ORG/human-card.json`;
- over HTTP, beside MCP, the same documents where discovery looks for them: `/.well-known/human-card.json` and
  `/cards/NAME.json` (HATP-MCP-48).

Cards carry channel types only, never contact details, and nothing else is served. No protocol logic here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import datetime
from decimal import Decimal
from typing import Any

import anyio
from mcp.server import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from hatp_mcp.core.gateway.address import parse_address
from hatp_mcp.core.gateway.directory import Criteria, Directory
from hatp_mcp.core.model.amount import totals
from hatp_mcp.core.model.base import WireModel, format_ts, parse_ts
from hatp_mcp.core.model.gateway_messages import Eligible, Excluded, ResolveRequest, ResolveResult
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import to_mcp_error
from hatp_mcp.mcp.extension import HatpSettings, advertise
from hatp_mcp.mcp.hatp_methods import add_method, lowlevel_of
from hatp_mcp.runtime.clock import Clock

__all__ = ["card_uri", "resolve", "serve_directory", "well_known_uri"]

JSON = "application/json"


def card_uri(human: str) -> str:
    """`human://acme.com/alice` -> `cards://acme.com/alice`."""
    return "cards://" + human.removeprefix("human://")


def well_known_uri(organization: str) -> str:
    return f"wellknown://{organization}/human-card.json"


def resolve(
    directory: Directory, req: ResolveRequest, now: datetime, open_asks: Mapping[str, int] | None = None
) -> ResolveResult:
    """HATP-MCP-14. `open_asks`: the asks open now for each person (core/gateway/waiting.py `open_asks_of` over the
    gateway's pending asks), counted with each card's `capacity.open` as the gateway's routing counts them
    (HATP-GW-9, HATP-GW-95). Raises HatpError: HATP-ADDR-1..4 (the address), HATP-MCP-14 (another organisation)."""
    addr = parse_address(req.address, "$.address")
    if not addr.is_human:
        raise HatpError(
            "HATP-ADDR-4", f"{req.address!r} is an agent; only humans decide", path="$.address", code="BAD_ADDRESS"
        )
    if addr.org != directory.organization:
        raise HatpError(
            "HATP-MCP-14",
            f"this Directory answers for {directory.organization}, not {addr.org}",
            path="$.address",
            fix=f"ask the Directory of {addr.org}",
            code="UNKNOWN_ORG",
        )
    up_to: dict[str, Decimal] = totals(req.amounts)
    criteria = Criteria(
        action=req.action,
        up_to=up_to,
        requester=req.requester,
        decide_by=parse_ts(req.decide_by) if req.decide_by else None,
        open_asks=dict(open_asks or {}),
    )
    res = directory.resolve(addr, criteria, now)
    return ResolveResult(
        address=req.address,
        organization=directory.organization,
        resolved_at=format_ts(now),
        eligible=[
            Eligible(
                human=c.human,
                display_name=c.card.display_name,
                rank=i,
                in_time=c.in_time,
                sla_seconds=c.card.sla.decide_seconds,
                availability=c.card.availability.status,
            )
            for i, c in enumerate(res.eligible, start=1)
        ],
        excluded=[Excluded(human=e.human, reason=e.reason, rule=e.rule, detail=e.detail) for e in res.excluded],
    )


def _reader(text: str) -> Callable[[], str]:
    def read() -> str:
        return text

    return read


def serve_directory(
    server: MCPServer,
    directory: Directory,
    signed_cards: Mapping[str, Mapping[str, Any]],
    well_known: Mapping[str, Any],
    clock: Clock,
    open_asks: Callable[[], Mapping[str, int]] | None = None,
) -> HatpSettings:
    """Register resolve and the resources. `signed_cards`: card id -> the signed JSON object, for trusted cards
    only (the caller loaded them through Directory.load); `open_asks`: the live open asks by person, read at each
    resolve (HATP-GW-95; without it, each card's own `capacity.open` alone). Returns the advertised settings (role
    directory)."""
    low = lowlevel_of(server)
    keys = [k for k in well_known.get("keys", []) if "directory" in k.get("roles", [])]
    settings = HatpSettings(roles=["directory"], keys=keys)
    advertise(low, settings)

    async def call(req: ResolveRequest) -> WireModel:
        now = parse_ts(req.now) if req.now else clock.now()
        live: Mapping[str, int] = {}
        if open_asks is not None:  # HATP-GW-95: the asks open now count, as the gateway's routing counts them
            live = open_asks()
        return resolve(directory, req, now, live)

    add_method(low, "hatp/directory/resolve", ResolveRequest, call, anyio.Semaphore(64))

    trusted = {h: dict(doc) for h, doc in signed_cards.items() if directory.card(h) is not None}
    for human, doc in sorted(trusted.items()):
        card = directory.card(human)
        name = card.display_name if card else human
        server.resource(card_uri(human), name=human, description=f"Human Card of {name}", mime_type=JSON)(
            _reader(json.dumps(doc))
        )

    def any_card(org: str, name: str) -> str:
        """A Human Card by organisation and name."""
        doc = trusted.get(f"human://{org}/{name}")
        if doc is None:
            raise to_mcp_error(
                HatpError("HATP-MCP-15", f"no trusted card human://{org}/{name}", path="$.uri", code="NO_SUCH_CARD")
            )
        return json.dumps(doc)

    server.resource("cards://{org}/{name}", mime_type=JSON)(any_card)
    wk_text = json.dumps(dict(well_known))

    def read_well_known() -> str:
        return wk_text

    server.resource(
        well_known_uri(directory.organization),
        name="well-known",
        description=f"/.well-known/human-card.json of {directory.organization}",
        mime_type=JSON,
    )(read_well_known)
    _serve_documents(server, directory.organization, wk_text, trusted)
    return settings


def _serve_documents(server: MCPServer, organization: str, well_known: str, cards: Mapping[str, Any]) -> None:
    """HATP-MCP-48: over HTTP, beside MCP, the documents discovery reads: GET /.well-known/human-card.json and
    GET /cards/NAME.json (a trusted card only; anything else is 404 with the rule). Read only, no state."""

    async def get_well_known(_request: Request) -> Response:
        return Response(well_known, media_type=JSON)

    async def get_card(request: Request) -> Response:
        name = str(request.path_params["name"])
        doc = cards.get(f"human://{organization}/{name}")
        if doc is None:
            return JSONResponse(
                {"rule": "HATP-MCP-48", "reason": f"no trusted card human://{organization}/{name}"}, status_code=404
            )
        return Response(json.dumps(doc), media_type=JSON)

    server.custom_route("/.well-known/human-card.json", methods=["GET"])(get_well_known)
    server.custom_route("/cards/{name}.json", methods=["GET"])(get_card)
