"""The Human Gateway runtime: `GatewayApprover` implements the coordinator's Approver on a Clock, a Directory,
a GatewayStore and a "gateway" signing key. It persists before it answers, signs votes, approvals and answers,
arms SLA and deadline timers (`run`), and notifies the people it asks through a Notifier.

Several gateway processes may share one store (spec/gateway.md HATP-GW-76..79): every timer step is applied in one
store transaction that records it with this process's owner id, and who is newly asked (so told) is decided inside
the write that asked them, so only the process whose write asked a person tells them.

Transport-free: the MCP gateway server (servers/gateway.py, hatp_mcp/mcp/gateway_server.py) wraps this class. Contact
details are read from the store only to hand the Notifier a destination; they are never put into a message.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, Protocol

import anyio
from anyio.abc import TaskStatus

from hatp_mcp.core.gated_tools.checks import GateRequirement, call_digest, expected_call
from hatp_mcp.core.gated_tools.gateway_routing import build_tool_call_approval, open_tool_call_ask, tool_call_ask_id
from hatp_mcp.core.gateway import asks as core_asks
from hatp_mcp.core.gateway import machine as core
from hatp_mcp.core.gateway.agents import AgentKeys, verify_request
from hatp_mcp.core.gateway.ask_evidence import build_answer, build_approval, build_vote
from hatp_mcp.core.gateway.ask_ids import approval_ask_id, check_question_id
from hatp_mcp.core.gateway.directory import Directory, IgnoredCard
from hatp_mcp.core.gateway.estimate import estimate_requirement
from hatp_mcp.core.gateway.passkey import RelyingParty, apply_passkey
from hatp_mcp.core.gateway.proof import HumanKeys, apply_proof, subject_digest
from hatp_mcp.core.gateway.terms import tighten as tighten_terms
from hatp_mcp.core.gateway.waiting import ask_waiting, open_asks_of
from hatp_mcp.core.model.agent import AgentRequest
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.estimate import Estimate
from hatp_mcp.core.model.evidence import PasskeyAssertion, Vote
from hatp_mcp.core.model.gateway import Ask, AskRecord, Option
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.question import QuestionRequest, question_digest
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.core.signing.models import sign_model
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.interfaces import ApproverAnswer
from hatp_mcp.runtime.org import load_directory
from hatp_mcp.store.gateway_store import GatewayStore, Sent, StoredAsk, TimerStep, Write
from hatp_mcp.store.owner import default_owner

__all__ = ["GatewayApprover", "Notifier", "RecordingNotifier", "apply_human_input", "load_org"]


class Notifier(Protocol):
    """Tells a person an ask is waiting. `contact` is the gateway's private address book entry for them."""

    async def notify(self, human: str, contact: dict[str, str], ask: Ask) -> None: ...


class RecordingNotifier:
    """Keeps what it was asked to deliver (tests, the terminal inbox needs no push)."""

    def __init__(self) -> None:
        self.delivered: list[tuple[str, dict[str, str], Ask]] = []

    async def notify(self, human: str, contact: dict[str, str], ask: Ask) -> None:
        self.delivered.append((human, contact, ask))


def load_org(org_dir: str | Path) -> tuple[Directory, list[IgnoredCard], dict[str, dict[str, str]]]:
    """The gateway's read of an organisation dir: the Directory (hatp_mcp.runtime.org.load_directory) and the
    private ``contacts.json``, which stays inside the gateway.

    Raises like load_directory (OSError, ValueError, HatpError); a bad contacts.json raises ValueError.
    """
    root = Path(org_dir)
    directory, ignored = load_directory(root)
    contacts_path = root / "contacts.json"
    contacts = json.loads(contacts_path.read_text()) if contacts_path.exists() else {}
    return directory, ignored, contacts


def apply_human_input(
    store: GatewayStore, ask_id: str, proof: object, now: datetime, humans: HumanKeys, via: str = "inbox"
) -> StoredAsk:
    """Apply one person's signed decision (approve / reject / answer / decline) to a stored ask, atomically: the
    proof is verified against `humans` (the cards' keys) and its nonce spent in the same transaction.

    Used by the gateway, for proofs from its tools and for those `hatp inbox` left in the store. Raises KeyError
    (no such ask) or HatpError (HATP-GW-19..26 for the proof, else the core's refusal; the stored ask is
    unchanged, except that time that ran out first, a deadline or an SLA, is kept)."""
    return _apply_input(store, ask_id, proof, now, humans, via)[0]


