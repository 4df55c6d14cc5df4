"""A bare forwarding MCP server, for bench/journal_proxy.py's floor: the upstream's tools re-exposed and each call
passed on as the journaling proxy passes it (the same SDK client upstream, the same low-level server and stdio),
with no journal. What it costs over a direct call is the extra stdio hop any proxy pays.

`python -m bench._forward --upstream TARGET` (TARGET as servers.journal_proxy takes it). Never writes to stdout.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
from mcp import Client
from mcp.client.stdio import stdio_client
from mcp.server import Server

from hatp_mcp.mcp.serve import quiet, serve
from servers.journal_proxy import parse_upstream

__all__ = ["main"]


async def _run(target: str, errlog: Path) -> None:
    upstream_target = parse_upstream(target)
    async with AsyncExitStack() as stack:
        if isinstance(upstream_target, str):
            client = Client(upstream_target)
        else:
            client = Client(stdio_client(upstream_target, errlog=stack.enter_context(errlog.open("a"))))
        upstream = await stack.enter_async_context(client)
        tools = (await upstream.list_tools()).tools

        async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
            return types.ListToolsResult(tools=tools)

        async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
            return await upstream.call_tool(params.name, dict(params.arguments or {}), meta=params.meta)

        server: Server[Any] = Server("bench-forward", version="0.1.0", on_list_tools=list_tools, on_call_tool=call_tool)
        await serve(server, "stdio")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="bench._forward")
    p.add_argument("--upstream", required=True)
    p.add_argument("--errlog", default="/dev/null")
    args = p.parse_args(argv)
    quiet()
    anyio.run(_run, args.upstream, Path(args.errlog))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
