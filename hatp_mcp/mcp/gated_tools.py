"""Approval gates on an existing MCPServer: `create_approval_gate(server_id, trusted_gateways, humans=...,
agents=...)` and `gate_tools(server, gate, tools={...})`.

A gate is an SDK middleware on the server (`server.middleware`): for a `tools/call` of a gated tool it reads the
approval from the request's ``_meta["io.hatp/approval"]`` (never from the digested arguments), lists the tool to digest
its current definition, asks hatp_mcp/core/gated_tools/checks.py whether the approval fits this exact call, spends the
nonce durably (hatp_mcp/store/replay_cache.py) and only then lets the call through. Every refusal is raised as a
JSON-RPC error through hatp_mcp/mcp/errors.py, so the tool never runs. Other tools and methods pass untouched. This
module decides nothing itself: the rules are the core's.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread
from mcp.server import MCPServer
from mcp.server.context import CallNext, HandlerResult, ServerMiddleware, ServerRequestContext

from hatp_mcp.core.gated_tools.checks import (
    APPROVAL_META_KEY,
    GatePolicy,
    GateRequirement,
    Quote,
    approval_required,
    check_approval,
    expected_call,
    replay_keys,
    tool_definition_digest,
)
from hatp_mcp.core.gated_tools.signatures import SignedPart, verify_part
from hatp_mcp.core.gateway.agents import AgentKeys
from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.model.agent import AgentCard
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.model.toolcall import ToolCall
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.mcp.errors import to_mcp_error
from hatp_mcp.runtime.clock import Clock, SystemClock
from hatp_mcp.store.replay_cache import ReplayCache, SqliteReplayCache

__all__ = [
    "APPROVAL_META_KEY",
    "ApprovalGate",
    "GatedTool",
    "QuoteFn",
    "create_approval_gate",
    "gate_tools",
    "verify_on_two_threads",
]

QuoteFn = Callable[[Mapping[str, Any]], Quote | Awaitable[Quote]]
R = TypeVar("R")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class GatedTool:
    """One gated tool: its requirement and, when the server sets the price, the server's quote function."""

    requirement: GateRequirement
    quote: QuoteFn | None = None


