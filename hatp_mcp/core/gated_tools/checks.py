"""Approval-gated tools, the pure part: what a gated tool requires, the call digest, and `check_approval`, which
returns the approval when it fits this exact call or raises the refusal (HATP-GATE-N) saying why.

A gated call is described by a ToolCall ``{server, tool, argumentsDigest, toolDigest?, maxAmount?, payee?}``;
its digest is the call digest the gateway signs as the approval's ``planDigest``. The amount the authority check
uses comes from the call's own arguments (``amountFrom``, a JSON pointer), never from a number the agent wrote
elsewhere. This module does no IO and never reads the clock: `now`, whether the nonce was seen, and when the
tool's current definition took effect are the caller's (hatp_mcp/mcp/gated_tools.py, hatp_mcp/store/replay_cache.py).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from jmespath.exceptions import JMESPathError

from hatp_mcp.core.gated_tools.signatures import SignedPart, signed_parts
from hatp_mcp.core.gateway.address import parse_address
from hatp_mcp.core.gateway.agents import AgentKeys, verify_request
from hatp_mcp.core.gateway.proof import MAX_SKEW, HumanKeys
from hatp_mcp.core.gateway.requirement import HumanRequirement, check_humans_meet
from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.currency import is_known_currency
from hatp_mcp.core.model.evidence import Approval
from hatp_mcp.core.model.proxy_policy import compiled
from hatp_mcp.core.model.toolcall import ToolCall
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.model.wire import WireError, load_json, parse
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import Keyring, SignatureError
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import BrokenInvariant, HatpError

__all__ = [
    "APPROVAL_META_KEY",
    "GatePolicy",
    "GateRequirement",
    "Quote",
    "approval_required",
    "call_digest",
    "check_approval",
    "expected_call",
    "replay_keys",
    "resolve_pointer",
    "tool_definition_digest",
]

# Where the agent puts the approval: the tools/call request's `_meta`, never the digested arguments.
APPROVAL_META_KEY = "io.hatp/approval"
_INVALID = "APPROVAL_INVALID"
_CURRENCY_CODE = re.compile(r"[A-Z]{3}")


@dataclass(frozen=True, slots=True, kw_only=True)
class GateRequirement:
    """What a gated tool asks for: who decides (`address`), for which `action`, and where in the arguments the
    amount (`amount_from`) and the payee (`payee_from`) are, as RFC 6901 JSON pointers. Instead of a pointer to
    an Amount object, the amount may be a JMESPath expression over ``{"args": <arguments>}`` that finds a decimal
    (`amount_expression`) in a currency the requirement fixes (`amount_currency`): the proxy's gate
    (spec/proxy.md), in front of tools whose arguments hold a bare number."""

    address: str
    action: str
    amount_from: str | None = None
    payee_from: str | None = None
    amount_expression: str | None = None
    amount_currency: str | None = None

    @classmethod
    def from_config(cls, requires: Mapping[str, Any]) -> GateRequirement:
        """Read ``{"address": ..., "requirement": {"action", "amountFrom"?, "payeeFrom"?}}``. Raises ValueError."""
        req = requires.get("requirement")
        address = requires.get("address")
        if not isinstance(address, str) or not isinstance(req, Mapping) or not isinstance(req.get("action"), str):
            raise ValueError('requires must be {"address": str, "requirement": {"action": str, "amountFrom"?: str}}')
        parse_address(address, "requires.address")
        amount_from, payee_from = req.get("amountFrom"), req.get("payeeFrom")
        for name, p in (("amountFrom", amount_from), ("payeeFrom", payee_from)):
            if p is not None and (not isinstance(p, str) or (p and not p.startswith("/"))):
                raise ValueError(f"{name} must be a JSON pointer such as '/amount'")
        expression, currency = _amount_expression(req.get("amount"), amount_from)
        return cls(
            address=address,
            action=req["action"],
            amount_from=amount_from,
            payee_from=payee_from,
            amount_expression=expression,
            amount_currency=currency,
        )

    def wire(self) -> dict[str, Any]:
        req: dict[str, Any] = {"action": self.action}
        if self.amount_from is not None:
            req["amountFrom"] = self.amount_from
        if self.amount_expression is not None:
            req["amount"] = {"expression": self.amount_expression, "currency": self.amount_currency}
        if self.payee_from is not None:
            req["payeeFrom"] = self.payee_from
        return {"address": self.address, "requirement": req}


def _amount_expression(raw: Any, amount_from: str | None) -> tuple[str | None, str | None]:
    """`requirement.amount`: ``{"expression": <JMESPath over {"args"}>, "currency": <ISO 4217>}``, or absent.
    Raises ValueError for another shape, an expression that does not compile, or both it and `amountFrom`."""
    if raw is None:
        return None, None
    expression = raw.get("expression") if isinstance(raw, Mapping) else None
    currency = raw.get("currency") if isinstance(raw, Mapping) else None
    if not isinstance(expression, str) or not isinstance(currency, str) or set(raw) != {"expression", "currency"}:
        raise ValueError('requirement.amount must be {"expression": "args.amount", "currency": "EUR"}')
    if amount_from is not None:
        raise ValueError("give requirement.amountFrom or requirement.amount, not both")
    if not _CURRENCY_CODE.fullmatch(currency):
        raise ValueError(f"requirement.amount.currency {currency!r} is not an ISO 4217 code such as EUR")
    try:
        compiled(expression)
    except (JMESPathError, ValueError, RecursionError) as exc:
        raise ValueError(f"requirement.amount.expression {expression!r} is not a JMESPath expression") from exc
    return expression, currency


@dataclass(frozen=True, slots=True, kw_only=True)
class GatePolicy:
    """The server's own bounds on an approval, whatever the gateway signed: it lives at most `max_lifetime`
    (from its issuedAt, and from the gate's clock), and every person's proof in it was signed at most
    `max_proof_age` before the gate's clock. The default proof age is the gateway's decide window for a tool call
    (1 h, hatp_mcp/core/gated_tools/gateway_routing.py) plus the approval's default lifetime (15 min)."""

    max_lifetime: timedelta = timedelta(minutes=15)
    max_proof_age: timedelta = timedelta(minutes=75)


@dataclass(frozen=True, slots=True)
class Quote:
    """What the server will actually charge, and to whom, when the server sets the price."""

    amount: Amount
    payee: str


def resolve_pointer(doc: Any, pointer: str) -> Any:
    """RFC 6901: the value at `pointer` in `doc`. Raises KeyError when it does not resolve."""
    if pointer == "":
        return doc
    if not pointer.startswith("/"):
        raise KeyError(pointer)
    cur = doc
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(cur, Mapping) and token in cur:
            cur = cur[token]
        elif isinstance(cur, list) and token.isdigit() and (token == "0" or not token.startswith("0")):
            if int(token) >= len(cur):
                raise KeyError(pointer)
            cur = cur[int(token)]
        else:
            raise KeyError(pointer)
    return cur


def _not_payable(pointer: str, reason: str) -> HatpError:
    return HatpError(
        "HATP-GATE-23",
        f"the amount at {pointer!r} {reason}: nobody is asked to approve it",
        path=f"arguments{pointer}",
        fix="pass a finite amount of zero or more, as a decimal string, in an ISO 4217 currency (refunds are "
        "their own tool)",
        code="INVALID_ARGUMENTS",
    )


def _payable_amount(value: Any, pointer: str) -> Amount:
    """HATP-GATE-23 (non-finite, negative, unknown currency) or HATP-GATE-20 (not an amount at all)."""
    raw = value.get("value") if isinstance(value, Mapping) else None
    if (isinstance(raw, float) and not math.isfinite(raw)) or (
        isinstance(raw, str) and raw.strip().lstrip("+-").lower() in ("nan", "inf", "infinity", "snan")
    ):
        raise _not_payable(pointer, f"is not a finite number ({raw!r})")
    try:
        amount = Amount.model_validate(value)
    except ValueError as exc:
        raise _bad_args(pointer, 'amount {"value": "12.50", "currency": "USD"}') from exc
    if amount.decimal < 0:
        raise _not_payable(pointer, f"is negative ({amount.value} {amount.currency}); plans refuse it too (HATP-GW-2)")
    if not is_known_currency(amount.currency):
        raise _not_payable(pointer, f"is in {amount.currency!r}, which is not an ISO 4217 currency")
    return amount


def _bad_args(pointer: str, what: str) -> HatpError:
    return HatpError(
        "HATP-GATE-20",
        f"the arguments have no {what} at {pointer!r}: the gate cannot tell what is being approved",
        path=f"arguments{pointer}",
        fix=f"pass the {what} at {pointer} in the tool's arguments",
        code="INVALID_ARGUMENTS",
    )


def tool_definition_digest(definition: Mapping[str, Any]) -> str:
    """The digest of a tool as listed (name, title, description, schemas, annotations), without `_meta`."""
    return digest({k: v for k, v in definition.items() if k != "_meta" and v is not None})


def expected_call(
    server: str, tool: str, arguments: Mapping[str, Any], req: GateRequirement, tool_digest: str | None
) -> ToolCall:
    """The ToolCall this exact call stands for. Raises HatpError HATP-GATE-20 when `amountFrom`/`payeeFrom`
    do not resolve (fail closed: an amount that cannot be read is never treated as zero), HATP-GATE-23 when the
    amount is negative, not finite or in an unknown currency (both sides call this before anyone is asked)."""
    max_amount: Amount | None = None
    payee: str | None = None
    if req.amount_expression is not None:
        max_amount = _expression_amount(arguments, req.amount_expression, str(req.amount_currency))
    if req.amount_from is not None:
        try:
            found = resolve_pointer(arguments, req.amount_from)
        except KeyError as exc:
            raise _bad_args(req.amount_from, 'amount {"value": "12.50", "currency": "USD"}') from exc
        max_amount = _payable_amount(found, req.amount_from)
    if req.payee_from is not None:
        try:
            value = resolve_pointer(arguments, req.payee_from)
        except KeyError as exc:
            raise _bad_args(req.payee_from, "payee") from exc
        if not isinstance(value, str) or not value:
            raise _bad_args(req.payee_from, "payee string")
        payee = value
    return ToolCall(
        server=server,
        tool=tool,
        arguments_digest=digest(dict(arguments)),
        tool_digest=tool_digest,
        max_amount=max_amount,
        payee=payee,
    )


def _expression_amount(arguments: Mapping[str, Any], expression: str, currency: str) -> Amount:
    """The amount a JMESPath expression finds in the arguments, in the requirement's currency: a JSON number or a
    decimal string. Raises HatpError HATP-GATE-20 (nothing, or not a number), HATP-GATE-23 (not payable)."""
    where = f"/{expression}"
    found = compiled(expression).search({"args": dict(arguments)})
    if isinstance(found, bool) or not isinstance(found, int | float | str):
        raise _bad_args(where, f"amount (a number the expression {expression!r} finds)")
    return _payable_amount({"value": found if isinstance(found, str) else repr(found), "currency": currency}, where)


def call_digest(call: ToolCall) -> str:
    """The call digest: the digest of the ToolCall's wire form (what an approval's `planDigest` names)."""
    return call.digest()


def approval_required(call: ToolCall, req: GateRequirement) -> HatpError:
    """HATP-GATE-1: the refusal for a gated call without an approval; its data says exactly what to ask for."""
    return HatpError(
        "HATP-GATE-1",
        f"tool {call.tool!r} on {call.server} needs a human approval of this exact call",
        path="_meta",
        fix=f"ask the Human Gateway to approve callDigest at {req.address}, then call again with the approval "
        f"in _meta[{APPROVAL_META_KEY!r}]",
        code="APPROVAL_REQUIRED",
        data={**req.wire(), "callDigest": call_digest(call), "toolCall": call.wire(), "metaKey": APPROVAL_META_KEY},
    )


def _refuse(rule: str, reason: str, path: str = "$", fix: str = "") -> HatpError:
    return HatpError(rule, reason, path=path, fix=fix or "ask the Human Gateway for a new approval", code=_INVALID)


def _parse(raw: object) -> tuple[Approval, dict[str, Any]]:
    if isinstance(raw, str | bytes):
        try:
            raw = load_json(raw.encode() if isinstance(raw, str) else raw, "approval")
        except WireError as exc:
            raise _refuse("HATP-GATE-2", f"the approval is not readable: {exc.reason}") from exc
    if not isinstance(raw, dict):
        raise _refuse("HATP-GATE-2", "the approval is not a JSON object")
    try:
        approval = parse(Approval, raw, "approval")
    except WireError as exc:
        raise _refuse("HATP-GATE-2", f"the approval is malformed or truncated: {exc.reason}", exc.path) from exc
    if approval.subject != "tool-call" or approval.tool_call is None:
        raise _refuse("HATP-GATE-2", "the approval is not about a tool call (subject tool-call with toolCall)")
    return approval, raw


def _verify(raw: dict[str, Any], trusted: Keyring) -> None:
    try:
        verify_raw(raw, trusted, "gateway")
    except SignatureError as exc:
        if exc.rule in ("HATP-SIG-2", "HATP-SIG-5"):
            raise _refuse(
                "HATP-GATE-4",
                f"the approval is not signed by a gateway this server trusts ({exc.rule}: {exc.reason})",
                exc.path,
                "ask a gateway in this server's trusted keyring",
            ) from exc
        if exc.rule == "HATP-SIG-1":
            raise _refuse("HATP-GATE-2", f"the approval is unsigned or truncated ({exc.reason})", exc.path) from exc
        raise _refuse(
            "HATP-GATE-3", f"the approval's signature is forged ({exc.rule}: {exc.reason})", exc.path
        ) from exc


def _match_call(got: ToolCall, want: ToolCall, defined_at: datetime | None, issued_at: str) -> ToolCall:
    """Compare what was approved with what is called; returns the expected call (bound as the approval is)."""
    if got.server != want.server:
        raise _refuse(
            "HATP-GATE-5", f"the approval is for server {got.server!r}, this is {want.server!r}", "$.toolCall"
        )
    if got.tool != want.tool:
        raise _refuse("HATP-GATE-6", f"the approval is for tool {got.tool!r}, this is {want.tool!r}", "$.toolCall.tool")
    if got.tool_digest is not None and got.tool_digest != want.tool_digest:
        raise _refuse(
            "HATP-GATE-8",
            f"tool {want.tool!r} changed after approval: its definition digest is now {want.tool_digest}",
            "$.toolCall.toolDigest",
            "show the approver the tool as it is now and ask again",
        )
    if got.tool_digest is None:
        want = want.model_copy(update={"tool_digest": None})
    if (defined_at is None and got.tool_digest is None) or (
        defined_at is not None and parse_ts(issued_at) < defined_at
    ):
        since = "an unknown time" if defined_at is None else when_words(format_ts(defined_at))
        raise _refuse(  # HATP-GW-97: both times in words; no clock here, so no "(N min ago)"
            "HATP-GATE-9",
            f"the approval (issued {when_words(issued_at)}) predates the tool's current definition (in effect "
            f"since {since})",
            "$.issuedAt",
            "ask again: an approval covers only a definition that was in effect when it was issued",
        )
    if got.arguments_digest != want.arguments_digest or got != want:
        raise _refuse(
            "HATP-GATE-7",
            "the arguments differ from the ones approved",
            "$.toolCall.argumentsDigest",
            "call with exactly the approved arguments, or ask again for these",
        )
    return want


def _check_rejections(approval: Approval) -> None:
    if approval.decision != "approve" or any(d.decision != "approve" for d in approval.decisions):
        who = ", ".join(d.approver for d in approval.decisions if d.decision == "reject") or "the gateway"
        raise _refuse(
            "HATP-GATE-11", f"the approval records a rejection (by {who}); it cannot authorize the call", "$.decision"
        )


# The gate's rule for each way the humans can fall short (hatp_mcp/core/gateway/requirement.py decides which).
_HUMAN_RULES = {
    "HATP-GW-41": "HATP-GATE-19",
    "HATP-GW-42": "HATP-GATE-14",
    "HATP-GW-43": "HATP-GATE-13",
    "HATP-GW-44": "HATP-GATE-12",
    "HATP-GW-45": "HATP-GATE-25",
    "HATP-GW-46": "HATP-GATE-24",
}


def _proven_requester(
    approval: Approval, digest: str, agents: AgentKeys | None, now: datetime, policy: GatePolicy
) -> str | None:
    """HATP-GATE-26: with the agent cards, the requester is the person the requesting agent's card names, proven by
    the agent's own signed request inside the approval; without them, only what the gateway's routing names."""
    if agents is None:
        return None
    try:
        return verify_request(
            approval.request,
            agents,
            subject="tool-call",
            subject_digest=digest,
            now=now,
            max_age=policy.max_proof_age,
            path="$.request",
        )
    except HatpError as exc:
        raise _refuse(
            "HATP-GATE-26",
            f"who the agent acts for is not proven ({exc.rule}: {exc.reason})",
            exc.path,
            "ask the gateway with the agent's signed request; the approval carries it",
        ) from exc


def _check_humans(
    approval: Approval,
    want: ToolCall,
    req: GateRequirement,
    humans: HumanKeys,
    now: datetime,
    policy: GatePolicy,
    requester: str | None,
) -> None:
    """The people, checked by the gate itself against its own cards and clock (never the gateway's word)."""
    up_to = {want.max_amount.currency: want.max_amount.decimal} if want.max_amount is not None else {}
    need = HumanRequirement(address=req.address, action=req.action, up_to=up_to, requester=requester)
    try:
        check_humans_meet(approval, need, humans, now=now, max_age=policy.max_proof_age)
    except HatpError as exc:
        rule = _HUMAN_RULES.get(exc.rule)
        if rule is None:  # the proofs themselves (HATP-GW-19..27, HATP-GW-32)
            raise _refuse(
                "HATP-GATE-21",
                f"a decision is not proven by the person who made it ({exc.rule}: {exc.reason})",
                exc.path,
                "ask the gateway for an approval whose decisions carry the people's own signed proofs",
            ) from exc
        raise _refuse(rule, f"{exc.reason} ({exc.rule})", exc.path, exc.fix) from exc


def _check_lifetime(approval: Approval, now: datetime, policy: GatePolicy) -> None:
    if approval.expires_at is None or now >= parse_ts(approval.expires_at):
        # HATP-GW-97: the gate's clock, read at once: the time in words and how long ago
        why = (
            f"expired at {when_words(approval.expires_at, now)}"
            if approval.expires_at
            else "never expires (refused: an approval must expire)"
        )
        raise _refuse("HATP-GATE-10", f"the approval {why}", "$.expiresAt")
    issued, expires = parse_ts(approval.issued_at), parse_ts(approval.expires_at)
    cap = policy.max_lifetime
    if issued > now + MAX_SKEW or expires - issued > cap or expires > now + cap:
        raise _refuse(
            "HATP-GATE-10",
            f"the approval, issued {when_words(approval.issued_at, now)} and expiring "
            f"{when_words(approval.expires_at, now)}, outlives this server's policy: at most "
            f"{int(cap.total_seconds())} s from its issue and from now",
            "$.expiresAt",
        )


def replay_keys(approval: Approval) -> list[str]:
    """What using `approval` spends at the gate (HATP-GATE-18): its nonce, its id (which every person's proof
    binds, so proofs re-signed under a new nonce are still the same approval) and each proof's own nonce."""
    keys = [approval.nonce, f"approval:{approval.approval_id}"]
    keys += [f"proof:{d.proof.nonce}" for d in approval.decisions if d.proof is not None]
    return keys


def _check_routing(approval: Approval, want: ToolCall, req: GateRequirement) -> None:
    checked = approval.routing.checked
    if checked.status != "checked" or checked.action != req.action:
        raise _refuse(
            "HATP-GATE-15",
            f"the routing record shows no authority check for {req.action!r} (status {checked.status}, "
            f"action {checked.action!r}); an absent check never counts as a pass",
            "$.routing.checked",
        )
    if want.max_amount is not None:
        cover = [a for a in checked.amounts if a.currency == want.max_amount.currency]
        if not cover or max(a.decimal for a in cover) < want.max_amount.decimal:
            raise _refuse(
                "HATP-GATE-15",
                f"the authority check did not cover {want.max_amount.display()}",
                "$.routing.checked.amounts",
            )


def _check_quote(approval: ToolCall, quote: Quote) -> None:
    most = approval.max_amount
    if most is None or most.currency != quote.amount.currency or quote.amount.decimal > most.decimal:
        fixed = most.display() if most is not None else "no maximum"
        raise _refuse(
            "HATP-GATE-16",
            f"the price is {quote.amount.display()}, above the approved maximum ({fixed})",
            "$.toolCall.maxAmount",
            "ask again for the new price",
        )
    if approval.payee != quote.payee:
        raise _refuse(
            "HATP-GATE-17",
            f"the payee is {quote.payee!r}, the approval names {approval.payee!r}",
            "$.toolCall.payee",
        )


def check_approval(
    raw: object,
    *,
    expected: ToolCall,
    requirement: GateRequirement,
    trusted: Keyring,
    humans: HumanKeys,
    now: datetime,
    defined_at: datetime | None = None,
    quote: Quote | None = None,
    nonce_used: bool = False,
    policy: GatePolicy | None = None,
    agents: AgentKeys | None = None,
    verify_ahead: Callable[[list[SignedPart]], None] | None = None,
) -> Approval:
    """Return the approval when it authorizes exactly `expected` at `now`; else raise the refusal.

    `expected` binds the tool definition digest when the gate does; `humans` are the people's decision keys from
    their Directory-verified cards (each decision must carry its person's proof); `defined_at` is when that
    definition took effect (unknown: unbound approvals are refused); `quote` is the server's own price and payee,
    when it sets them; `nonce_used` whether the replay cache has seen any of `replay_keys(approval)`; `policy`
    the server's bounds on lifetime and proof age; `agents` the organisation's Directory-signed agent cards (with
    them the requester is proven by the agent's signed request, HATP-GATE-26). `verify_ahead`, given, is handed
    the approval's signatures (hatp_mcp/core/gated_tools/signatures.py) as soon as it is parsed, to verify them at once
    (the gate does it on two threads); the checks below still verify each one, finding those that verified
    remembered by their keyring, so which refusal is raised, and which comes first, never depends on it.
    Raises HatpError HATP-GATE-2..26.
    """
    policy = policy or GatePolicy()
    approval, doc = _parse(raw)
    if verify_ahead is not None:
        verify_ahead(signed_parts(doc, approval, trusted, humans, agents))
    _verify(doc, trusted)
    if approval.tool_call is None:
        raise BrokenInvariant("_parse passed a tool-call approval without its call")
    want = _match_call(approval.tool_call, expected, defined_at, approval.issued_at)
    digest_now = call_digest(want)
    if approval.plan_digest != digest_now or approval.routing.plan_digest != digest_now:
        raise _refuse("HATP-GATE-7", "the approval's digest is not the digest of this call", "$.planDigest")
    _check_lifetime(approval, now, policy)
    _check_rejections(approval)
    requester = _proven_requester(approval, digest_now, agents, now, policy)
    _check_humans(approval, want, requirement, humans, now, policy, requester)
    _check_routing(approval, want, requirement)
    if quote is not None:
        _check_quote(approval.tool_call, quote)
    if nonce_used:
        raise _refuse(
            "HATP-GATE-18",
            f"approval {approval.approval_id} was already used (its nonce, its id or one of its people's proofs "
            "was spent here); it works once",
            "$.nonce",
        )
    return approval
