"""The approval screen: a model rendered from the structured plan (operations, amounts with "up to",
participants, deadlines), and its plain-text form for the terminal inbox. Pure: no IO.

Only the plan's structure speaks in the gateway's voice. Anything the agent wrote (the plan summary, free-text
arguments) is carried as AgentText and printed under the label "agent-written"; it must never be rendered as
if the gateway or the organisation said it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from hatp_mcp.core.gateway.authority import PlanMoney, show_money
from hatp_mcp.core.model.amount import Amount, with_tolerance
from hatp_mcp.core.model.gateway import AgentText, Ask, Screen, ScreenOperation
from hatp_mcp.core.model.plan import ApprovalRequirement, Plan

__all__ = ["AGENT_LABEL", "final_words", "person_words", "render_ask_text", "render_screen", "render_text"]

AGENT_LABEL = "[agent-written]"


def _agent_args(args: dict[str, Any]) -> list[AgentText]:
    # Free text inside arguments was written by the agent: show it, labelled, one line per string value.
    out = []
    for key in sorted(args):
        value = args[key]
        if isinstance(value, str):
            out.append(AgentText(text=f"{key}: {value}"[:4000]))
    return out


def render_screen(plan: Plan, req: ApprovalRequirement, money: PlanMoney, quorum: tuple[int, int]) -> Screen:
    """The screen for one approval requirement of a plan."""
    ops = []
    for b in plan.branches:
        amount = up_to = None
        if b.amount is not None:
            amount = b.amount.display()
            most = Amount.of(with_tolerance(b.amount, b.tolerance_percent), b.amount.currency)
            up_to = most.display() if most.decimal != b.amount.decimal else None
        ops.append(
            ScreenOperation(
                branch_id=b.branch_id,
                participant=b.participant,
                operation=b.operation,
                tier=b.tier,
                amount=amount,
                up_to=up_to,
                args=_agent_args(b.args),
            )
        )
    agent_written = [AgentText(text=plan.summary)] if plan.summary else []
    return Screen(
        title=f"Approve {req.action} for {plan.requester.principal}",
        plan_digest=plan.digest(),
        txn_id=plan.txn_id,
        requester=plan.requester.principal,
        agent=plan.requester.agent,
        action=req.action,
        totals=show_money(money),
        operations=ops,
        participants=sorted({b.participant for b in plan.branches}),
        decide_by=req.decide_by or plan.deadlines.decide_by,
        commit_by=plan.deadlines.commit_by,
        quorum=f"{quorum[0]} of {quorum[1]}",
        agent_written=agent_written,
    )


def _same(ts: str) -> str:
    return ts


def person_words(
    address: str, names: Mapping[str, str] | None = None, roles: Mapping[str, Sequence[str]] | None = None
) -> str:
    """A person as a reader is told of them (HATP-GW-92): the display name on their signed card with the address
    beside it (what a command such as `hatp inbox approve --as` takes), or the address alone without a card. With
    `roles` (a model's text, HATP-GW-96), the card's roles after the name: `Bob Brown, finance-approver (human://...)`."""
    name = (names or {}).get(address)
    if name:  # HATP-GW-92: the name on the card first, the address beside it
        role = ", ".join((roles or {}).get(address, ()))
        return f"{name}, {role} ({address})" if role else f"{name} ({address})"
    return address


def final_words(screen: Screen) -> str | None:
    """The steps that cannot be undone, in words (HATP-GW-88): "This payment cannot be undone once approved." (or
    "This step" without an amount) when a final-tier step is in the plan, else None."""
    finals = [op for op in screen.operations if op.tier == "final"]
    if not finals:
        return None
    noun = "payment" if any(op.amount for op in finals) else "step"
    return f"This {noun} cannot be undone once approved."


def render_text(
    screen: Screen,
    *,
    names: Mapping[str, str] | None = None,
    roles: Mapping[str, Sequence[str]] | None = None,
    when: Callable[[str], str] | None = None,
    decide_by: str | None = None,
    brief: bool = False,
) -> list[str]:
    """The screen as lines of text, summary first (HATP-GW-96): who asks for what, up to how much, the agent's
    summary, the step that cannot be undone in words and the deadline; then the details, the transaction's id and
    plan digest last (`brief`: the summary only). Agent-written text is always prefixed with AGENT_LABEL. `names`
    (and `roles`): display names (and card roles) by address, from the signed cards; `when`: how a timestamp is put
    into words (HATP-GW-92: the caller's local zone and UTC with "in N min"; as the wire writes it without one);
    `decide_by`: the ask's own deadline when it is tighter than the plan's."""
    at = when or _same
    who = person_words(screen.requester, names, roles)
    lines = [f"Approve {screen.action} requested by {who}: {'; '.join(screen.totals) or 'no amounts stated'}"]
    lines.extend(f"  {AGENT_LABEL} {a.text}" for a in screen.agent_written)
    final = final_words(screen)
    if final:  # HATP-GW-96: the irreversible step in words, before the details
        lines.append(f"  {final}")
        for op in screen.operations:
            if op.tier == "final":
                money = f", {op.amount}" + (f", up to {op.up_to}" if op.up_to else "") if op.amount else ""
                lines.append(f"    {op.operation} on {op.participant}{money}")
    deadline = decide_by or screen.decide_by
    if deadline:
        lines.append(f"  decide by {at(deadline)}")
    if brief:
        return lines
    lines.append(f"  through the agent {screen.agent}")
    if screen.quorum:
        lines.append(f"  approvals needed: {screen.quorum}")
    if screen.commit_by:
        lines.append(f"  commit by {at(screen.commit_by)}")
    for h in screen.holds or []:  # holds-first: what the approval relies on (HATP-GW-31)
        horizon = f", kept at most until {at(h.hold_horizon)}" if h.hold_horizon else ""
        lines.append(f"  hold {h.branch_id} placed: lease ends {at(h.lease_expires_at)}{horizon}")
    lines.append(
        "  operations (hold: released if the trip does not go ahead; compensate: can be reversed; final: cannot be"
        " undone):"
    )
    for op in screen.operations:
        money = ""
        if op.amount:
            money = f"  {op.amount}" + (f", up to {op.up_to}" if op.up_to else "")
        lines.append(f"    {op.branch_id}: {op.operation} on {op.participant} ({op.tier}){money}")
        lines.extend(f"      {AGENT_LABEL} {a.text}" for a in op.args)
    lines.append(f"  participants: {', '.join(screen.participants)}")
    lines.append(f"  total: {'; '.join(screen.totals) if screen.totals else 'no amounts stated'}")
    lines.append(f"  transaction {screen.txn_id}  plan {screen.plan_digest}")
    return lines


def render_ask_text(
    ask: Ask,
    *,
    names: Mapping[str, str] | None = None,
    roles: Mapping[str, Sequence[str]] | None = None,
    when: Callable[[str], str] | None = None,
    brief: bool = False,
) -> list[str]:
    """Any ask as lines of text, summary first: the plan screen for approvals (render_text), the labelled question,
    its deadline and choices otherwise; the ask's id and address last (`names`, `roles`, `when`, `brief`: as
    render_text)."""
    at = when or _same
    ids = f"  ask {ask.ask_id} ({ask.kind}) to {ask.address}"
    if ask.screen is not None:
        lines = render_text(ask.screen, names=names, roles=roles, when=when, decide_by=ask.decide_by, brief=brief)
        return lines if brief else [*lines, ids]
    asker = f" for {person_words(ask.requester, names, roles)}" if ask.requester else ""
    lines = [f"A {ask.kind} question{asker}"]
    if ask.question is not None:
        lines.append(f"  {AGENT_LABEL} {ask.question.text}")
    lines.append(f"  decide by {at(ask.decide_by)}")
    if brief:
        return lines
    lines.extend(f"  option {o.id}: {o.label}" for o in ask.options)
    if ask.form_schema is not None:
        props = ask.form_schema.get("properties")
        if isinstance(props, dict):
            lines.append(f"  fields: {', '.join(sorted(props))}")
    if ask.max_length is not None:
        lines.append(f"  answer in at most {ask.max_length} characters")
    lines.append(ids)
    return lines