@dataclass(slots=True)
class ApprovalGate:
    """What a server trusts and remembers: its id, the gateway keys it accepts, its durable replay cache."""

    server_id: str
    trusted: Keyring
    humans: HumanKeys
    cache: ReplayCache
    clock: Clock
    policy: GatePolicy = field(default_factory=GatePolicy)
    agents: AgentKeys | None = None
    tools: dict[str, GatedTool] = field(default_factory=dict)
    servers: set[int] = field(default_factory=set)  # id() of each server the middleware is installed on
    # How many threads an approval's signatures are verified on: 2 (this call's and the verifier) halves the
    # verification wall when a core is free for the second; 1 keeps them on the checking thread (on a machine
    # with no free core the hand-over costs more than it saves: see _verify_together). 1 by default.
    verify_threads: int = 1
    # The second thread an approval's signatures are verified on (its thread starts at the first submit).
    _verifier: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(max_workers=1, thread_name_prefix="hatp-gate-verify"),
        init=False,
        repr=False,
    )

    async def check_call(self, server: MCPServer, name: str, arguments: Mapping[str, Any], raw: object) -> None:
        """Raise HatpError unless `raw` approves exactly this call; spends the approval's nonce when it does."""
        await self.check_listed(name, await _tool_definition(server, name), arguments, raw)

    async def check_listed(
        self, name: str, definition: Mapping[str, Any], arguments: Mapping[str, Any], raw: object
    ) -> None:
        """`check_call` for a tool whose definition (as tools/list gives it) the caller has: a server that is not
        an MCPServer, such as the proxy (spec/proxy.md), which lists its upstream's tools as its own."""
        spec = self.tools[name]
        tool_digest = tool_definition_digest(definition)
        now = self.clock.now()
        want = expected_call(self.server_id, name, arguments, spec.requirement, tool_digest)
        quote: Quote | None = None
        if raw is not None and spec.quote is not None:
            got = spec.quote(arguments)
            quote = await got if inspect.isawaitable(got) else got
        # One hop to a worker thread for the cache's reads and its one durable write, with the checks between them.
        with anyio.CancelScope(shield=True):  # the nonce is spent whole or not at all
            await self.in_thread(self._check_and_spend, name, spec, want, tool_digest, raw, quote, now)

    async def in_thread(self, fn: Callable[..., R], *args: Any) -> R:
        """Run `fn(*args)` on a worker thread (anyio.to_thread) and return what it returns (or raise what it
        raised): the cache's reads and its durable write block, the event loop must not."""
        return await anyio.to_thread.run_sync(fn, *args)

    def _check_and_spend(
        self,
        name: str,
        spec: GatedTool,
        want: ToolCall,
        tool_digest: str,
        raw: object,
        quote: Quote | None,
        now: datetime,
    ) -> None:
        """On a worker thread: note the tool's definition, check the approval, spend its nonces (HATP-GATE-18).
        Raises HatpError for a missing or refused approval, and for a replay."""
        defined_at = self.cache.note_definition(self.server_id, name, tool_digest, now)
        if raw is None:
            raise approval_required(want, spec.requirement)

        def check(nonce_used: bool) -> Approval:
            return check_approval(
                raw,
                expected=want,
                requirement=spec.requirement,
                trusted=self.trusted,
                humans=self.humans,
                now=now,
                defined_at=defined_at,
                quote=quote,
                nonce_used=nonce_used,
                policy=self.policy,
                agents=self.agents,
                verify_ahead=self._verify_together if self.verify_threads > 1 else None,
            )

        approval = check(False)  # every other check first: a refused approval spends nothing
        if approval.expires_at is None:
            raise BrokenInvariant("check_approval passed an approval that never expires (it refuses one)")
        # Kept until the approval and every proof in it are refused by time anyway (HATP-GATE-10, HATP-GATE-24).
        keep_until = max(parse_ts(approval.expires_at), now + self.policy.max_proof_age)
        # All or none: a key already spent (this approval again, or one of its people's proofs in another approval)
        # spends nothing and answers False, and the check then refuses the call as a replay. No separate look first:
        # that was a second read of what this write already decides.
        spent = self.cache.consume_all(
            self.server_id,
            replay_keys(approval),
            approval_id=approval.approval_id,
            expires_at=format_ts(keep_until),
            now=now,
        )
        if not spent:
            check(True)

    def _verify_together(self, parts: Sequence[SignedPart]) -> None:
        """Verify `parts` on this thread and the verifier (`cryptography` releases the interpreter lock while it
        verifies); the checks then find each one that verified remembered by its keyring. The later half goes to the
        verifier first (the checks reach it last); this thread verifies the first half and takes back any of the
        verifier's that has not started, so a call never waits behind other calls. Only with a core to spare does
        this gain, hence `verify_threads`, 1 by default."""
        verify_on_two_threads(parts, verify_part, self._verifier)

    def middleware(self, server: MCPServer) -> ServerMiddleware[Any]:
        async def gate(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
            params = ctx.params
            name = params.get("name") if ctx.method == "tools/call" and params is not None else None
            if params is None or not isinstance(name, str) or name not in self.tools:
                return await call_next(ctx)
            arguments = params.get("arguments") or {}
            meta = params.get("_meta")
            meta = dict(meta) if isinstance(meta, Mapping) else {}
            raw = meta.pop(APPROVAL_META_KEY, None)
            try:
                if not isinstance(arguments, Mapping):
                    raise HatpError("HATP-GATE-20", "the arguments are not an object", path="arguments")
                await self.check_call(server, name, arguments, raw)
            except HatpError as exc:
                raise to_mcp_error(exc) from None
            # The tool sees its arguments, never the approval.
            return await call_next(replace(ctx, params={**params, "_meta": meta}))

        return gate


async def _tool_definition(server: MCPServer, name: str) -> dict[str, Any]:
    for tool in await server.list_tools():
        if tool.name == name:
            return tool.model_dump(mode="json", by_alias=True, exclude_none=True)
    raise HatpError(
        "HATP-GATE-1",
        f"tool {name!r} is gated but the server does not list it",
        path="name",
        fix="gate only tools the server has",
        code="APPROVAL_REQUIRED",
    )


def verify_on_two_threads(items: Sequence[T], verify: Callable[[T], object], second: ThreadPoolExecutor) -> None:
    """Run `verify` on every item, the later half handed to `second` first and the first half on this thread, then
    back on this thread any of `second`'s that has not started (a busy `second` never holds the caller up, and
    there is no deadlock). A raise from `verify` propagates; every item is verified exactly once."""
    half = len(items) // 2
    theirs = [(item, second.submit(verify, item)) for item in items[half:]] if half else []
    for item in items[: len(items) - len(theirs)]:
        verify(item)
    for item, job in reversed(theirs):
        if job.cancel():
            verify(item)
        else:
            job.result()


def create_approval_gate(
    server_id: str,
    trusted_gateways: Keyring | Mapping[str, Any],
    *,
    humans: HumanKeys | Iterable[HumanCard],
    agents: AgentKeys | Iterable[AgentCard] | None,
    replay_cache: ReplayCache | str | Path = ":memory:",
    clock: Clock | None = None,
    policy: GatePolicy | None = None,
    verify_threads: int = 1,
) -> ApprovalGate:
    """A gate for the server `server_id` that trusts approvals signed by `trusted_gateways` (a Keyring or a JWKS;
    the keys need the role ``gateway``) whose every decision is proven by its person: `humans` is their decision
    keys, or the Directory-verified cards they come from (e.g. `Directory.load(...)[0].cards()`); nothing else
    stands in for them. `replay_cache` is a ReplayCache or a SQLite path: give a file so that used approvals stay
    used across restarts. `policy` bounds an approval's lifetime and its proofs' age by the server's own clock
    (default GatePolicy(): 15 minutes, 75 minutes). `agents` are the organisation's Directory-signed agent cards
    (`load_agents(org)[0]`): the requester separation of duties is checked against is then the person the
    requesting agent's card names, proven by its signed request inside the approval (HATP-GATE-26). It has no
    default: `agents=None` must be written to rest separation of duties on the gateway's word for the requester
    (its routing record), which a compromised gateway key can rename. `verify_threads` (1 or 2): how many threads
    an approval's signatures are verified on (ApprovalGate.verify_threads). Raises ValueError for a bad keyring
    or a `verify_threads` other than 1 or 2."""
    if verify_threads not in (1, 2):
        raise ValueError("verify_threads is 1 or 2")
    trusted = trusted_gateways if isinstance(trusted_gateways, Keyring) else Keyring.from_jwks(trusted_gateways)
    people = humans if isinstance(humans, HumanKeys) else HumanKeys.from_cards(humans)
    cache = SqliteReplayCache(replay_cache) if isinstance(replay_cache, str | Path) else replay_cache
    return ApprovalGate(
        server_id=server_id,
        trusted=trusted,
        humans=people,
        cache=cache,
        clock=clock or SystemClock(),
        policy=policy or GatePolicy(),
        agents=agents if agents is None or isinstance(agents, AgentKeys) else AgentKeys.from_cards(list(agents)),
        verify_threads=verify_threads,
    )


def gate_tools(
    server: MCPServer,
    gate: ApprovalGate,
    tools: Mapping[str, Mapping[str, Any]],
    *,
    quotes: Mapping[str, QuoteFn] | None = None,
) -> None:
    """Require approvals for `tools` of `server`: ``{name: {"requires": {"address": ..., "requirement":
    {"action": ..., "amountFrom"?: "/pointer", "payeeFrom"?: "/pointer"}}, "quote"?: fn}}``. `quote` (or
    `quotes[name]`) is the server's own price and payee for the arguments, when the server sets the price.
    Installs the gate's middleware once. Raises ValueError for a malformed entry."""
    for name, entry in tools.items():
        requires = entry.get("requires")
        if not isinstance(requires, Mapping):
            raise ValueError(f"tool {name!r}: give {{'requires': {{'address': ..., 'requirement': {{...}}}}}}")
        quote = entry.get("quote") or (quotes or {}).get(name)
        gate.tools[name] = GatedTool(GateRequirement.from_config(requires), quote)
    if id(server) not in gate.servers:
        gate.servers.add(id(server))
        server.middleware.append(gate.middleware(server))
