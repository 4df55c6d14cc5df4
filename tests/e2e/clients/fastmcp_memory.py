"""Run by tests/e2e/test_third_party_clients.py in the clients' own venv (tests/e2e/clients/.venv, `make clients`),
never imported by the project: fastmcp's Client, given a Claude Desktop `mcpServers` config, drives server-memory
through the proxy and prints what it saw as one JSON object on stdout.

`python fastmcp_memory.py CONFIG MEMORY_FILE`: a saga that creates an entity and completes; then a saga that
creates another, adds observations to both and is rolled back. The memory file's SHA-256 is taken after the first
saga and before the rollback, so the test can say the file is byte-identical to before.
"""

import asyncio
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from fastmcp import Client


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def seen(result: Any) -> dict[str, Any]:
    texts = [getattr(c, "text", "") for c in result.content]
    return {"isError": result.is_error, "structured": result.structured_content, "text": " ".join(texts)}


async def main(config: dict[str, Any], memory: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    async with Client(config, timeout=60) as client:

        async def call(tool: str, args: dict[str, Any]) -> dict[str, Any]:
            return seen(await client.call_tool(tool, args, raise_on_error=False))

        out["tools"] = sorted(t.name for t in await client.list_tools())
        await call("saga_begin", {"name": "before"})
        await call("create_entities", {"entities": [{"name": "alice", "entityType": "person", "observations": []}]})
        await call("saga_complete", {})
        out["before"] = digest(memory)
        out["begin"] = await call("saga_begin", {"name": "meeting notes"})
        bob = {"name": "bob", "entityType": "person", "observations": ["new"]}
        out["create"] = await call("create_entities", {"entities": [bob]})
        observations = [{"entityName": "alice", "contents": ["met bob"]}, {"entityName": "bob", "contents": ["x"]}]
        out["observe"] = await call("add_observations", {"observations": observations})
        out["changed"] = digest(memory)
        out["denied"] = await call("delete_entities", {"entityNames": ["alice"]})
        out["rollback"] = await call("saga_rollback", {"reason": "the wrong meeting"})
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(json.loads(Path(sys.argv[1]).read_text()), Path(sys.argv[2])))))
