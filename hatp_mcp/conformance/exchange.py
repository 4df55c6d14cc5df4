"""One hatp/* request over the MCP SDK client, kept as what came back: a result object, a JSON-RPC error (code,
message, data) or no answer. Unlike hatp_mcp.mcp.call, nothing is translated or raised: a conformance check must
see the exact code and data the server sent."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
from mcp import Client, MCPError
from pydantic import BaseModel, ConfigDict

from hatp_mcp.mcp.call import SDK_RESULT_KEYS, HatpRequest

__all__ = ["Answer", "exchange"]


class _AnyResult(BaseModel):
    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class Answer:
    result: dict[str, Any] | None = None
    code: int | None = None  # the JSON-RPC error code
    message: str | None = None
    data: Any = None
    lost: str | None = None  # no answer: what happened instead

    @property
    def error_data(self) -> dict[str, Any]:
        return self.data if isinstance(self.data, dict) else {}

    def describe(self) -> str:
        if self.lost is not None:
            return f"no answer ({self.lost})"
        if self.result is not None:
            return "a result " + _short(self.result)
        data = self.error_data
        where = f" path {data['path']}" if data.get("path") else ""
        return f"error {self.code} {self.message!r} (rule {data.get('rule')!r}, code {data.get('code')!r}{where})"


def _short(value: dict[str, Any]) -> str:
    keys = ("type", "state", "decision", "phase", "outcome", "code")
    parts = []
    for name in ("vote", "receipt"):
        part = value.get(name)
        if isinstance(part, dict):
            parts.append(name + "{" + ", ".join(f"{k}={part[k]}" for k in keys if k in part) + "}")
    parts += [f"{k}={value[k]}" for k in keys if k in value]
    return "{" + ", ".join(parts) + "}"


async def exchange(client: Client, method: str, params: dict[str, Any], answer_seconds: float) -> Answer:
    """Send `method` with `params` (a plain dict, sent as is) and keep what came back, bounded by `answer_seconds`."""
    try:
        raw = await client.session.send_request(
            HatpRequest(method=method, params=params), _AnyResult, request_read_timeout_seconds=answer_seconds
        )
    except MCPError as exc:
        return Answer(code=exc.code, message=exc.error.message, data=exc.error.data)
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, anyio.EndOfStream, OSError) as exc:
        return Answer(lost=f"connection lost: {exc!r}")
    except ExceptionGroup as group:  # the HTTP transport wraps httpx2 errors in groups
        return Answer(lost=f"unreachable: {group.exceptions[0]!r}")
    return Answer(result={k: v for k, v in (raw.model_extra or {}).items() if k not in SDK_RESULT_KEYS})
