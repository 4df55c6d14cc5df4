"""The gate's inbox link as an MCP URL-mode elicitation (spec/proxy.md HATP-PXY-66).

Where the client declared the elicitation capability with URL mode and its connection can carry a request from the
server (the handshake protocol versions), the first progress message of a gated call that holds an http(s) link
is also sent as `elicitation/create` in URL mode, so the client shows the person the inbox page out of band. Every
other client (no such capability, or a 2026-07-28 connection with no back-channel) reads the same link in the
progress text and the result, as before. The client's answer (accept, decline, cancel) changes nothing: the call
still waits for the people's signed decision. This module only wraps the gate's `Progress`; it must not decide
anything about the approval.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import unquote

import mcp.types as types
from mcp import MCPError

from hatp_mcp.mcp.proxy_gate import Progress

__all__ = ["URL_MODE", "url_elicitation"]

URL_MODE = types.ClientCapabilities(elicitation=types.ElicitationCapability(url=types.UrlElicitationCapability()))
_LINK = re.compile(r"https?://[^\s()<>\"']+")


def url_elicitation(ctx: Any, progress: Progress) -> Progress:
    """`progress`, plus one URL-mode elicitation of the first http(s) link it reports, for a client that declared
    URL mode (HATP-PXY-66). `ctx` is the call's request context (its `session` and `request_id`)."""
    sent = False

    async def report(message: str) -> None:
        nonlocal sent
        found = None if sent else _LINK.search(message)
        if found is not None and ctx.session.check_client_capability(URL_MODE):  # HATP-PXY-66: declared URL mode
            sent = True
            link = found.group(0).rstrip(".,;:")
            try:
                await ctx.session.elicit_url(
                    message, link, unquote(link.rstrip("/").rsplit("/", 1)[-1]), related_request_id=ctx.request_id
                )
            except MCPError:  # no back-channel on this connection, or the client refused: the text still says it
                pass
        await progress(message)

    return report
