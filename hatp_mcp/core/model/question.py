"""A question an agent asks people over MCP (`hatp/ask/{choose,form,text}`, spec/mcp-binding.md HATP-MCP-33). Pure.

`QuestionRequest` is the question as the agent sends it, with its signed hatp.agent-request (subject
`question`) about `question_digest(...)` of the rest, so the gateway knows whom the agent asks for (the person
its Directory-signed card names) and routes with that person as requester (separation of duties, HATP-GW-5).
`askId` is the agent's own name for the question: the same id and question again is the same ask; the same id
with another question is refused.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from hatp_mcp.core.model.base import Ident, Timestamp, WireModel
from hatp_mcp.core.model.gateway import MAX_TEXT_ANSWER, Option
from hatp_mcp.core.signing.canonical import digest

__all__ = ["QuestionQuery", "QuestionRequest", "question_digest"]

QuestionKind = Literal["choose", "form", "text"]


class QuestionRequest(WireModel):
    """hatp/ask/choose | form | text sent to a gateway: ask `address` a question; `request` proves for whom."""

    type: Literal["hatp.question"] = "hatp.question"
    ask_id: Ident
    kind: QuestionKind
    address: str = Field(min_length=1, max_length=500)
    question: str = Field(min_length=1, max_length=4000)
    options: list[Option] = Field(default_factory=list, max_length=64)
    form_schema: dict[str, Any] | None = None
    max_length: int | None = Field(default=None, ge=1, le=MAX_TEXT_ANSWER)
    decide_by: Timestamp | None = None
    request: dict[str, Any] | None = None


class QuestionQuery(WireModel):
    """hatp/ask/status sent to a gateway: where a question stands; its signed Answer once answered."""

    type: Literal["hatp.question-query"] = "hatp.question-query"
    ask_id: Ident


def question_digest(question: QuestionRequest) -> str:
    """What the agent's request names (subject `question`): the digest of the question without the request."""
    return digest({k: v for k, v in question.wire().items() if k != "request"})