def _apply_input(
    store: GatewayStore,
    ask_id: str,
    proof: object,
    now: datetime,
    humans: HumanKeys,
    via: str,
    proof_seq: int | None = None,
) -> tuple[StoredAsk, list[str]]:
    """`apply_human_input`, also returning who the write newly asked (decided inside its transaction). With
    `proof_seq` (a proof left in the store) the proof is settled accepted in the same write, or left to the process
    that settled it first (HATP-GW-77)."""
    nonce = proof.get("nonce") if isinstance(proof, Mapping) else getattr(proof, "nonce", None)
    seen = _Seen()

    def change(s: StoredAsk, used: bool) -> StoredAsk:
        if s.record is None:
            raise HatpError("HATP-GW-11", f"ask {ask_id} was refused at routing; nothing to decide", code="ASK_CLOSED")
        ticked = core.tick(s.record, now, humans.names())
        try:
            return seen.of(
                s, s.with_record(apply_proof(ticked, proof, humans=humans, now=now, nonce_used=used, via=via)[0])
            )
        except HatpError as exc:
            if ticked != s.record:  # time ran out first (deadline, SLA): keep that, then refuse
                raise _Late(exc) from exc
            raise

    try:
        spent = store.update_spending(ask_id, nonce if isinstance(nonce, str) else "", change, proof_seq)
        return spent, seen.newly
    except _Late as late:
        names = humans.names()
        store.update(ask_id, lambda s: seen.of(s, s.with_record(core.tick(s.record, now, names))) if s.record else s)
        raise late.error from None


def newly_asked(before: AskRecord | None, after: AskRecord | None) -> list[str]:
    """The people `after` asks that `before` did not (everyone asked, for a new ask)."""
    if after is None:
        return []
    was = {s.human for s in before.seats if s.status == "asked"} if before is not None else set()
    return [s.human for s in after.seats if s.status == "asked" and s.human not in was]


class _Seen:
    """Who one store write newly asked, taken from inside its transaction (the ask as stored then, not as last read
    by this process): a write tried again sees the ask again, so the last call counts."""

    def __init__(self) -> None:
        self.newly: list[str] = []

    def of(self, before: StoredAsk, after: StoredAsk) -> StoredAsk:
        self.newly = newly_asked(before.record, after.record)
        return after


def _same_question(ask: Ask, question: QuestionRequest, requester: str) -> bool:
    """`ask` is the question asked again: same kind, address, text, options, schema, bound, person, deadline."""
    return (
        ask.kind == question.kind
        and ask.address == question.address
        and ask.question is not None
        and ask.question.text == question.question
        and list(ask.options) == list(question.options)
        and ask.form_schema == question.form_schema
        and ask.max_length == question.max_length
        and ask.requester == requester
        and (question.decide_by is None or ask.decide_by == question.decide_by)
    )


def verified_request(raw: object) -> AgentRequest:
    """The AgentRequest model of a request verify_request accepted (kept whole, signature and all)."""
    return raw if isinstance(raw, AgentRequest) else AgentRequest.model_validate(raw)


def _approver_answer(stored: StoredAsk) -> ApproverAnswer:
    """A plan ask's signed vote (and approval once decided). An ask under an approval's id that holds no vote is
    not an approval (a store written before HATP-ASK-7 kept questions out of that namespace): refused, not
    trusted. Raises HatpError HATP-ASK-7."""
    if stored.vote is None:
        raise _not_an_approval(stored.ask_id)
    return ApproverAnswer(vote=stored.vote, approval=stored.evidence)


def _not_an_approval(ask_id: str) -> HatpError:
    return HatpError(
        "HATP-ASK-7",
        f"ask {ask_id!r} is not an approval: another kind of ask holds an approval's id",
        path="$.askId",
        code="ASK_ID_RESERVED",
        fix="the operator removes the ask that holds the approval's id from the gateway's store",
    )


class _Late(Exception):
    def __init__(self, error: HatpError) -> None:
        super().__init__(error.one_line())
        self.error = error


