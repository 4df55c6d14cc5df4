"""The proxy's `gate` policy and budgets (spec/proxy.md HATP-PXY-20..24): a gated upstream tool runs only with a
signed human approval of exactly that call, and only within the agent's budgets.

The proxy is the gated tool server here: it reuses the gated-tool machinery whole (hatp_mcp/mcp/gated_tools.py's
ApprovalGate, whose checks are hatp_mcp/core/gated_tools/checks.py: the call digest, signature and trust, the
people's own proofs and cards, the requester proven by the agent's signed request, expiry, single use in a
durable replay cache). What it adds is the asking: for a call without an approval in its `_meta`, the proxy asks
the Human Gateway itself (`request_approval`) as the agent it is configured to act as (its key on a
Directory-signed agent card signs the request), tells the client where the ask waits (MCP progress
notifications, and the inbox link in their text and in the result), polls until the people decide, checks the
approval as any gated server would, and only then calls the upstream. A budget is checked before anyone is
asked, and the amount is reserved in the proxy's durable ledger (hatp_mcp/store/spend_ledger.py) until the call
is refused or runs. Refusals are `isError` results naming the rule (HATP-MCP-25); nothing reaches the upstream.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import quote

import mcp.types as types

from hatp_mcp.core.gated_tools.checks import (
    APPROVAL_META_KEY,
    GateRequirement,
    call_digest,
    expected_call,
    tool_definition_digest,
)
from hatp_mcp.core.gateway.agents import card_of_key
from hatp_mcp.core.journal.proxy_tools import ToolRule
from hatp_mcp.core.model.agent import AgentCard
from hatp_mcp.core.model.proxy_policy import Budget, Gate
from hatp_mcp.core.model.toolcall import ToolCall
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import tool_refusal
from hatp_mcp.mcp.gated_tools import ApprovalGate, GatedTool, create_approval_gate
from hatp_mcp.mcp.gateway_ask import AskEnded, Asker, ask_and_wait
from hatp_mcp.mcp.server_links import Link
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.gateway.delivery.settings import load_settings
from hatp_mcp.runtime.org import load_agents, load_directory
from hatp_mcp.store.spend_ledger import SpendLedger

__all__ = [
    "GATE_NOTE",
    "GateAsker",
    "GateSetup",
    "Progress",
    "ProxyGate",
    "budgets_unconfigured",
    "build_gate",
    "gated",
    "progress_reporter",
]

GATE_NOTE = (
    "Each call needs a human approval of exactly its arguments: the proxy asks for it, says where it waits, and "
    "runs the call only once it is approved (HATP-PXY-21)."
)

Progress = Callable[[str], Awaitable[None]]


@dataclass
class GateAsker:
    """How the proxy asks: the gateway's link, the agent's key and the card listing it, the longest wait for the
    people (also capped by the ask's own `decideBy`), how often it looks, and the inbox people decide in."""

    gateway: Link
    key: SigningKey
    card: AgentCard
    clock: Clock
    wait: timedelta = timedelta(minutes=15)
    poll: timedelta = timedelta(seconds=2)
    inbox_url: str | None = None

    def link(self, ask_id: str) -> str:
        """Where a person opens the ask: the organisation's inbox, else the `hatp inbox` command."""
        if self.inbox_url:
            return f"{self.inbox_url.rstrip('/')}/asks/{quote(ask_id, safe='')}"
        return f"hatp inbox --data GATEWAY_DIR show {ask_id}"

    async def approval(
        self, call: dict[str, Any], requires: dict[str, Any], digest: str, progress: Progress
    ) -> dict[str, Any]:
        """The signed Approval of exactly `call`. Raises HatpError HATP-PXY-21 (with the reason: the gateway
        refused to route it or did not answer, the people rejected it, the ask ended, no decision within the
        wait)."""
        asker = Asker(self.gateway, self.key, self.card, self.clock, self.wait, self.poll)
        first = True

        async def said(ask_id: str, status: Mapping[str, Any]) -> None:
            nonlocal first
            link = self.link(ask_id)
            if first:
                first = False
                # who and by when in words, as the gateway names them (HATP-GW-96); its addresses otherwise
                named = status.get("waitingForNames") or status.get("waitingFor") or []
                waiting = "; ".join(str(n) for n in named) or requires["address"]
                decide_by = status.get("decideBy")
                by = f", decide by {when_words(decide_by, self.clock.now())}" if isinstance(decide_by, str) else ""
                await progress(f"waiting for a human approval (ask {ask_id}) from {waiting}{by}: {link}")
            else:
                await progress(f"still waiting for ask {ask_id} ({status.get('state')}): {link}")

        got = await ask_and_wait(asker, {**call, "requires": requires}, digest, said)
        if not isinstance(got, AskEnded):
            return got
        if got.ask_id is None:
            raise _ended(got.code, got.reason)
        still = ", still open" if got.code == "APPROVAL_TIMEOUT" else ""
        raise _ended(got.code, f"{got.reason} (ask {got.ask_id}{still}: {self.link(got.ask_id)})")


def _ended(code: str, reason: str) -> HatpError:
    return HatpError(
        "HATP-PXY-21",
        f"the call was not approved: {reason}; nothing was sent upstream",
        path="_meta",
        code=code,
        fix="do without it, or call again to ask anew (a new ask, decided afresh)",
    )


class ProxyGate:
    """The proxy's gated tools and budgets. `approvals` is an ApprovalGate whose server id is the proxy's;
    `asker` is None when the proxy does not ask itself (a client must then bring the approval in `_meta`);
    `agent` is the agent the proxy acts as, whom budgets are counted for (None: no budgets); `shadow_ledger` is
    where shadow mode counts the spends it let through (HATP-PXY-73), never the real `ledger`."""

    def __init__(
        self,
        approvals: ApprovalGate,
        ledger: SpendLedger,
        budgets: Sequence[Budget],
        asker: GateAsker | None,
        clock: Clock,
        *,
        agent: str | None,
        shadow_ledger: SpendLedger | None = None,
    ) -> None:
        if budgets and agent is None:
            raise ValueError("budgets are counted per agent: give the agent the proxy acts as")
        self.approvals = approvals
        self.ledger = ledger
        self.budgets = list(budgets)
        self.asker = asker
        self.clock = clock
        self.agent = agent or ""
        self.gates: dict[str, Gate] = {}
        self.shadow_ledger = shadow_ledger

    def add(self, tool: str, gate: Gate, definition: Mapping[str, Any]) -> None:
        """Gate `tool`, listed as `definition`, which takes effect now: an approval issued before it is refused
        (HATP-GATE-9), so one issued for an earlier definition of the upstream's tool never counts. Raises HatpError
        HATP-PXY-20 for an address or amount the gated-tool rules refuse."""
        parsed = _requirement(tool, gate)
        self.gates[tool] = gate
        self.approvals.tools[tool] = GatedTool(parsed)
        digest = tool_definition_digest(definition)
        self.approvals.cache.note_definition(self.approvals.server_id, tool, digest, self.clock.now())

    def check(self, gates: Sequence[tuple[str, Gate, Mapping[str, Any]]], budgets: Sequence[Budget]) -> None:
        """Whether `replace` would take these gated tools and budgets. Raises HatpError HATP-PXY-20 (a gate the
        gated-tool rules refuse), HATP-PXY-23 (budgets, but no agent to count them for)."""
        for tool, gate, _definition in gates:
            _requirement(tool, gate)
        if budgets and not self.agent:
            raise budgets_unconfigured(org=True)

    def replace(self, gates: Sequence[tuple[str, Gate, Mapping[str, Any]]], budgets: Sequence[Budget]) -> None:
        """Put exactly these gated tools and budgets in force (a reload, HATP-PXY-42); a tool whose definition is
        unchanged keeps the time it took effect. Raises HatpError as `check` (call it first: this may stop
        half-way)."""
        kept = {tool for tool, _gate, _definition in gates}
        for tool in [t for t in self.gates if t not in kept]:
            del self.gates[tool]
            self.approvals.tools.pop(tool, None)
        for tool, gate, definition in gates:
            self.add(tool, gate, definition)
        self.budgets = list(budgets)

    async def call(
        self,
        tool: str,
        definition: Mapping[str, Any],
        args: dict[str, Any],
        meta: Mapping[str, Any],
        upstream: Callable[[], Awaitable[types.CallToolResult]],
        progress: Progress,
    ) -> types.CallToolResult:
        """Handle one call of a gated tool: the amount, its maximum and the budgets first, then the approval
        (the one in `_meta`, else one the proxy asks for), then the upstream, once."""
        checked = self._before_asking(tool, definition, args)
        if isinstance(checked, HatpError):
            return tool_refusal(checked)
        want, digest = checked
        requirement = self.approvals.tools[tool].requirement
        amount = want.max_amount
        key = f"{digest}:{secrets.token_hex(8)}"
        if amount is not None:
            self.ledger.reserve(key, self.agent, amount.currency, amount.decimal, self.clock.now())
        ran = False
        asked: str | None = None
        try:
            raw = meta.get(APPROVAL_META_KEY)
            if raw is None and self.asker is not None:
                call = {
                    "server_id": want.server,
                    "tool": tool,
                    "arguments": args,
                    "tool_digest": want.tool_digest,
                }
                requires = requirement.wire()
                raw = await self.asker.approval(call, requires, digest, progress)
                asked = str(raw.get("approvalId"))
            await self.approvals.check_listed(tool, definition, args, raw)  # every gated-tool rule; spends it
            ran = True
            result = await upstream()
        except HatpError as exc:
            return tool_refusal(exc)
        finally:
            if not ran and amount is not None:
                self.ledger.release(key)
        if asked is not None:
            where = self.asker.link(asked) if self.asker is not None else asked
            note = f"Approved by a person (ask {asked}: {where}); the call ran once with exactly these arguments."
            result = result.model_copy(update={"content": [*result.content, types.TextContent(type="text", text=note)]})
        return result

    def would_refuse(self, tool: str, definition: Mapping[str, Any], args: dict[str, Any]) -> HatpError:
        """Shadow mode (HATP-PXY-40): the refusal enforcing the gate would give this call before anyone is asked
        (the amount, the maximum, a budget), else the one saying it needs an approval. Nobody is asked and nothing
        is reserved in the spend ledger: a budget counts the real spends and the shadowed calls enforcement would
        have taken to the approval (HATP-PXY-73), which this one then joins in the shadow ledger, so "would exceed
        the budget" is recorded once they add up past the limit."""
        checked = self._before_asking(tool, definition, args, shadow=True)
        if isinstance(checked, HatpError):
            return checked
        gate = self.gates[tool]
        want, digest = checked
        amount = want.max_amount
        if amount is not None and self.shadow_ledger is not None:
            key = f"{digest}:{secrets.token_hex(8)}"
            self.shadow_ledger.reserve(key, self.agent, amount.currency, amount.decimal, self.clock.now())
        return HatpError(
            "HATP-PXY-21",
            f"{tool!r} needs an approval from {gate.address} for {gate.action}: the call would have waited for it",
            path="_meta",
            code="APPROVAL_NEEDED",
            fix="approve it in the inbox once the gate is enforced",
        )

    def _before_asking(
        self, tool: str, definition: Mapping[str, Any], args: dict[str, Any], *, shadow: bool = False
    ) -> tuple[ToolCall, str] | HatpError:
        """The expected call and its digest, or the refusal due before anyone is asked: an amount that cannot be
        read or paid (HATP-GATE-20, 23), above the gate's maximum (HATP-PXY-22), or over a budget
        (HATP-PXY-23)."""
        gate = self.gates[tool]
        requirement = self.approvals.tools[tool].requirement
        try:
            want = expected_call(self.approvals.server_id, tool, args, requirement, tool_definition_digest(definition))
        except HatpError as exc:
            return exc
        amount = want.max_amount
        if amount is not None and gate.max is not None and amount.decimal > Decimal(gate.max):
            return HatpError(
                "HATP-PXY-22",
                f"{tool!r} asks for {amount.display()}, above the {gate.max} {amount.currency} its gate allows: "
                "nobody was asked, nothing was sent upstream",
                path=f"arguments ({gate.amount})",
                code="OVER_MAXIMUM",
                fix=f"call it for at most {gate.max} {amount.currency}",
            )
        if amount is not None:
            over = self._over_budget(amount.currency, amount.decimal, shadow=shadow)
            if over is not None:
                return over
        return want, call_digest(want)

    def _over_budget(self, currency: str, amount: Decimal, *, shadow: bool = False) -> HatpError | None:
        """HATP-PXY-23: the first budget in `currency` this amount would overrun, as the refusal; in shadow mode
        the shadowed spends count beside the real ones (HATP-PXY-73)."""
        now = self.clock.now()
        for i, budget in enumerate(self.budgets):
            if budget.currency != currency:
                continue
            since = now - timedelta(seconds=budget.window_seconds)
            spent = self.ledger.spent(self.agent, currency, since)
            if shadow and self.shadow_ledger is not None:  # HATP-PXY-73: what shadow mode let through counts
                spent += self.shadow_ledger.spent(self.agent, currency, since)
            if spent + amount > Decimal(budget.limit):
                return HatpError(
                    "HATP-PXY-23",
                    f"{self.agent} has spent {spent} {currency} of its {budget.limit} {currency} budget in the last "
                    f"{budget.window_seconds}s; {amount} {currency} more would exceed it: nobody was asked, nothing "
                    "was sent upstream",
                    path=f"budgets[{i}]",
                    code="BUDGET_EXCEEDED",
                    fix="wait until earlier spends leave the window, or ask the operator to raise the budget",
                )
        return None


def _requirement(tool: str, gate: Gate) -> GateRequirement:
    """The gated-tool requirement of a gate entry. Raises HatpError HATP-PXY-20."""
    requirement: dict[str, Any] = {"action": gate.action}
    if gate.amount is not None:
        requirement["amount"] = {"expression": gate.amount, "currency": gate.currency}
    try:
        return GateRequirement.from_config({"address": gate.address, "requirement": requirement})
    except (ValueError, HatpError) as exc:
        reason = exc.reason if isinstance(exc, HatpError) else str(exc)
        raise HatpError(
            "HATP-PXY-20",
            f"the gate of {tool!r} is not a requirement the gated-tool rules accept: {reason}",
            path=f"tools.{tool}.gate",
            code="BAD_POLICY",
            fix="name a human:// address (human://ORG/NAME or human://ORG/role/ROLE) and an amount expression "
            "with its currency",
        ) from None


def budgets_unconfigured(*, org: bool) -> HatpError:
    """HATP-PXY-23's refusal of budgets the proxy cannot count: it has no organisation (`org` False) or acts
    for no agent."""
    if not org:
        return HatpError(
            "HATP-PXY-23",
            "the file names budgets, which count gated calls, but the proxy has no organisation",
            path="budgets",
            code="GATE_UNCONFIGURED",
            fix="start the proxy with --org DIR, or remove budgets",
        )
    return HatpError(
        "HATP-PXY-23",
        "the file names budgets, which are counted per agent, but the proxy acts for no agent",
        path="budgets",
        code="GATE_UNCONFIGURED",
        fix="give --agent-key FILE (the key of the agent the proxy acts as), or remove budgets",
    )


def gated(gate: ProxyGate | None, rule: ToolRule) -> ProxyGate:
    """The gate a `gate` tool needs. Raises HatpError HATP-PXY-20 when the proxy was started without one (no
    organisation to check approvals against): a gated tool is never served ungated."""
    if gate is None:
        raise HatpError(
            "HATP-PXY-20",
            f"{rule.tool!r} is gated but the proxy has no organisation to check approvals against",
            path=f"tools.{rule.tool}.gate",
            code="GATE_UNCONFIGURED",
            fix="start the proxy with --org DIR (and --gateway URL --agent-key FILE for it to ask itself)",
        )
    return gate


def progress_reporter(ctx: Any, meta: Mapping[str, Any]) -> Progress:
    """Where the proxy says what it waits for: MCP progress notifications on the call's progress token, when the
    client gave one (a client that gave none reads the same text in the result)."""
    token = meta.get("progress_token", meta.get("progressToken"))
    count = 0

    async def report(message: str) -> None:
        nonlocal count
        if token is None:
            return
        count += 1
        await ctx.session.send_progress_notification(token, float(count), None, message, ctx.request_id)

    return report


@dataclass(frozen=True)
class GateSetup:
    """What the proxy's command line says about gating: the organisation, the proxy's server id in approvals,
    and (to ask itself) the gateway and the agent's key."""

    org: Path
    server_id: str
    gateway: str | None = None
    agent_key: Path | None = None
    wait: timedelta = timedelta(minutes=15)
    poll: timedelta = timedelta(seconds=2)


def build_gate(
    setup: GateSetup, data: Path, budgets: Sequence[Budget], clock: Clock, gateway: Link | None
) -> ProxyGate:
    """The proxy's gate over the organisation in `setup.org`: its published gateway keys, the people's and the
    agents' Directory-signed cards; used approvals in DATA/gate-replay.db and spends in DATA/spend.db (shadowed ones
    in DATA/shadow-spend.db), all kept across restarts. Raises ValueError (a key on no agent card, a gateway
    without a key), OSError, HatpError."""
    well_known = json.loads((setup.org / ".well-known" / "human-card.json").read_text())
    gateways = {"keys": [k for k in well_known.get("keys", []) if "gateway" in k.get("roles", [])]}
    directory, _ignored = load_directory(setup.org)
    agents, _ignored_agents = load_agents(setup.org)
    approvals = create_approval_gate(
        setup.server_id,
        gateways,
        humans=directory.cards(),
        agents=agents,
        replay_cache=str(data / "gate-replay.db"),
        clock=clock,
    )
    if gateway is not None and setup.agent_key is None:
        raise ValueError("--gateway needs --agent-key: the proxy asks the gateway as that agent")
    if budgets and setup.agent_key is None:
        raise budgets_unconfigured(org=True)
    shadow = SpendLedger(data / "shadow-spend.db")  # shadow mode's, never the real ledger (HATP-PXY-73)
    if setup.agent_key is None:
        return ProxyGate(
            approvals, SpendLedger(data / "spend.db"), budgets, None, clock, agent=None, shadow_ledger=shadow
        )
    key = SigningKey.from_jwk(json.loads(setup.agent_key.read_text()))
    card = card_of_key(agents, key)
    if card is None:
        raise ValueError(f"--agent-key {key.kid}: no Directory-signed agent card in {setup.org} lists this key")
    asker: GateAsker | None = None
    if gateway is not None:
        settings = load_settings(setup.org)
        inbox = settings.inbox_url if settings is not None else None
        asker = GateAsker(gateway, key, card, clock, wait=setup.wait, poll=setup.poll, inbox_url=inbox)
    return ProxyGate(
        approvals, SpendLedger(data / "spend.db"), budgets, asker, clock, agent=card.id, shadow_ledger=shadow
    )
