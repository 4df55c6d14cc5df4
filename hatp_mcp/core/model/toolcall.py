"""The subject of a tool-call approval: which server, which tool, which arguments (by digest), which tool
definition, and the most that may be paid and to whom. Pure: no IO.

Its digest is the call digest (spec/gated-tools.md): an Approval with subject ``tool-call`` names it as its
``planDigest`` and carries the object itself as ``toolCall``, so a server that refuses can say which part differs.
"""

from __future__ import annotations

from pydantic import Field

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import WireModel

__all__ = ["DIGEST_RE", "ToolCall"]

DIGEST_RE = r"^sha256:[0-9a-f]{64}$"


class ToolCall(WireModel):
    """``{server, tool, argumentsDigest, toolDigest?, maxAmount?, payee?}``; its digest is the call digest."""

    server: str = Field(min_length=1, max_length=500)
    tool: str = Field(min_length=1, max_length=128)
    arguments_digest: str = Field(pattern=DIGEST_RE)
    tool_digest: str | None = Field(default=None, pattern=DIGEST_RE)
    max_amount: Amount | None = None
    payee: str | None = Field(default=None, min_length=1, max_length=500)