class GatewayApprover:
    """The Approver the coordinator calls, plus the gateway's own entry points for people and questions."""

    def __init__(
        self,
        *,
        directory: Directory,
        key: SigningKey,
        store: GatewayStore,
        clock: Clock,
        gateway_id: str | None = None,
        notifier: Notifier | None = None,
        default_window: timedelta = timedelta(hours=24),
        nonce: Callable[[], str] = lambda: secrets.token_urlsafe(18),
        proof_poll: timedelta = timedelta(seconds=1),
        agents: AgentKeys | None = None,
        owner: str | None = None,
    ) -> None:
        if "gateway" not in key.roles:
            raise ValueError("the gateway signs with a key whose roles include 'gateway'")
        self.directory = directory
        self.key = key
        self.store = store
        self.clock = clock
        self.gateway_id = gateway_id or directory.well_known.gateway
        self.notifier = notifier or RecordingNotifier()
        self.default_window = default_window
        # This process's name on the timer steps it takes in a store other gateway processes share (HATP-GW-76).
        self.owner = owner or default_owner()
        self._nonce = nonce
        # How often the timer loop looks for proofs `hatp inbox` left (another process: no event reaches us).
        self.proof_poll = proof_poll
        self._changed = anyio.Event()
        self._moved = anyio.Event()  # set (and replaced) after every write to an ask: wakes the long polls
        # Decision keys as the Directory-verified cards list them: the only keys a decision counts with.
        self.humans = HumanKeys.from_cards(directory.cards())
        # The Directory-signed agent cards: the only proof of whom an agent asking for a tool call acts for.
        self.agents = agents or AgentKeys()
        # Where people open the inbox (gateway.json `inboxUrl`): an open ask's answer links its page (HATP-MCP-54).
        self.inbox_url: str | None = None

    def use_directory(self, directory: Directory) -> None:
        """Use the organisation's cards as the Directory verified them now (runtime/card_watch.py, HATP-GW-82):
        decisions, passkeys and routing from here on count with these cards, and only these."""
        self.directory = directory
        self.humans = HumanKeys.from_cards(directory.cards())

    def names(self) -> dict[str, str]:
        """Display names by address, from the Directory-signed cards (HATP-GW-93: what the agent reads of a person
        names them as the pages do); never a contact detail."""
        return self.directory.names()

    def roles(self) -> dict[str, list[str]]:
        """Roles by address, from the same cards (HATP-GW-96: a model is told who someone is to the organisation)."""
        return {card.id: list(card.roles) for card in self.directory.cards()}

    # -- the Approver protocol -------------------------------------------------------------------------------

    async def ask(self, plan: Plan, requirement_id: str, terms: ApprovalTerms | None = None) -> ApproverAnswer:
        """Route a requirement (idempotent per txnId/requirementId). A refused requirement is a signed no vote.
        With `terms` (holds-first) the ask opens bound to them before anyone is notified; terms the gateway
        refuses (HATP-GW-30/31) make it a signed no vote too. Asking again with terms tightens."""
        ask_id = approval_ask_id(plan.txn_id, requirement_id)
        if self.store.get(ask_id) is not None and terms is not None:
            try:  # asked again (a retry, a replacement coordinator): the terms as they stand, else what there is
                return await self.tighten(plan.txn_id, requirement_id, terms)
            except HatpError:
                return await self.poll(plan.txn_id, requirement_id)
        if self.store.get(ask_id) is None:
            now = self.clock.now()
            try:
                rec: AskRecord | None = core.open_approval(
                    plan,
                    requirement_id,
                    self.directory,
                    gateway=self.gateway_id,
                    now=now,
                    default_window=self.default_window,
                    open_asks=self.open_asks(),
                )
                if terms is not None and rec is not None and core.state_of(rec) is core.AskState.PENDING:
                    rec = tighten_terms(rec, parse_ts(terms.decide_by), list(terms.holds), now)
                stored = StoredAsk(ask_id, rec.state, rec, None, None)  # type: ignore[union-attr]
            except HatpError as exc:
                vote = Vote(
                    txn_id=plan.txn_id,
                    branch_id=requirement_id,
                    plan_digest=plan.digest(),
                    voter=self.gateway_id,
                    decision="no",
                    code=exc.rule,
                    reason=exc.reason[:2000],
                    issued_at=format_ts(now),
                )
                stored = StoredAsk(ask_id, "refused", None, sign_model(vote, self.key).wire(), None)
            created = self.store.create(stored, plan.txn_id, requirement_id)
            if created is stored and stored.record is not None:
                await self._tell(stored, newly_asked(None, stored.record))
            elif created is stored and stored.vote is not None:
                self.store.record_sent(ask_id, "vote", stored.vote)
            self._changed.set()
        return await self.poll(plan.txn_id, requirement_id)

    def open_asks(self) -> dict[str, int]:
        """HATP-GW-9: how many of this gateway's pending asks wait for each person now (asked, not decided)."""
        return open_asks_of(stored.record for stored in self.store.asks("pending"))

    async def poll(self, txn_id: str, requirement_id: str) -> ApproverAnswer:
        """The current signed vote (and approval once decided). Raises KeyError for an ask never made."""
        return self._answer(await self._sync(approval_ask_id(txn_id, requirement_id)))

    def _answer(self, stored: StoredAsk) -> ApproverAnswer:
        """A plan ask's answer: its signed vote and approval, and while it is open who it waits for. Raises HatpError
        HATP-ASK-7 (as _approver_answer)."""
        answer = _approver_answer(stored)
        waiting = ask_waiting(stored.record, self.directory.card, self.inbox_url) if stored.record else None
        return ApproverAnswer(vote=answer.vote, approval=answer.approval, waiting=waiting)

    async def withdraw(self, txn_id: str, requirement_id: str) -> None:
        ask_id = approval_ask_id(txn_id, requirement_id)
        if self.store.get(ask_id) is None:
            return
        now = self.clock.now()
        self.store.update(ask_id, lambda s: s.with_record(core.withdraw(s.record, now)) if s.record else s)
        await self._sync(ask_id)

    async def estimate(self, plan: Plan, requirement_id: str) -> Estimate:
        """HATP-GW-28: the signed worst case until a decision on this requirement, routed as `ask` would route it
        now. Stores nothing. Raises HatpError when the gateway would refuse the requirement (its vote: no)."""
        est = estimate_requirement(
            plan,
            requirement_id,
            self.directory,
            gateway=self.gateway_id,
            now=self.clock.now(),
            default_window=self.default_window,
        )
        return sign_model(est, self.key)

    async def tighten(self, txn_id: str, requirement_id: str, terms: ApprovalTerms) -> ApproverAnswer:
        """HATP-GW-30/31: shrink a pending ask's deadline and bind `terms` into what the people sign; the pending
        vote is re-signed with the new `decideBy` and everyone asked is shown the ask again. Persisted before the
        answer. Raises KeyError (no such ask) or HatpError (HATP-GW-11/30/31; the ask is unchanged)."""
        ask_id = approval_ask_id(txn_id, requirement_id)
        if self.store.get(ask_id) is None:
            raise KeyError(ask_id)
        now = self.clock.now()
        changed: list[AskRecord] = []

        def change(s: StoredAsk) -> StoredAsk:
            if s.record is None:
                raise HatpError("HATP-GW-11", f"ask {ask_id} was refused at routing", code="ASK_CLOSED")
            rec = tighten_terms(s.record, parse_ts(terms.decide_by), list(terms.holds), now, self.names())
            if rec == s.record:
                return s
            changed.append(rec)
            vote = sign_model(build_vote(rec, self.gateway_id, now, self.names()), self.key).wire()
            return StoredAsk(s.ask_id, rec.state, rec, vote, s.evidence)

        after = self.store.update(ask_id, change)
        if changed and after.record is not None and after.vote is not None:  # `change` signed the vote it stored
            self.store.record_sent(ask_id, "vote", after.vote)
            self._bump()  # a re-signed deadline is a changed answer (HATP-MCP-40)
            for seat in after.record.seats:
                if seat.status == "asked":
                    self.store.record_sent(ask_id, "ask", after.record.ask.wire(), recipient=seat.human)
                    await self.notifier.notify(seat.human, self.store.contacts_for(seat.human), after.record.ask)
        self._changed.set()
        return await self.poll(txn_id, requirement_id)

    # -- people and questions --------------------------------------------------------------------------------

    async def decide(self, ask_id: str, proof: object, *, via: str = "inbox") -> StoredAsk:
        """A person approves, rejects, answers or declines, proven by their signed HumanDecisionProof (its wire
        form). Raises KeyError or HatpError (HATP-GW-19..26 for the proof, else the core's; nothing changes)."""
        if self.store.get(ask_id) is None:
            raise KeyError(ask_id)
        try:
            _s, newly = _apply_input(self.store, ask_id, proof, self.clock.now(), self.humans, via)
        finally:
            self._changed.set()
        after = await self._sync(ask_id)
        await self._tell(after, newly)
        return after

    async def decide_passkey(
        self, ask_id: str, assertion: PasskeyAssertion, rp: RelyingParty, last_count: int, *, via: str = "inbox"
    ) -> tuple[StoredAsk, int]:
        """A person decides with their passkey (HATP-GW-67..70): verified against their signed card and recorded,
        the nonce spent in the same write. Returns the ask and the credential's new sign count. Raises KeyError or
        HatpError (nothing changes)."""
        if self.store.get(ask_id) is None:
            raise KeyError(ask_id)
        now, counted, seen = self.clock.now(), [], _Seen()

        def change(s: StoredAsk, used: bool) -> StoredAsk:
            if s.record is None:
                raise HatpError(
                    "HATP-GW-11", f"ask {ask_id} was refused at routing; nothing to decide", code="ASK_CLOSED"
                )
            rec, count = apply_passkey(
                core.tick(s.record, now, self.names()),
                assertion,
                self.directory.card(assertion.human),
                rp,
                subject_digest=subject_digest(s.record.ask),
                now=now,
                nonce_used=used,
                last_count=last_count,
                via=via,
            )
            counted.append(count)
            return seen.of(s, s.with_record(rec))

        try:
            self.store.update_spending(ask_id, assertion.nonce, change)
        finally:
            self._changed.set()
        after = await self._sync(ask_id)
        await self._tell(after, seen.newly)
        return after, counted[-1]

    async def _drain(self, ask_id: str) -> None:
        """Verify and apply the proofs `hatp inbox` left for this ask; a refused one is recorded and never counts."""
        for left in self.store.proofs(ask_id, "submitted"):
            try:
                after, newly = _apply_input(
                    self.store, ask_id, left.proof, self.clock.now(), self.humans, "inbox", left.seq
                )
            except HatpError as exc:
                self.store.settle_proof(left.seq, "refused", exc.rule, exc.reason)
                continue
            except KeyError:
                self.store.settle_proof(left.seq, "refused", "HATP-GW-22", f"the gateway has no ask {ask_id!r}")
                continue
            await self._tell(after, newly)  # accepted in the write that counted it

    async def open_question(self, *, ask_id: str, kind: str, address: str, question: str, **kw: Any) -> StoredAsk:
        """Route a choose / form / text ask (see core.asks.open_question; `agent_request`: the verified request
        that proved the requester, kept with the ask). Raises HatpError."""
        existing = self.store.get(ask_id)
        if existing is not None:
            return await self._sync(ask_id)
        agent_request = kw.pop("agent_request", None)
        options = [o if isinstance(o, Option) else Option.model_validate(o) for o in kw.pop("options", None) or []]
        rec = core_asks.open_question(
            ask_id=ask_id,
            kind=kind,
            address=address,
            question=question,
            directory=self.directory,
            gateway=self.gateway_id,
            now=self.clock.now(),
            options=options,
            default_window=self.default_window,
            open_asks=self.open_asks(),
            **kw,
        )
        if agent_request is not None:
            rec = rec.model_copy(update={"agent_request": agent_request})
        fresh = StoredAsk(ask_id, rec.state, rec, None, None)
        if self.store.create(fresh, rec.ask.txn_id, None) is fresh:  # another process's ask: it told them
            await self._tell(fresh, newly_asked(None, rec))
        self._changed.set()
        return await self._sync(ask_id)

    async def ask_question(self, question: QuestionRequest) -> StoredAsk:
        """An agent's question over MCP (HATP-MCP-33): the requester is the person the agent's Directory-signed
        card names, proven by its signed request about exactly this question (subject `question`, HATP-GW-47/48),
        and the question is routed as an approval would be (the requester is never asked, HATP-GW-5). The same
        askId and question again answers the same ask; another question under a known askId is refused.

        Raises HatpError HATP-ASK-7 (an approval's id), HATP-GW-47/48 (the request), HATP-MCP-33 (ASK_MISMATCH, a
        past decideBy), HATP-ASK-1, HATP-ADDR-1..4, before anything is stored."""
        now = self.clock.now()
        check_question_id(question.ask_id)  # before the store is asked: an approval's id is never another question
        proven = verify_request(
            question.request, self.agents, subject="question", subject_digest=question_digest(question), now=now
        )
        existing = self.store.get(question.ask_id)
        if existing is not None:
            if existing.record is None or not _same_question(existing.record.ask, question, proven):
                raise HatpError(
                    "HATP-MCP-33",
                    f"ask {question.ask_id!r} is another question (or someone else's)",
                    path="$.askId",
                    code="ASK_MISMATCH",
                    fix="use a new askId for a new question",
                )
            return await self._sync(question.ask_id)
        deadline = parse_ts(question.decide_by) if question.decide_by is not None else None
        if deadline is not None and deadline <= now:
            raise HatpError(
                "HATP-MCP-33",
                f"decideBy {when_words(format_ts(deadline), now)} is already past",  # HATP-GW-97: read at once
                path="$.decideBy",
                fix="give the people time: a decideBy in the future, or none (the gateway's default window)",
            )
        return await self.open_question(
            ask_id=question.ask_id,
            kind=question.kind,
            address=question.address,
            question=question.question,
            options=list(question.options),
            form_schema=question.form_schema,
            max_length=question.max_length,
            decide_by=deadline,
            requester=proven,
            agent_request=verified_request(question.request),
        )

    async def ask_tool_call(
        self,
        *,
        server: str,
        tool: str,
        arguments: dict[str, Any],
        requirement: GateRequirement,
        request: object,
        requester: str | None = None,
        tool_digest: str | None = None,
        call_digest_seen: str | None = None,
    ) -> StoredAsk:
        """Route an approval of one tool call (core/gated_tools/gateway_routing.py), durable like a plan ask.
        Idempotent per call digest while that call's ask is pending; once it is closed (approved: its approval may
        already be spent; or rejected, expired, exhausted, withdrawn) an identical request opens a new ask
        (HATP-GATE-22). Once the humans decided, `evidence` is the signed Approval with subject tool-call.

        `request` is the agent's signed hatp.agent-request about this call's digest: the requester is the person
        the agent's Directory-signed card names (HATP-GW-49); `requester`, when the agent also states it, must be
        that person.

        Raises HatpError (HATP-ADDR-1..4, HATP-GATE-7, HATP-GATE-20, HATP-GATE-23, HATP-GW-47..49) before anything
        is stored, and HATP-ASK-7 when another kind of ask holds the call's ask id.
        """
        now = self.clock.now()
        digest = call_digest(expected_call(server, tool, arguments, requirement, tool_digest))
        proven = verify_request(request, self.agents, subject="tool-call", subject_digest=digest, now=now)
        if requester is not None and requester != proven:
            raise HatpError(
                "HATP-GW-49",
                f"the agent acts for {proven} (its Directory-signed card), not for {requester!r}",
                path="$.requester",
                fix="drop requester, or name the person the agent's card names",
                code="REQUESTER_NOT_PROVEN",
            )
        requester = proven
        args: dict[str, Any] = {
            "server": server,
            "tool": tool,
            "arguments": arguments,
            "requirement": requirement,
            "tool_digest": tool_digest,
            "requester": requester,
            "directory": self.directory,
            "gateway": self.gateway_id,
            "call_digest_seen": call_digest_seen,
            "open_asks": self.open_asks(),
        }
        rec, call = open_tool_call_ask(**args, now=self.clock.now())
        digest = call_digest(call)
        round_ = 1
        while self.store.get(tool_call_ask_id(digest, round_)) is not None:
            current = await self._sync(tool_call_ask_id(digest, round_))  # time applied: it may have expired
            if current.record is not None and current.record.tool_call is None:
                raise _not_an_approval(current.ask_id)  # a store written before HATP-ASK-7: never read as the call's
            if current.state == core.AskState.PENDING.value:
                return current
            round_ += 1
        if round_ > 1:
            rec, call = open_tool_call_ask(**args, now=self.clock.now(), round_=round_)
        rec = rec.model_copy(update={"tool_call": call, "agent_request": verified_request(request)})
        stored = StoredAsk(rec.ask.ask_id, rec.state, rec, None, None)
        if self.store.create(stored) is stored:
            await self._tell(stored, newly_asked(None, rec))
        self._changed.set()
        return await self._sync(rec.ask.ask_id)

    async def current(self, ask_id: str) -> StoredAsk:
        """An ask as it stands now (time applied, outcome signed). Raises KeyError for an unknown ask."""
        return await self._sync(ask_id)

    async def watch(self, ask_id: str, seconds: float) -> StoredAsk:
        """HATP-MCP-40, the long poll: the ask as `current` gives it, at once when it is decided, else once its
        signed answer (vote or evidence) differs from the one it had when the wait began, or after `seconds` (real
        time: a transport bound, not a protocol deadline; the ask's own deadlines run on the gateway's Clock and end
        the wait by changing the answer). A decision made in this process wakes it at once; one `hatp inbox` left
        in the store, within `proof_poll`. Raises KeyError for an unknown ask, before waiting."""
        first = await self._sync(ask_id)
        if first.evidence is not None or (first.vote is not None and first.vote.get("decision") != "pending"):
            return first  # decided (or refused at routing): it will not change, so there is nothing to wait for
        with anyio.move_on_after(seconds):
            while True:
                moved = self._moved
                latest = self.store.get(ask_id)
                if latest is None or latest.vote != first.vote or latest.evidence != first.evidence:
                    break
                await moved.wait()
        return await self._sync(ask_id)

    async def wait(self, txn_id: str, requirement_id: str, seconds: float) -> ApproverAnswer:
        """The Approver's long poll (runtime/interfaces.py WatchingApprover): `watch` on a plan ask."""
        return self._answer(await self.watch(approval_ask_id(txn_id, requirement_id), seconds))

    def next_change(self) -> anyio.Event:
        """An event set at the next write to any ask (the delivery loop waits on it)."""
        return self._moved

    async def unreachable(self, ask_id: str, human: str, detail: str) -> StoredAsk:
        """HATP-GW-61: no channel reached `human`; they are excluded and the next person is asked (and told).
        An ask that closed meanwhile, or a person no longer asked, is left as it is. Raises KeyError."""
        if self.store.get(ask_id) is None:
            raise KeyError(ask_id)
        now, seen, names = self.clock.now(), _Seen(), self.names()
        self.store.update(
            ask_id,
            lambda s: (
                seen.of(s, s.with_record(core.unreachable(s.record, human, now, detail, names))) if s.record else s
            ),
        )
        after = await self._sync(ask_id)
        self._bump()
        await self._tell(after, seen.newly)
        self._changed.set()  # the timers: a new person asked has an SLA
        return after

    def _bump(self) -> None:
        moved, self._moved = self._moved, anyio.Event()
        moved.set()

    # -- timers ----------------------------------------------------------------------------------------------

    async def run(self, *, task_status: TaskStatus[None] = anyio.TASK_STATUS_IGNORED) -> None:
        """Arm SLA and deadline timers for every pending ask (also those found after a restart) and land the proofs
        `hatp inbox` leaves in the store within `proof_poll` (HATP-GW-40), without waiting for anyone to poll;
        runs forever. Started once its first round is done: every timer due at start is applied (here or by
        another process sharing the store, HATP-GW-76)."""
        wake: datetime | None = None
        scan = True
        started = False
        while True:
            self._changed = anyio.Event()
            if await self._land_left_proofs():
                scan = True  # a decision may have escalated or closed an ask: its timers change
            if scan or (wake is not None and wake <= self.clock.now()):
                wake = await self.fire_due()
            if not started:
                started = True
                task_status.started()
            tick = self.clock.now() + self.proof_poll
            scan = await self._wait(tick if wake is None else min(wake, tick))

    async def _land_left_proofs(self) -> bool:
        """Verify and apply every proof waiting in the store (settled accepted or refused); True if there were any."""
        ask_ids = self.store.asks_with_proofs("submitted")
        for ask_id in ask_ids:
            try:
                await self._sync(ask_id)
            except KeyError:  # a proof for an ask this gateway never made: refuse it, never count it
                await self._drain(ask_id)
        return bool(ask_ids)

    async def fire_due(self) -> datetime | None:
        """Let time pass on every pending ask whose timer is due; return the earliest timer still ahead. An ask
        another process applied meanwhile is found no longer due inside the write (HATP-GW-76): nothing is done
        twice."""
        wake: datetime | None = None
        for s in self.store.asks(core.AskState.PENDING.value):
            if s.record is None:
                continue
            w = core.next_wakeup(s.record)
            if w is not None and w <= self.clock.now():
                after = await self._sync(s.ask_id)
                w = core.next_wakeup(after.record) if after.record is not None else None
                if w is not None and w <= self.clock.now():
                    w = None  # nothing more this instant; a change wakes the loop
            if w is not None and (wake is None or w < wake):
                wake = w
        return wake

    async def _wait(self, until: datetime) -> bool:
        """Wait until `until` or a change made in this process; True if it was a change."""
        changed = self._changed
        async with anyio.create_task_group() as tg:

            async def sleeper() -> None:
                await self.clock.sleep_until(until)
                tg.cancel_scope.cancel()

            async def watcher() -> None:
                await changed.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(sleeper)
            tg.start_soon(watcher)
        return changed.is_set()

    # -- internals -------------------------------------------------------------------------------------------

    async def _sync(self, ask_id: str) -> StoredAsk:
        """Apply the proofs left in the store, let time pass on the ask, then (persisting before answering) sign
        what changed. One write (HATP-GW-76): the timers applied are recorded under this process's owner id, and
        the messages it sends (a re-signed vote, the evidence, the ask to everyone it newly asked) are kept in the
        outbox with it; whoever it newly asked is then told, by this process only."""
        if self.store.get(ask_id) is not None:
            await self._drain(ask_id)
        now = self.clock.now()

        def change(s: StoredAsk) -> Write:
            if s.record is None:
                return Write(s)
            was, rec = s.record, core.tick(s.record, now, self.names())
            s = s.with_record(rec)
            vote = s.vote
            if rec.ask.kind == "approve" and rec.tool_call is None:
                fresh = build_vote(rec, self.gateway_id, now, self.names())
                if vote is None or vote.get("decision") != fresh.decision:
                    vote = sign_model(fresh, self.key).wire()
            evidence = s.evidence
            if evidence is None:
                built = (
                    build_tool_call_approval(rec, rec.tool_call, gateway=self.gateway_id, nonce=self._nonce(), now=now)
                    if rec.tool_call is not None
                    else build_approval(rec, self.gateway_id, self._nonce(), now)
                    if rec.ask.kind == "approve"
                    else build_answer(rec, self.gateway_id, self._nonce(), now)
                )
                evidence = sign_model(built, self.key).wire() if built is not None else None
            sent: list[Sent] = []
            if vote is not None and vote != s.vote:
                sent.append(Sent("vote", vote))
            if evidence is not None and evidence != s.evidence:
                sent.append(Sent(str(evidence.get("type")), evidence))
            sent += [Sent("ask", rec.ask.wire(), human) for human in newly_asked(was, rec)]
            steps = _timers_due(was, now, self.owner) if rec != was else ()
            return Write(StoredAsk(s.ask_id, s.state, rec, vote, evidence), tuple(sent), steps)

        done = self.store.write(ask_id, change)
        after = done.stored
        if any(m.kind != "ask" for m in done.sent):
            self._bump()
        for m in done.sent:
            if m.kind == "ask" and m.recipient is not None and after.record is not None:
                await self.notifier.notify(m.recipient, self.store.contacts_for(m.recipient), after.record.ask)
        return after

    async def _tell(self, stored: StoredAsk, humans: list[str]) -> None:
        """Tell each of `humans`, whom a write of this process newly asked (HATP-GW-77), that the ask waits."""
        if stored.record is None:
            return
        for human in humans:
            self.store.record_sent(stored.ask_id, "ask", stored.record.ask.wire(), recipient=human)
            await self.notifier.notify(human, self.store.contacts_for(human), stored.record.ask)


def _timers_due(rec: AskRecord, now: datetime, owner: str) -> tuple[TimerStep, ...]:
    """The timers of `rec` (as stored) that are due at `now`: each asked person's SLA, the deadline."""
    taken = format_ts(now)
    steps = [
        TimerStep(rec.ask.ask_id, f"sla {s.human}", s.due_at, owner, taken)
        for s in rec.seats
        if s.status == "asked" and s.due_at is not None and parse_ts(s.due_at) <= now
    ]
    if core.state_of(rec) is core.AskState.PENDING and parse_ts(rec.ask.decide_by) <= now:
        steps.append(TimerStep(rec.ask.ask_id, "deadline", rec.ask.decide_by, owner, taken))
    return tuple(steps)
