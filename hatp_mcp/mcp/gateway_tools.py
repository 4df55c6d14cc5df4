"""The Human Gateway's ordinary MCP tools, for people and agents (spec/mcp-binding.md, HATP-MCP-12/13/16).

For people (they stand in for the terminal inbox and go through the same code, `GatewayApprover.decide` ->
`apply_human_input`, so the same rules hold): `list_asks`, `show_ask` (with the `subjectDigest` a person signs)
and `decide`, which takes the person's signed HumanDecisionProof and never a name: whoever is connected (the
agent too) can look, only the person's own key decides (spec/gateway.md, HATP-GW-19..26). For agents, the
tool-call approval path of spec/gated-tools.md: `request_approval` (route one exact call) and `approval_status`
(poll it; the signed Approval once decided).

Nothing here decides: the rules are the core's, the state the gateway store's. Refusals leave through
hatp_mcp.mcp.errors as tool results with `isError` whose text says what was refused, why and what to do
(HATP-MCP-25). No result carries contact details: seats show who and why, never where they are reached.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Annotated, Any

from mcp.server import MCPServer
from pydantic import Field

from hatp_mcp.core.gated_tools.checks import GateRequirement
from hatp_mcp.core.gateway.proof import subject_digest
from hatp_mcp.core.gateway.screen import person_words, render_ask_text
from hatp_mcp.core.model.when import when_words
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.agent_guide import describe
from hatp_mcp.mcp.errors import agent_tool
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.gateway_store import StoredAsk

__all__ = ["GATEWAY_TOOLS", "SIGNING_TOOLS", "Words", "add_gateway_tools", "ask_text", "ask_view"]

GATEWAY_TOOLS = ("list_asks", "show_ask", "decide", "request_approval", "approval_status")
# The tools no call of which counts without a signature the client makes (a person's proof, the agent's request):
# offered only to a client that can sign (HATP-MCP-57).
SIGNING_TOOLS = ("decide", "request_approval")

# The tools' parameters, described and bounded for the client (and the model) filling them in.
AskId = Annotated[
    str, Field(min_length=1, max_length=300, description="The ask's id (askId), e.g. txn-trip-0001/finance.")
]
Human = Annotated[
    str | None,
    Field(default=None, max_length=500, description="Only asks waiting for this person, e.g. human://acme.com/bob."),
]
Proof = Annotated[
    dict[str, Any],
    Field(description="The person's signed hatp.human-decision over the ask's subjectDigest (from show_ask)."),
]
ServerId = Annotated[
    str, Field(min_length=1, max_length=500, description="The tool server's id, as its APPROVAL_REQUIRED named it.")
]
ToolName = Annotated[str, Field(min_length=1, max_length=200, description="The gated tool's name.")]
Arguments = Annotated[dict[str, Any], Field(description="The exact arguments of the call to approve.")]
Requires = Annotated[
    dict[str, Any],
    Field(description="{address, requirement} exactly as the tool server's APPROVAL_REQUIRED refusal gave them."),
]
AgentRequest = Annotated[
    dict[str, Any] | None,
    Field(
        default=None,
        description="The agent's hatp.agent-request over the call digest, signed with the key on its agent card.",
    ),
]
Requester = Annotated[
    str | None,
    Field(
        default=None,
        max_length=500,
        description="Optional: whom the call is for (e.g. human://acme.com/dana); must be the person the agent's "
        "card names.",
    ),
]
Digest = Annotated[
    str | None,
    Field(default=None, max_length=80, description="The digest the refusal named (sha256:...), to check it."),
]


def _no_such_ask(ask_id: str) -> HatpError:
    return HatpError(
        "HATP-MCP-12", f"the gateway has no ask {ask_id!r}", path="$.ask_id", fix="list_asks", code="NO_SUCH_ASK"
    )


def _waiting_for(s: StoredAsk) -> list[str]:
    return [x.human for x in s.record.seats if x.status == "asked"] if s.record else []


@dataclass(frozen=True)
class Words:
    """How a tool's text names people and times for a model (HATP-GW-96): display names and roles by address from
    the Directory-signed cards, and the gateway's clock for "in N min" (a model has no zone of its own: UTC)."""

    names: Mapping[str, str] = field(default_factory=dict)
    roles: Mapping[str, Sequence[str]] = field(default_factory=dict)
    now: datetime | None = None

    @classmethod
    def of(cls, gateway: GatewayApprover) -> Words:
        return cls(gateway.names(), gateway.roles(), gateway.clock.now())

    def who(self, address: str) -> str:
        return person_words(address, self.names, self.roles)

    def when(self, ts: str) -> str:
        return when_words(ts, self.now)  # HATP-GW-96: UTC with "in N min" from the gateway's clock


def ask_text(s: StoredAsk, words: Words, *, brief: bool = False) -> str:
    """An ask in words for a model (HATP-GW-96): summary first (who asks for what, up to how much, the step that
    cannot be undone, the deadline), who it waits for by display name, role and address; with `brief`, only that."""
    if s.record is None:
        return f"ask {s.ask_id} was refused: {(s.vote or {}).get('code')} {(s.vote or {}).get('reason')}"
    ask = s.record.ask
    summary = render_ask_text(ask, names=words.names, roles=words.roles, when=words.when, brief=True)
    lines = summary if brief else render_ask_text(ask, names=words.names, roles=words.roles, when=words.when)
    waiting = [words.who(a) for a in _waiting_for(s)]
    if waiting:  # who must act, right after the summary
        lines.insert(len(summary), f"  waiting for: {'; '.join(waiting)}")
    return "\n".join(lines)


