"""Run by tests/e2e/test_third_party_clients.py in the clients' own venv (tests/e2e/clients/.venv, `make clients`),
never imported by the project: for each server of a Claude Desktop `mcpServers` config, fastmcp's Client alone
on it (a stdio command or a URL with its headers) lists its tools and makes one call; prints what each saw.

`python fastmcp_each.py CONFIG TOOL ARGS_JSON`
"""

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

from fastmcp import Client


async def one(entry: dict[str, Any], tool: str, args: dict[str, Any]) -> dict[str, Any]:
    try:
        async with Client({"mcpServers": {"only": entry}}, timeout=120) as client:
            tools = sorted(t.name for t in await client.list_tools())
            result = await client.call_tool(tool, args, raise_on_error=False)
    except Exception as exc:  # a refused connection or session is what this client reports
        return {"failed": f"{type(exc).__name__}: {exc}"}
    text = " ".join(getattr(c, "text", "") for c in result.content)
    return {"tools": tools, "isError": result.is_error, "structured": result.structured_content, "text": text}


async def main(servers: dict[str, Any], tool: str, args: dict[str, Any]) -> dict[str, Any]:
    return {name: await one(entry, tool, args) for name, entry in servers.items()}


if __name__ == "__main__":
    print(
        json.dumps(
            asyncio.run(
                main(json.loads(Path(sys.argv[1]).read_text())["mcpServers"], sys.argv[2], json.loads(sys.argv[3]))
            )
        )
    )
