"""The coordinator's transaction state machine, pure: `handle(event, now) -> [commands]`.

States are `TxnState`; `TRANSITIONS` lists, per state, the events it accepts and the states they may lead to.
An event the table does not allow raises HatpError HATP-TXN-13 and leaves the machine unchanged; so does any
error while handling (the machine's data is restored). The driver (hatp_mcp/runtime/coordinator.py) persists
`Record` / `Decide` commands before it sends anything of the same batch. No IO, no clock: `now` is passed in.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field, fields
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.evidence.keys import Keyring
from hatp_mcp.core.humans.proof import HumanKeys
from hatp_mcp.core.model.amount import with_tolerance
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.txn.deadlines import Deadlines
from hatp_mcp.core.txn.events import (
    ApproverReply,
    Ask,
    CallFailed,
    Command,
    Event,
    PrepareAnswer,
    ReceiptAnswer,
    Record,
    SendPrepare,
    Start,
    TxnState,
)
from hatp_mcp.core.txn.evidence import check_approver_answer, check_branch_receipt, check_branch_vote
from hatp_mcp.core.txn.terms import TermsMixin
from hatp_mcp.core.txn.timing import Timing, choose_mode, commit_order, timing
from hatp_mcp.errors import HatpError

__all__ = ["TRANSITIONS", "Config", "Coordinator", "Validator", "transition_table"]

Validator = Callable[[Plan, datetime], Sequence[Any]]
T = TxnState
_DECIDING = frozenset({T.QUOTING, T.PREPARING, T.APPROVING})
_ALL_LIVE = frozenset({T.QUOTING, T.PREPARING, T.APPROVING, T.COMMITTING, T.IN_DOUBT, T.ABORTING})
_ENDS = frozenset({T.COMMITTED, T.ABORTED, T.NEEDS_RECOVERY})
_EVENTS = ("prepared", "receipt", "failed", "approver", "timer")
TRANSITIONS: dict[TxnState, dict[str, frozenset[TxnState]]] = {
    T.NEW: {"start": frozenset({T.QUOTING, T.PREPARING, T.COMMITTING, T.ABORTING}) | _ENDS},
    **{s: dict.fromkeys(_EVENTS, _DECIDING | {T.COMMITTING, T.ABORTING, T.ABORTED}) for s in _DECIDING},
    T.COMMITTING: dict.fromkeys(_EVENTS, frozenset({T.COMMITTING, T.IN_DOUBT, T.ABORTING}) | _ENDS),
    T.IN_DOUBT: dict.fromkeys(
        ("receipt", "failed", "timer"), frozenset({T.IN_DOUBT, T.COMMITTING, T.ABORTING}) | _ENDS
    ),
    T.ABORTING: dict.fromkeys(_EVENTS, frozenset({T.ABORTING, T.ABORTED, T.NEEDS_RECOVERY})),
}


def transition_table() -> str:
    """The Markdown table of spec/coordinator.md section 5, generated from TRANSITIONS (a test compares them)."""
    order = list(TxnState)
    rows = ["| state | accepts | may lead to |", "|---|---|---|"]
    for state in order:
        accepts = TRANSITIONS.get(state, {})
        targets = sorted({t for ts in accepts.values() for t in ts}, key=order.index)
        rows.append(f"| {state.value} | {', '.join(accepts) or 'nothing'} | {', '.join(t.value for t in targets)} |")
    return "\n".join(rows)


@dataclass(frozen=True, slots=True)
class Config:
    coordinator: str = "coordinator://localhost"
    # The keys on the organisation's Directory-signed cards. With them, every human decision in an approval must
    # carry that person's own proof (HATP-TXN-19); without them the record says the proofs were not checked.
    humans: HumanKeys | None = None
    poll_seconds: int = 30  # how often a pending approval is polled
    renew_before_seconds: int = 60  # renew a lease this long before it ends
    retry_seconds: int = 30  # retry an in-doubt commit (or a failed undo) this often


@dataclass
class _Data:
    votes: dict[str, str] = field(default_factory=dict)  # branchId -> yes | no | quoted
    preconditions: dict[str, dict[str, Any]] = field(default_factory=dict)
    leases: dict[str, datetime] = field(default_factory=dict)
    horizons: dict[str, datetime] = field(default_factory=dict)
    valid_until: dict[str, datetime] = field(default_factory=dict)
    inflight: set[str] = field(default_factory=set)  # branchIds with a phase-1 call out
    quoting: set[str] = field(default_factory=set)  # branchIds asked for a quote (not a prepare)
    pending_phase: dict[str, str] = field(default_factory=dict)  # participants that voted pending: what was asked
    approvals: dict[str, str] = field(default_factory=dict)  # requirementId -> asked | pending | yes | no
    asked: bool = False
    deadline: datetime | None = None
    committed: dict[str, str | None] = field(default_factory=dict)  # branchId -> undo token
    lapsed: set[str] = field(default_factory=set)
    lost: set[str] = field(default_factory=set)
    undone: set[str] = field(default_factory=set)
    no_renew: set[str] = field(default_factory=set)
    renewing: set[str] = field(default_factory=set)
    abort_queue: list[tuple[str, str]] = field(default_factory=list)  # (phase, branchId)
    undo_failed: list[str] = field(default_factory=list)
    timers: dict[str, datetime] = field(default_factory=dict)
    step: str | None = None  # the phase-2 branch whose call is out
    holds_out: set[str] = field(default_factory=set)  # holds whose commits are out together, after the final
    holds_refused: list[str] = field(default_factory=list)  # of those, the ones whose commit was refused
    doubt: str | None = None
    escalated: bool = False
    decision: str | None = None
    gw_deadline: dict[str, datetime] = field(default_factory=dict)  # requirementId -> the gateway's signed decideBy
    terms_sent: dict[str, ApprovalTerms] = field(default_factory=dict)  # the last terms sent with tighten
    terms: dict[str, ApprovalTerms] = field(default_factory=dict)  # the terms the gateway accepted (HATP-MODE-8)

    def copy(self) -> _Data:
        """A snapshot to restore on error: containers copied (their items are immutable or never changed)."""
        snapshot = object.__new__(_Data)
        values = dict(self.__dict__)
        for name in _CONTAINERS:  # taken once per event: the known container fields, no per-value type test
            values[name] = values[name].copy()
        snapshot.__dict__.update(values)
        return snapshot


_CONTAINERS = tuple(f.name for f in fields(_Data) if f.default_factory is not MISSING)


class Coordinator(Deadlines, TermsMixin):
    """One transaction. Build with `begin` (a new plan) or `recover` (from its logged record and decision)."""

    def __init__(self, plan: Plan, mode: str, timing: Timing, keyring: Keyring, config: Config) -> None:
        self.plan = plan
        self.plan_digest = plan.digest()
        self.mode = mode
        self.timing = timing
        self.keyring = keyring
        self.config = config
        self.state = TxnState.NEW
        self._d = _Data()
        self._branches = {b.branch_id: b for b in plan.branches}
        self._order = commit_order(plan)
        self._recovering: str | None = None
        self._abort_request: dict[str, Any] | None = None  # the agent's, when it made a replacement finish
        self.validated = False

    # -- construction -------------------------------------------------------------------------------------
    @classmethod
    def begin(
        cls,
        plan: Plan,
        now: datetime,
        keyring: Keyring,
        validator: Validator | None = None,
        config: Config | None = None,
        estimates: Mapping[str, int | None] | None = None,
    ) -> Coordinator:
        """`estimates`: the gateway's signed worstSeconds per requirement (HATP-MODE-5; see choose_mode).

        Raises HatpError HATP-TXN-1 (the plan is invalid) or HATP-MODE-1 / 2 / 6 (no mode fits)."""
        violations = list(validator(plan, now)) if validator is not None else []
        if violations:
            first = violations[0]
            raise HatpError(
                "HATP-TXN-1",
                f"the plan is invalid: {len(violations)} violation(s), first {getattr(first, 'rule', '?')}: "
                f"{getattr(first, 'message', None) or getattr(first, 'reason', first)}",
                path=str(getattr(first, "path", "$")),
                code="PLAN_INVALID",
                fix="fix the violations (hatp validate) and begin again",
                data={"violations": [_violation(v) for v in violations]},
            )
        mode, t = choose_mode(plan, now, estimates)
        c = cls(plan, mode, t, keyring, config or Config())
        c.validated = validator is not None
        return c

    def choose_with(self, estimates: Mapping[str, int | None], now: datetime) -> None:
        """Before Start: choose the mode again with the gateway's estimates (HATP-MODE-5/6; see choose_mode).
        Raises HatpError HATP-MODE-1 / 2 / 6 and leaves the machine as it was."""
        if self.state is not TxnState.NEW:
            raise HatpError("HATP-TXN-13", "the mode is chosen before the transaction starts", code="ILLEGAL_EVENT")
        self.mode, self.timing = choose_mode(self.plan, now, estimates)

    def use_mode(self, mode: str, timing: Timing) -> None:
        """Before Start: run in `mode`, chosen again by the clock with the participants' durations (HATP-MODE-9)."""
        if self.state is not TxnState.NEW:
            raise HatpError("HATP-TXN-13", "the mode is chosen before the transaction starts", code="ILLEGAL_EVENT")
        if mode not in timing.fits:
            raise ValueError(f"mode {mode} is not among those that fit: {timing.fits}")
        self.mode, self.timing = mode, timing

    @classmethod
    def recover(
        cls,
        plan: Plan,
        events: Sequence[Mapping[str, Any]],
        decision: str | None,
        keyring: Keyring,
        config: Config | None = None,
        abort_request: Mapping[str, Any] | None = None,
    ) -> Coordinator:
        """A replacement coordinator: rebuild what the record says happened; `start` then finishes the job.

        `abort_request` (`{"reason", "by"}`) is the agent's request to abort that stopped the old run: without a
        logged decision the replacement records it (`abort.requested`, HATP-TXN-18) and aborts for it."""
        begin = events[0].get("body", {}) if events else {}
        mode = str(begin.get("mode", plan.mode if plan.mode != "auto" else "parallel"))
        c = cls(plan, mode, timing(plan, parse_ts(plan.created_at)), keyring, config or Config())
        for ev in events:
            c._replay(ev)
        c._recovering = decision or "presumed-abort"
        c._abort_request = dict(abort_request) if abort_request is not None and decision is None else None
        c._d.decision = decision
        return c

    def _replay(self, ev: Mapping[str, Any]) -> None:
        evidence = ev.get("evidence") or {}
        body = ev.get("body") or {}
        b = body.get("branchId")
        if ev.get("event") == "approval.terms" and isinstance(body.get("terms"), dict):
            self._d.terms[str(body.get("requirementId"))] = ApprovalTerms.model_validate(body["terms"])
        if evidence.get("type") == "hatp.vote" and b in self._branches:
            self._d.votes[b] = evidence.get("decision", "no")
        if evidence.get("type") == "hatp.vote" and b in {r.id for r in self.plan.approvals}:
            self._d.approvals[b] = evidence.get("decision", "no")
        if evidence.get("type") == "hatp.receipt" and b in self._branches and evidence.get("outcome") == "ok":
            phase = evidence.get("phase")
            if phase == "prepare":
                self._d.preconditions[b] = evidence.get("preconditions") or {}
            if phase in ("prepare", "renew") and evidence.get("leaseExpiresAt"):
                self._d.leases[b] = parse_ts(evidence["leaseExpiresAt"])
                self._d.horizons[b] = parse_ts(evidence.get("holdHorizon") or evidence["leaseExpiresAt"])
            if phase == "commit":
                self._d.committed[b] = evidence.get("undoToken")
            if phase in ("abort", "compensate"):
                self._d.undone.add(b)

    # -- the one entry point ------------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.state in _ENDS

    def handle(self, event: Event, now: datetime) -> list[Command]:
        """Feed one event. Raises HatpError HATP-TXN-13 for an event the state does not accept (state unchanged)."""
        allowed = TRANSITIONS.get(self.state, {}).get(event.kind)
        if allowed is None:
            raise HatpError(
                "HATP-TXN-13",
                f"event {event.kind!r} is not allowed in state {self.state.value!r}",
                code="ILLEGAL_EVENT",
            )
        saved_state, saved = self.state, self._d.copy()
        try:
            out = self._dispatch(event, now)
            if self.state not in allowed and self.state is not saved_state:
                raise HatpError(
                    "HATP-TXN-13",
                    f"{event.kind!r} may not lead from {saved_state.value!r} to {self.state.value!r}",
                    code="ILLEGAL_TRANSITION",
                )
        except BaseException:
            self.state, self._d = saved_state, saved
            raise
        return out

    def _dispatch(self, event: Event, now: datetime) -> list[Command]:
        if isinstance(event, Start):
            return self._start(now)
        if isinstance(event, PrepareAnswer):
            return self._on_prepared(event, now)
        if isinstance(event, ReceiptAnswer):
            return self._on_receipt(event, now)
        if isinstance(event, CallFailed):
            return self._on_failed(event, now)
        if isinstance(event, ApproverReply):
            return self._on_approver(event, now)
        return self._on_timer(event, now)

    # -- phase 1 ------------------------------------------------------------------------------------------
    def _start(self, now: datetime) -> list[Command]:
        if self._recovering is not None:
            return self._start_recovered(now)
        out: list[Command] = [
            Record(
                event="txn.begin",
                body={
                    "mode": self.mode,
                    "requested": self.plan.mode,
                    "timing": self.timing.wire(),
                    "validated": self.validated,
                    "humanProofs": "checked" if self.config.humans is not None else "not-checked",
                },
            )
        ]
        quoting = self.mode == "approval-first"
        for b in self.plan.branches:
            quote = quoting and b.tier == "hold"
            out.append(SendPrepare(branch_id=b.branch_id, quote_only=quote))
            self._d.inflight.add(b.branch_id)
            if quote:
                self._d.quoting.add(b.branch_id)
        self.state = T.QUOTING if quoting else T.PREPARING
        if self.mode == "parallel":
            out += self._ask()
        out += self._set_deadline(now, None, "plan")
        return out

    def _ask(self, terms: ApprovalTerms | None = None) -> list[Command]:
        self._d.asked = True
        for r in self.plan.approvals:
            self._d.approvals[r.id] = "asked"
            if terms is not None:
                self._d.terms_sent[r.id] = terms
        return [Ask(requirement_id=r.id, terms=terms) for r in self.plan.approvals]

    def _on_prepared(self, ev: PrepareAnswer, now: datetime) -> list[Command]:
        b = self._branches.get(ev.branch_id)
        if b is None:
            raise HatpError("HATP-TXN-2", f"no branch {ev.branch_id!r} in this plan", code="BAD_EVIDENCE")
        self._d.inflight.discard(b.branch_id)
        asked = "quote" if b.branch_id in self._d.quoting else "prepare"
        self._d.quoting.discard(b.branch_id)
        try:
            vote = check_branch_vote(self.plan, self.plan_digest, b, ev.vote, self.keyring)
            receipt = check_branch_receipt(self.plan, self.plan_digest, b, ev.receipt, self.keyring, {asked})
        except HatpError as exc:
            return [self._refused(b.branch_id, exc), *self._abort_or_note(b.branch_id, exc.code, now)]
        if vote.decision == "pending" and self.state is not T.ABORTING:
            return self._participant_pending(b.branch_id, asked, vote, ev, now)
        out: list[Command] = [
            Record(event="vote", body={"branchId": b.branch_id}, evidence=ev.vote, author=b.participant),
            Record(event="receipt", body={"branchId": b.branch_id}, evidence=ev.receipt, author=b.participant),
        ]
        yes = vote.decision == "yes" and receipt.outcome == "ok"
        if yes and receipt.reported_cost is not None and b.amount is not None:
            bound = with_tolerance(b.amount, b.tolerance_percent)
            if receipt.reported_cost.currency != b.amount.currency or receipt.reported_cost.decimal > bound:
                out.append(
                    Record(
                        event="vote.refused",
                        body={"branchId": b.branch_id, "rule": "HATP-TXN-14", "code": "COST_UNDERSTATED"},
                    )
                )
                yes = False
        if self.state is T.ABORTING:  # a late answer: whatever it holds is released like the rest
            return out + self._queue_abort(b.branch_id, now)
        if not yes:
            self._d.votes[b.branch_id] = "no"
            return out + self._abort(now, vote.code or receipt.code or "VOTED_NO", f"{b.branch_id} voted no")
        if receipt.phase == "quote":
            self._d.votes[b.branch_id] = "quoted"
            if receipt.valid_until:
                self._d.valid_until[b.branch_id] = parse_ts(receipt.valid_until)
        else:
            self._d.votes[b.branch_id] = "yes"
            # as the signed receipt states them (just validated), the same form a replacement reads from the record
            self._d.preconditions[b.branch_id] = dict(ev.receipt.get("preconditions") or {})
            out += self._note_lease(b.branch_id, receipt, now)
            if b.branch_id in self._d.lost:
                self._d.lost.discard(b.branch_id)
                out.append(Record(event="hold.replaced", body={"branchId": b.branch_id, "askedHumanAgain": False}))
        if self.state is T.COMMITTING:
            self._d.renewing.discard(b.branch_id)
            return out + self._next_commit(now)
        return out + self._advance(now)

    def _advance(self, now: datetime) -> list[Command]:
        d = self._d
        if d.inflight or d.lost or any(d.votes.get(b) not in ("yes", "quoted") for b in self._branches):
            return []
        if self.state is T.QUOTING:
            self.state = T.APPROVING
            return self._ask()
        if self.state is T.PREPARING and self.mode == "holds-first" and not d.asked:
            self.state = T.APPROVING
            deadline = self._set_deadline(now, None, "holds")  # first: the human is asked under it (MODE-7)
            return [*self._ask(self._holds_terms()), *deadline]
        if any(d.approvals.get(r.id) != "yes" for r in self.plan.approvals):
            if self.state is T.PREPARING and d.asked:
                self.state = T.APPROVING
            return []
        if self.mode == "approval-first" and any(v == "quoted" for v in d.votes.values()):
            expiry = min(d.valid_until.values(), default=None)
            if expiry is None or now > expiry:
                return self._abort(now, "QUOTE_EXPIRED", "the approval came after the quotes expired (HATP-MODE-3)")
            self.state = T.PREPARING
            out: list[Command] = []
            for b, v in d.votes.items():
                if v == "quoted":
                    d.inflight.add(b)
                    out.append(SendPrepare(branch_id=b))
            return out
        return self._decide_commit(now)

    def _on_approver(self, ev: ApproverReply, now: datetime) -> list[Command]:
        rid = ev.requirement_id
        if rid not in {r.id for r in self.plan.approvals}:
            raise HatpError("HATP-TXN-3", f"no approval requirement {rid!r} in this plan", code="BAD_EVIDENCE")
        if self.state in (T.ABORTING, T.COMMITTING) or self._d.approvals.get(rid) in ("yes", "no"):
            return []
        try:
            vote, approval = check_approver_answer(
                self.plan, self.plan_digest, rid, ev.vote, ev.approval, self.keyring, now, self.config.humans
            )
            if vote.decision == "yes":
                self._check_terms(rid, approval, ev.terms)  # HATP-MODE-8
        except HatpError as exc:
            return [self._refused(rid, exc), *self._abort(now, exc.code, exc.reason)]
        gw = vote.voter
        out: list[Command] = self._terms_accepted(rid, ev.terms) if ev.terms is not None else []
        if vote.decision == "pending":
            decide_by = parse_ts(vote.decide_by or "")
            if self._d.approvals.get(rid) != "pending":
                out.append(Record(event="vote", body={"branchId": rid}, evidence=ev.vote, author=gw))
            self._d.approvals[rid] = "pending"
            self._d.gw_deadline[rid] = decide_by
            out += self._set_deadline(now, decide_by, "approver")
            out += self._tighten(now)  # HATP-MODE-7
            poll_at = now + timedelta(seconds=self.config.poll_seconds)
            return out + self._arm(f"poll:{rid}", poll_at)
        out.append(Record(event="vote", body={"branchId": rid}, evidence=ev.vote, author=gw))
        if ev.approval is not None:
            out.append(Record(event="approval", body={"requirementId": rid}, evidence=ev.approval, author=gw))
        if vote.decision == "no":
            self._d.approvals[rid] = "no"
            return out + self._abort(now, "APPROVAL_REJECTED", f"the approver of {rid} said no")
        self._d.approvals[rid] = "yes"
        return out + self._advance(now)

    # -- deadlines, leases, renewals ----------------------------------------------------------------------
    def _abort_or_note(self, branch_id: str, code: str, now: datetime) -> list[Command]:
        """Evidence we cannot count: the branch may hold something, so it is released like any other."""
        self._d.votes[branch_id] = "unknown"
        if self.state is T.ABORTING:
            return self._queue_abort(branch_id, now)
        return self._abort(now, code, f"{branch_id} sent evidence that cannot be counted")


def _violation(v: Any) -> dict[str, Any]:
    if hasattr(v, "to_dict"):
        out = v.to_dict()
        if isinstance(out, dict):
            return out
    return {"rule": str(getattr(v, "rule", "?")), "path": str(getattr(v, "path", "$")), "reason": str(v)}
