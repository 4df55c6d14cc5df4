"""`serve_coordinator(server, service, settings)`: a coordinator as an MCP server, for agents and for MCP clients.

It registers the coordinator's methods, hatp/txn/begin (params: a Plan), hatp/txn/status (TxnQuery) and
hatp/txn/abort (TxnAbortRequest), each answering a TxnStatus, and the same operations as ordinary MCP tools
(`begin_transaction`, `transaction_status`, `abort_transaction`, `list_pending`) so a client such as Claude
Desktop can drive it. Params are validated as their wire models; refusals leave through hatp_mcp.mcp.errors only:
a method's as a JSON-RPC error (HATP-MCP-3), a tool's as a tool result with `isError` that the model reads
(HATP-MCP-25).
Everything is keyed by txnId, never by connection. The work is hatp_mcp.runtime.coordinator.service's; this module only
binds it to MCP.

Over HTTP every request but the handshake and the listings names its caller by bearer token (HATP-MCP-53,
hatp_mcp.mcp.http_callers, the journal's mechanism): a caller begins only plans whose `requester.agent` it is, and
reads, lists and aborts only those transactions unless its operator granted it every one (`"sees": "all"`); an
abort's record event names the proven caller. Over stdio the parent process is the one caller and acts for every
transaction.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from typing import Annotated, Any, TypeVar

import anyio
from mcp.server import MCPServer
from mcp.server.mcpserver import Context
from pydantic import Field, WithJsonSchema

from hatp_mcp.core.model.base import WireModel
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.txn_api import TxnAbortRequest, TxnQuery
from hatp_mcp.core.model.wire import parse
from hatp_mcp.core.validate.validator import plan_violations
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.agent_guide import EXAMPLE_PLAN_URI, add_agent_guide, describe, plan_schema
from hatp_mcp.mcp.errors import agent_tool, to_mcp_error
from hatp_mcp.mcp.extension import HatpSettings, advertise
from hatp_mcp.mcp.hatp_methods import AnyParams, lowlevel_of
from hatp_mcp.mcp.http_callers import Caller, CallerTokens, caller_middleware, current_caller
from hatp_mcp.runtime.coordinator.service import MAX_WAIT_SECONDS, TxnService

__all__ = [
    "CALLERS_RULE",
    "COORDINATOR_METHODS",
    "COORDINATOR_TOOLS",
    "OPEN_METHODS",
    "PROGRESS_SECONDS",
    "RECORD_URI",
    "serve_coordinator",
]

COORDINATOR_METHODS = ("hatp/txn/begin", "hatp/txn/status", "hatp/txn/abort")
COORDINATOR_TOOLS = ("begin_transaction", "transaction_status", "abort_transaction", "list_pending")
M = TypeVar("M", bound=WireModel)
# A wait that fits a client's default 60 s request timeout, with room for the answer to travel.
SAFE_WAIT_SECONDS = 50
# While a status waits, a progress notification this often (to a client that gave a progress token) keeps a
# client that resets its timeout on progress waiting (HATP-MCP-32).
PROGRESS_SECONDS = 10
RECORD_URI = "hatp://txn/{txn_id}/record"
CALLERS_RULE = "HATP-MCP-53"
# What a client may ask over HTTP before it proves its caller: the handshake and the listings, nothing that reads
# or changes a transaction. Every other request (tools, hatp/txn/*, resources, prompts) needs a caller's token.
OPEN_METHODS = frozenset(
    {
        "initialize",
        "ping",
        "server/discover",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    }
)


def _guarded(method: str) -> bool:
    return method not in OPEN_METHODS and not method.startswith("notifications/")


def _not_requester(caller: Caller, agent: str) -> HatpError:
    return HatpError(
        CALLERS_RULE,
        f"the caller {caller.id!r} begins only its own plans; this plan's requester.agent is {agent!r}: nothing was"
        " begun",
        path="$.requester.agent",
        code="NOT_TXN_OWNER",
        fix="name your own agent as requester.agent, or use the token the coordinator's operator issued for that agent",
    )


def _not_owner(caller: Caller, txn_id: str) -> HatpError:
    return HatpError(
        CALLERS_RULE,
        f"transaction {txn_id} was begun by another agent, not by the caller {caller.id!r}: nothing was read or done",
        path="$.txnId",
        code="NOT_TXN_OWNER",
        fix='act on your own transactions with your own token; an operator grants more with "sees": "all" in the'
        " coordinator's callers file",
    )


# The tools' parameters, described and bounded for the client (and the model) filling them in.
PlanArg = Annotated[
    dict[str, Any],
    WithJsonSchema(plan_schema()),
    Field(
        description=f"The whole HATP plan object (the Plan schema; start from the resource {EXAMPLE_PLAN_URI}). "
        "Its times must be in the future."
    ),
]
RequestArg = Annotated[
    dict[str, Any] | None,
    Field(
        default=None,
        description="The agent's own signed hatp.agent-request about the plan's digest, when the agent signs "
        "itself; leave it out when the coordinator holds the agent's key and signs for it.",
    ),
]
TxnIdArg = Annotated[str, Field(min_length=1, max_length=128, description="The plan's txnId.")]
WaitArg = Annotated[
    int,
    Field(
        ge=0,
        le=MAX_WAIT_SECONDS,
        description=f"Seconds to wait for the transaction to end (0 answers at once, at most {MAX_WAIT_SECONDS}). "
        f"At most {SAFE_WAIT_SECONDS} unless your client keeps waiting on progress notifications: most clients "
        "give up on a request after 60 s.",
    ),
]
AfterArg = Annotated[
    int | None,
    Field(
        default=None,
        ge=0,
        description="With wait_seconds: answer as soon as the record holds more events than this (the eventCount "
        "of your last answer), to follow progress.",
    ),
]
RecordArg = Annotated[
    bool,
    Field(
        description="Also return the whole signed Transaction Record once closed (tens of KB; it is also the "
        "resource hatp://txn/{txnId}/record). Without it a closed transaction answers a short summary."
    ),
]
ReasonArg = Annotated[
    str | None, Field(default=None, max_length=2000, description="Why, for the record (shown to people).")
]


async def _answer(work: Callable[[], Awaitable[WireModel]]) -> dict[str, Any]:
    """Run one operation; a refusal becomes its JSON-RPC error (HATP-MCP-3), a result its wire form."""
    try:
        result = await work()
    except HatpError as exc:
        raise to_mcp_error(exc) from exc
    return result.wire()


def _parsed(model: type[M], value: Any, source: str) -> M:
    try:
        return parse(model, value, source)
    except HatpError as exc:
        raise to_mcp_error(exc) from exc


def _plan_in_one_round(value: Any, now: datetime) -> Plan:
    """The plan a tool was given. One that does not fit its schema is refused with every schema error and, where
    it parses far enough, every rule violation too (HATP-VAL-14), so a model fixes it in one round. Raises
    HatpError (HATP-OBJ-3 / HATP-OBJ-4)."""
    try:
        return parse(Plan, value, "plan")
    except HatpError as exc:
        if exc.rule != "HATP-OBJ-3":
            raise
        rules = [v.to_dict() for v in plan_violations(value, now) if v.rule != "schema"]
        if not rules:
            raise
        raise HatpError(
            exc.rule,
            f"{exc.reason}; and {len(rules)} rule violation(s) in the rest of the plan",
            path=exc.path,
            code=exc.code,
            fix="fix every problem listed (schema errors and rule violations) and begin again",
            data=dict(exc.data) | {"violations": rules},
        ) from exc


def serve_coordinator(
    server: MCPServer,
    service: TxnService,
    settings: HatpSettings,
    *,
    max_concurrent: int = 64,
    callers: CallerTokens | None = None,
) -> None:
    """Make `server` a HATP coordinator: advertise `settings`, register the methods and the agent tools.

    `max_concurrent` bounds how many begin / abort calls run at once (status long-polls are not counted).
    `callers`: the bearer tokens every request over HTTP must carry (HATP-MCP-53; required for HTTP: without it
    any local process could read and abort every transaction); each caller then acts on its own transactions.
    """
    low = lowlevel_of(server)
    gate = anyio.Semaphore(max_concurrent)
    advertise(low, settings)
    if callers is not None:
        server.middleware.append(caller_middleware(callers, rule=CALLERS_RULE, server="coordinator", guards=_guarded))

    async def mine(txn_id: str) -> Caller | None:
        """The proven caller, if it may read and act on `txn_id` (over stdio: None, the parent acts on any).
        Raises HatpError HATP-MCP-22 (unknown) or HATP-MCP-53 (another agent's transaction)."""
        caller = current_caller()
        if caller is not None and not caller.sees_all and await service.requester_of(txn_id) != caller.id:
            raise _not_owner(caller, txn_id)
        return caller

    async def begin(plan: Plan, request: dict[str, Any] | None = None) -> WireModel:
        caller = current_caller()
        if caller is not None and plan.requester.agent != caller.id:
            raise _not_requester(caller, plan.requester.agent)
        async with gate:
            with anyio.CancelScope(shield=True):  # a caller that stops waiting must not leave begin half done
                status = await service.begin(plan, request)
        return status

    async def status(query: TxnQuery) -> WireModel:
        await mine(query.txn_id)
        return await service.status(query.txn_id, float(query.wait_seconds or 0), query.after_events)

    async def abort(req: TxnAbortRequest) -> WireModel:
        caller = await mine(req.txn_id)
        async with gate:
            with anyio.CancelScope(shield=True):
                status = await service.abort(req.txn_id, req.reason, caller.id if caller is not None else None)
        return status

    def method(name: str, model: type[M], fn: Callable[[M], Awaitable[WireModel]]) -> None:
        async def handler(ctx: Any, params: AnyParams) -> dict[str, Any]:
            req = _parsed(model, dict(params.model_extra or {}), name)
            return await _answer(lambda: fn(req))

        low.add_request_handler(name, AnyParams, handler)

    method("hatp/txn/begin", Plan, begin)
    method("hatp/txn/status", TxnQuery, status)
    method("hatp/txn/abort", TxnAbortRequest, abort)

    @agent_tool
    async def begin_transaction(plan: PlanArg, request: RequestArg = None) -> dict[str, Any]:
        """Begin an all-or-nothing transaction from a HATP plan (the whole plan object, as `hatp validate` checks
        it; the prompt plan_a_transaction says how to write one). Returns as soon as the transaction is durably
        begun; it then runs in the background: prepares every branch, asks the humans the plan names, and commits
        or aborts. Follow it with transaction_status. A refused plan lists every problem with its rule, JSON path
        and fix."""
        return (await begin(_plan_in_one_round(plan, service.clock.now()), request)).wire()

    async def with_progress(ctx: Context, wait: int, work: Callable[[], Awaitable[WireModel]]) -> WireModel:
        """Run `work`; meanwhile, every PROGRESS_SECONDS of the coordinator's clock, a progress notification (a
        no-op unless the client gave a progress token). A refusal of `work` leaves as itself, never wrapped in the
        task group's exception group: the agent reads the same rule, path and fix as without a wait (HATP-MCP-32)."""
        if wait <= 0:
            return await work()
        clock = service.clock

        async def beat() -> None:
            beats = 0
            while True:
                await clock.sleep_until(clock.now() + timedelta(seconds=PROGRESS_SECONDS))
                beats += 1
                await ctx.report_progress(beats * PROGRESS_SECONDS, wait, "waiting for the transaction to end")

        refusal: HatpError | None = None
        async with anyio.create_task_group() as tg:
            tg.start_soon(beat)
            try:
                result = await work()
            except HatpError as exc:  # kept out of the group: the tool's refusal boundary must see it as it is
                refusal = exc
            tg.cancel_scope.cancel()
        if refusal is not None:
            raise refusal
        return result

    @agent_tool
    async def transaction_status(
        ctx: Context,
        txn_id: TxnIdArg,
        wait_seconds: WaitArg = 0,
        after_events: AfterArg = None,
        include_record: RecordArg = False,
    ) -> dict[str, Any]:
        """The state of a transaction: state, votes so far, decision, outcome. While people must approve,
        waitingOn names who must act (display name and roles), by when (decideBy) and the link to their inbox
        page: tell your user. The outcome comes as soon as it can no longer change: COMMITTED with closed false
        means the trip is committed and will not be undone, and the holds in confirming are still being booked
        (should one of them fail, the outcome becomes NEEDS_RECOVERY for that hold only). Once it is closed: what
        became of each branch, every refusal with its reason (a person's reject carries their own words), and the
        digest of the signed Transaction Record.
        wait_seconds waits for the outcome first (when the outcome is already known, for the record to close) or,
        with after_events, only until its record holds more events than that; call again to keep waiting. While
        it waits it sends progress notifications every 10 s to a client that asked for progress."""
        body = {"txnId": txn_id, "waitSeconds": wait_seconds}
        query = parse(TxnQuery, body | ({"afterEvents": after_events} if after_events is not None else {}), "status")
        answer = (await with_progress(ctx, wait_seconds, lambda: status(query))).wire()
        if "record" in answer and not include_record:
            del answer["record"]
            answer["recordUri"] = RECORD_URI.format(txn_id=txn_id)
        return answer

    @agent_tool
    async def abort_transaction(txn_id: TxnIdArg, reason: ReasonArg = None) -> dict[str, Any]:
        """Abort a transaction that has no commit decision yet: every hold is released and every done step undone.
        Refused once commit is decided."""
        body = {"txnId": txn_id} | ({"reason": reason} if reason is not None else {})
        return (await abort(parse(TxnAbortRequest, body, "abort_transaction"))).wire()

    @agent_tool
    async def list_pending() -> dict[str, Any]:
        """The transactions this coordinator has not finished yet, with their states and votes (over HTTP, the
        caller's own unless its operator granted it every one)."""
        caller = current_caller()
        agent = caller.id if caller is not None and not caller.sees_all else None
        return (await service.pending(agent)).wire()

    for fn in (begin_transaction, transaction_status, abort_transaction, list_pending):
        server.add_tool(fn, name=fn.__name__, description=describe(fn))

    @server.resource(
        RECORD_URI,
        name="transaction-record",
        description="The whole signed Transaction Record of a closed transaction, as `hatp verify` checks it.",
        mime_type="application/json",
    )
    async def record(txn_id: str) -> str:
        try:
            await mine(txn_id)
            closed = (await service.status(txn_id)).record
            if closed is None:
                raise HatpError(
                    "HATP-MCP-32",
                    f"transaction {txn_id!r} is not closed yet: its record is still growing",
                    path="$.txnId",
                    code="NOT_CLOSED",
                    fix="wait with transaction_status until it has an outcome, then read the record",
                )
        except HatpError as exc:
            raise to_mcp_error(exc) from exc
        return json.dumps(closed, indent=2, ensure_ascii=False)

    card = service.agent_card  # the example plan is the organisation's own when the coordinator signs as an agent
    add_agent_guide(server, service.clock, (card.acts_for, card.id) if card is not None else None)