def ask_view(
    s: StoredAsk, *, full: bool = False, names: Mapping[str, str] | None = None, words: Words | None = None
) -> dict[str, Any]:
    """What a tool shows of an ask: state, who is asked, the signed outcome, and who rejected it by the display
    name on their card with the address beside it (`names`, HATP-GW-93); with `full`, the screen and seats. With
    `words`, a `text` for a model (HATP-GW-96: the whole ask with `full`, its summary otherwise) and
    `waitingForNames` (who it waits for by display name, roles and address); the other fields stay as the wire has
    them."""
    names = words.names if words is not None and names is None else names
    out: dict[str, Any] = {"askId": s.ask_id, "state": s.state, "waitingFor": _waiting_for(s)}
    if words is not None and out["waitingFor"]:  # the same people in words, beside the addresses (HATP-GW-96)
        out["waitingForNames"] = [words.who(a) for a in out["waitingFor"]]
    rejecters = [d.approver for d in s.record.decisions if d.decision == "reject"] if s.record is not None else []
    if rejecters:
        out["rejectedBy"] = [person_words(a, names) for a in rejecters]
    if s.record is not None:
        ask = s.record.ask
        out |= {
            "kind": ask.kind,
            "decideBy": ask.decide_by,
            "quorum": [s.record.quorum_required, s.record.quorum_of],
            "subjectDigest": subject_digest(ask),
        }
        if ask.terms is not None:  # what the person signs with their decision (HATP-GW-32)
            out["terms"] = ask.terms.wire()
        if full:
            out["ask"] = ask.wire()
            out["seats"] = [
                {k: v for k, v in seat.wire().items() if k in ("human", "status", "rule", "detail", "delegateFor")}
                for seat in s.record.seats
            ]
    if words is not None:
        out["text"] = ask_text(s, words, brief=not full)
    if s.vote is not None:
        out["vote"] = s.vote
    if s.evidence is not None:
        out["approval" if s.evidence.get("type") == "hatp.approval" else "answer"] = s.evidence
    return out


def add_gateway_tools(server: MCPServer, gateway: GatewayApprover, *, signing: bool = True) -> None:
    """Register the people's and the agents' tools of `gateway` on `server`; with `signing` False (a client that
    cannot sign, such as a chat app's model), without SIGNING_TOOLS (HATP-MCP-57)."""

    async def current(ask_id: str) -> StoredAsk:
        try:
            return await gateway.current(ask_id)
        except KeyError:
            raise _no_such_ask(ask_id) from None

    async def list_asks(human: Human = None) -> dict[str, Any]:
        """Pending asks, oldest first; with `human`, only those waiting for that person."""
        rows = [s for s in gateway.store.asks("pending") if s.record is not None]
        words = Words.of(gateway)
        return {"asks": [ask_view(s, words=words) for s in rows if human is None or human in _waiting_for(s)]}

    async def show_ask(ask_id: AskId) -> dict[str, Any]:
        """An ask's approval screen (agent-written text labelled so), who was asked, excluded and why; `text` says
        it summary first, people by display name and role with their address, times in UTC with "in N min"."""
        return ask_view(await current(ask_id), full=True, words=Words.of(gateway))

    async def decide(ask_id: AskId, proof: Proof) -> dict[str, Any]:
        """Approve, reject, decline or answer an ask with `proof`: the person's signed hatp.human-decision (askId,
        subjectDigest from show_ask, human, decision, value?, reason? (why they reject: the agent reads it),
        issuedAt, nonce, signature by their card's key)."""
        try:
            after = await gateway.decide(ask_id, proof, via="mcp")
        except KeyError:
            raise _no_such_ask(ask_id) from None
        return ask_view(after, words=Words.of(gateway))

    async def request_approval(
        server_id: ServerId,
        tool: ToolName,
        arguments: Arguments,
        requires: Requires,
        request: AgentRequest = None,
        requester: Requester = None,
        call_digest: Digest = None,
        tool_digest: Digest = None,
    ) -> dict[str, Any]:
        """Ask the humans at `requires.address` to approve exactly this tool call (as the tool server described
        it in its APPROVAL_REQUIRED refusal). `request` is the agent's hatp.agent-request over the call digest,
        signed with the key on its Directory-signed agent card: the requester is the person that card names
        (`requester`, if given, must be that person). Idempotent per call; poll with approval_status."""
        try:
            requirement = GateRequirement.from_config(requires)
        except ValueError as exc:
            raise HatpError("HATP-MCP-13", str(exc), path="$.requires", code="BAD_REQUEST") from None
        stored = await gateway.ask_tool_call(
            server=server_id,
            tool=tool,
            arguments=arguments,
            requirement=requirement,
            request=request,
            requester=requester,
            tool_digest=tool_digest,
            call_digest_seen=call_digest,
        )
        return ask_view(stored, full=True, words=Words.of(gateway))

    async def approval_status(ask_id: AskId) -> dict[str, Any]:
        """Where an approval request stands; once decided, the signed Approval (subject tool-call)."""
        return ask_view(await current(ask_id), words=Words.of(gateway))

    for fn in (list_asks, show_ask, decide, request_approval, approval_status):
        if signing or fn.__name__ not in SIGNING_TOOLS:
            server.add_tool(agent_tool(fn), name=fn.__name__, description=describe(fn))
