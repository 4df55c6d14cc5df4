"""`serve_gateway_questions(server, gateway)`: questions an agent asks people through the Human Gateway over MCP
(spec/mcp-binding.md HATP-MCP-33).

Methods `hatp/ask/choose`, `hatp/ask/form`, `hatp/ask/text` (QuestionRequest, the kind named by the method) open a
question to an address and answer its view (askId, state, who is asked); `hatp/ask/status` (QuestionQuery)
answers the view again, with the gateway's signed Answer once a person answered. The agent tools `ask_choose`,
`ask_form`, `ask_text` and `question_status` are the same under other names, refusals as tool results. Routing,
separation of duties, deadlines and what a fitting answer is are GatewayApprover's and the core's (an answer that
does not fit is refused before anything signs it; a person who declines passes the question on). This module
only binds them to MCP and leaves refusals through hatp_mcp.mcp.errors.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import Field

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.gateway import MAX_TEXT_ANSWER
from hatp_mcp.core.model.question import QuestionQuery, QuestionRequest
from hatp_mcp.core.model.wire import parse
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.agent_guide import describe
from hatp_mcp.mcp.errors import agent_tool, to_mcp_error
from hatp_mcp.mcp.gateway_tools import Words, ask_view
from hatp_mcp.mcp.hatp_methods import AnyParams, lowlevel_of
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.gateway_store import StoredAsk

__all__ = ["QUESTION_METHODS", "QUESTION_TOOLS", "serve_gateway_questions"]

QUESTION_METHODS = ("hatp/ask/choose", "hatp/ask/form", "hatp/ask/text", "hatp/ask/status")
QUESTION_TOOLS = ("ask_choose", "ask_form", "ask_text", "question_status")

AskIdArg = Annotated[
    str, Field(min_length=1, max_length=128, description="Your own id for this question, new for each question.")
]
AddressArg = Annotated[
    str,
    Field(
        min_length=1,
        max_length=500,
        description="Whom to ask: a human:// address such as human://acme.com/role/finance-approver.",
    ),
]
QuestionArg = Annotated[str, Field(min_length=1, max_length=4000, description="The question, shown as agent-written.")]
OptionsArg = Annotated[
    list[dict[str, Any]],
    Field(min_length=1, max_length=64, description='The choices: [{"id": "adlon", "label": "Hotel Adlon"}, ...].'),
]
SchemaArg = Annotated[dict[str, Any], Field(description="A JSON Schema (2020-12) the answer's fields must meet.")]
MaxLengthArg = Annotated[
    int | None, Field(default=None, ge=1, le=MAX_TEXT_ANSWER, description="The longest answer, in characters.")
]
DecideByArg = Annotated[
    str | None,
    Field(default=None, description="When the people must have answered (RFC 3339 UTC, future); default: a day."),
]
RequestArg = Annotated[
    dict[str, Any],
    Field(
        description='Your hatp.agent-request, subject "question", subjectDigest the sha256 of the RFC 8785 form of '
        'this question as {"type": "hatp.question", "askId", "kind", "address", "question", "options"?, '
        '"formSchema"?, "maxLength"?, "decideBy"?}, signed with the key on your agent card.'
    ),
]


# Every ask_* call needs the agent's signed request (HATP-GW-49): offered only to a client that signs.
QUESTION_SIGNING_TOOLS = ("ask_choose", "ask_form", "ask_text")


def _no_such_ask(ask_id: str) -> HatpError:
    return HatpError(
        "HATP-MCP-33", f"the gateway has no question {ask_id!r}", path="$.askId", fix="ask it first", code="NO_SUCH_ASK"
    )


def serve_gateway_questions(server: MCPServer, gateway: GatewayApprover, *, signing: bool = True) -> None:
    """Register the hatp/ask/* methods and the agents' question tools of `gateway` on `server`; with `signing` False
    (a client that cannot sign its agent-request), without QUESTION_SIGNING_TOOLS (HATP-MCP-57): the methods stay,
    for programs that sign."""
    low = lowlevel_of(server)

    async def ask(question: QuestionRequest) -> dict[str, Any]:
        return ask_view(await gateway.ask_question(question), full=True, words=Words.of(gateway))

    async def status(ask_id: str) -> dict[str, Any]:
        try:
            stored: StoredAsk = await gateway.current(ask_id)
        except KeyError:
            raise _no_such_ask(ask_id) from None
        return ask_view(stored, words=Words.of(gateway))

    def method(name: str, model: type[WireModel], fn: Callable[[Any], Awaitable[dict[str, Any]]]) -> None:
        async def handler(ctx: Any, params: AnyParams) -> dict[str, Any]:
            try:
                return await fn(parse(model, dict(params.model_extra or {}), name))
            except HatpError as exc:
                raise to_mcp_error(exc) from exc

        low.add_request_handler(name, AnyParams, handler)

    for kind in ("choose", "form", "text"):

        async def of_kind(q: QuestionRequest, kind: str = kind) -> dict[str, Any]:
            if q.kind != kind:
                raise HatpError("HATP-MCP-33", f"hatp/ask/{kind} asks a {kind} question, not {q.kind}", path="$.kind")
            return await ask(q)

        method(f"hatp/ask/{kind}", QuestionRequest, of_kind)
    method("hatp/ask/status", QuestionQuery, lambda q: status(q.ask_id))

    def build(kind: str, ask_id: str, address: str, text: str, request: dict[str, Any], **kw: Any) -> Any:
        body = {"askId": ask_id, "kind": kind, "address": address, "question": text, "request": request}
        return parse(QuestionRequest, body | {k: v for k, v in kw.items() if v is not None}, f"ask_{kind}")

    async def ask_choose(
        ask_id: AskIdArg,
        address: AddressArg,
        question: QuestionArg,
        options: OptionsArg,
        request: RequestArg,
        decide_by: DecideByArg = None,
    ) -> dict[str, Any]:
        """Ask the people at `address` to pick one of `options`. Returns at once with the askId; the answer
        (an option id, in the gateway's signed Answer) comes through question_status."""
        return await ask(build("choose", ask_id, address, question, request, options=options, decideBy=decide_by))

    async def ask_form(
        ask_id: AskIdArg,
        address: AddressArg,
        question: QuestionArg,
        form_schema: SchemaArg,
        request: RequestArg,
        decide_by: DecideByArg = None,
    ) -> dict[str, Any]:
        """Ask the people at `address` to fill in fields that meet `form_schema`. Returns at once with the askId;
        the answer comes through question_status."""
        q = build("form", ask_id, address, question, request, formSchema=form_schema, decideBy=decide_by)
        return await ask(q)

    async def ask_text(
        ask_id: AskIdArg,
        address: AddressArg,
        question: QuestionArg,
        request: RequestArg,
        max_length: MaxLengthArg = None,
        decide_by: DecideByArg = None,
    ) -> dict[str, Any]:
        """Ask the people at `address` a question answered in words. Returns at once with the askId; the answer
        comes through question_status."""
        q = build("text", ask_id, address, question, request, maxLength=max_length, decideBy=decide_by)
        return await ask(q)

    async def question_status(ask_id: AskIdArg) -> dict[str, Any]:
        """Where a question stands: who is still asked, and once a person answered, the gateway's signed Answer
        (its value, who answered, their own signed decision)."""
        return await status(ask_id)

    for fn in (ask_choose, ask_form, ask_text, question_status):
        if signing or fn.__name__ not in QUESTION_SIGNING_TOOLS:
            server.add_tool(agent_tool(fn), name=fn.__name__, description=describe(fn))
