"""Run by tests/e2e/test_third_party_clients.py in the clients' own venv (tests/e2e/clients/.venv, `make clients`),
never imported by the project: PydanticAI's MCP client (`load_mcp_toolsets` over a Claude Desktop `mcpServers`
config, an MCPToolset per server), with no model: it lists the proxy's tools and calls tools directly through the
toolset's API, and prints what it saw as one JSON object on stdout.

`python pydantic_ai_tools.py CONFIG SERVER`: SERVER is the config's entry; its tools come prefixed `SERVER_`.
"""

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from pydantic_ai.mcp import MCPToolset, load_mcp_toolsets


async def main(config: Path, server: str) -> dict[str, Any]:
    (prefixed,) = load_mcp_toolsets(config)
    toolset = prefixed.wrapped  # the MCPToolset inside the server's name prefix
    assert isinstance(toolset, MCPToolset), type(toolset)
    out: dict[str, Any] = {"prefix": getattr(prefixed, "prefix", None)}
    async with toolset:
        tools = await toolset.list_tools()
        out["tools"] = {t.name: t.description or "" for t in tools}
        out["graph"] = await toolset.direct_call_tool("read_graph", {})
        out["written"] = await toolset.direct_call_tool(
            "create_entities", {"entities": [{"name": "carol", "entityType": "person", "observations": []}]}
        )
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(Path(sys.argv[1]), sys.argv[2])), default=str))
