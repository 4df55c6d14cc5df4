"""The coordinator driver: feeds events to the pure state machine and carries out its commands.

Data flows one way: an answer arrives -> `Coordinator.handle` decides -> the driver appends every record event
and decision of that batch to the durable log (one group-committed write) -> only then does it send; where HATP-TXN-4
lets records wait, they join the next forced write instead (hatp_mcp/runtime/coordinator/log_writes.py). Deadlines are
absolute times armed on the Clock; every participant call is bounded by its branch's `maxDurationSeconds`. A replacement
coordinator calls `recover` (or `recover_all`) and continues the same hash chain. Protocol decisions do not belong here:
they live in hatp_mcp/core/txn/machine.py.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import anyio

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.estimate import OperationBounds
from hatp_mcp.core.model.evidence import Preconditions, RecordHead
from hatp_mcp.core.model.messages import (
    AbortRequest,
    CommitRequest,
    CompensateRequest,
    PrepareRequest,
    RenewRequest,
)
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.record import DECIDED_EVENT
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.core.txn.anchors import off_record
from hatp_mcp.core.txn.events import (
    ApproverReply,
    Arm,
    Ask,
    CallFailed,
    Command,
    Decide,
    Escalate,
    Event,
    Finish,
    Outcome,
    Poll,
    PrepareAnswer,
    ReceiptAnswer,
    Record,
    SendAbort,
    SendCommit,
    SendCompensate,
    SendPrepare,
    SendRenew,
    Start,
    Tighten,
    TxnState,
    Withdraw,
)
from hatp_mcp.core.txn.machine import Config, Coordinator, Validator
from hatp_mcp.core.txn.outcome import justify
from hatp_mcp.core.txn.participant_fit import check_participant_bounds
from hatp_mcp.core.txn.record import RecordChain
from hatp_mcp.core.validate.validator import validate as validate_plan
from hatp_mcp.errors import HatpError, TransportFailed
from hatp_mcp.runtime.clock import Clock, SystemClock
from hatp_mcp.runtime.coordinator.alarms import Alarms, alarms_for
from hatp_mcp.runtime.coordinator.calls import Children
from hatp_mcp.runtime.coordinator.log_writes import TxnWrites
from hatp_mcp.runtime.coordinator.plan_locks import PlanLocks
from hatp_mcp.runtime.interfaces import Approver, Participant
from hatp_mcp.store.txn_log import LogEntry, TxnLog

__all__ = [
    "WATCH_SECONDS",
    "BoundsAsker",
    "CoordinatorRuntime",
    "OnDecided",
    "TxnResult",
    "UnjustifiedOutcome",
    "default_validator",
]

# How long each long poll on a pending approval asks the gateway to hold (HATP-MCP-40); under its 25 s cap.
WATCH_SECONDS = 20.0

R = TypeVar("R")
EscalateHook = Callable[[str, str, str], Coroutine[Any, Any, None]]  # (txnId, to, reason)
# Called once per run when the outcome can no longer change and the record says so durably: `outcome.decided`
# (HATP-TXN-25) or the closed record, whichever comes first.
OnDecided = Callable[[Outcome], None]
BoundsAsker = Callable[[str, Plan, str], Awaitable[OperationBounds]]  # (participant, plan, branchId): HATP-MCP-19
# A BoundsAsker may also have `known(participant, plan, branchId) -> OperationBounds | None`: the answer it already
# holds (the same one a call would return), with no call and no task; None (or a failure) and the branch is asked.


def _decision_event(chain: RecordChain) -> dict[str, Any] | None:
    """The record's latest `decision` event (durable before any commit is sent, HATP-TXN-4)."""
    for event in reversed(chain.events):
        if event.get("event") == "decision":
            found: dict[str, Any] = event
            return found
    return None


def _vote_digest(chain: RecordChain, branch_id: str) -> str | None:
    """The digest of the branch's latest recorded yes vote (a hold lost and prepared again votes anew)."""
    for event in reversed(chain.events):
        evidence = event.get("evidence")
        if event.get("event") == "vote" and (event.get("body") or {}).get("branchId") == branch_id:
            return digest(evidence) if isinstance(evidence, dict) and evidence.get("decision") == "yes" else None
    return None


def _unforked(chain: RecordChain, event: Event) -> Event:
    """A prepare answer whose vote or receipt was signed at a head that is not this record's (HATP-REC-20) is no
    answer to this record: a failed call. It comes from a begin lost before its fsync (a power loss, HATP-TXN-27)
    and sent again: the participant answers with what it signed for the lost record (HATP-PART-6)."""
    if not isinstance(event, PrepareAnswer):
        return event
    for evidence in (event.vote, event.receipt):
        reason = off_record(evidence, chain.digest_at)
        if reason is not None:
            return CallFailed(branch_id=event.branch_id, phase="prepare", reason=reason)
    return event


def default_validator() -> Validator:
    """The static plan validator every begin runs (hatp_mcp.core.validate.validator.validate). Imported directly:
    a validator that fails to import stops the process; transactions never run unvalidated."""
    return validate_plan


@dataclass(frozen=True)
class TxnResult:
    txn_id: str
    outcome: Outcome
    state: TxnState
    record: dict[str, Any]


class _CallTimeout(Exception):
    pass


class UnjustifiedOutcome(Exception):
    """HATP-REC-17: the machine finished with an outcome its own record does not justify (a bug, or a machine
    that was tampered with). The record is not closed: a `close.refused` event names the problems, nothing more is
    sent, and the transaction stays unfinished in the log for an operator to look at."""

    def __init__(self, txn_id: str, outcome: Outcome, problems: list[dict[str, Any]]) -> None:
        first = problems[0] if problems else {}
        super().__init__(
            f"{txn_id}: refused to close the record {outcome.value}: {len(problems)} problem(s), first "
            f"{first.get('rule')}: {first.get('reason')}"
        )
        self.txn_id = txn_id
        self.outcome = outcome
        self.problems = problems


class CoordinatorRuntime:
    """Runs transactions against in-memory or remote participants and an approver."""

    def __init__(
        self,
        *,
        key: SigningKey,
        keyring: Keyring,
        participants: Mapping[str, Participant],
        approver: Approver | None,
        log: TxnLog,
        clock: Clock,
        config: Config | None = None,
        validator: Validator | None = None,
        on_escalate: EscalateHook | None = None,
        unbounded_call_seconds: float = 300.0,
        keep_trace: bool = False,
        bounds: BoundsAsker | None = None,
        watch_seconds: float = WATCH_SECONDS,
    ) -> None:
        self._key = key
        self.keyring = keyring
        self._participants = participants
        self._approver = approver
        self._log = log
        self._clock = clock
        self.config = config or Config()
        self._validator = validator if validator is not None else default_validator()  # begin always validates
        self._on_escalate = on_escalate
        self._unbounded = unbounded_call_seconds
        self._keep_trace = keep_trace
        self._bounds = bounds  # asks each participant's hatp/txn/estimate at begin (HATP-MODE-9); None: not asked
        self.trace: list[tuple[str, Command]] = []  # (txnId, command) when keep_trace: tests look at what was sent
        self._watch_seconds = watch_seconds  # 0: no long poll, the approval is polled only
        self._watching: set[tuple[str, str]] = set()  # (txnId, requirementId) with a long poll out
        self._locks = PlanLocks()  # the fencing tokens of branches that name `locks` (HATP-LOCK-7..9)

    async def run(self, plan: Plan, on_decided: OnDecided | None = None) -> TxnResult:
        """Begin and drive one transaction to its end; `on_decided` is told the outcome as soon as it is decided
        (HATP-TXN-25), which may be before the end. Raises HatpError when begin refuses the plan."""
        machine = Coordinator.begin(plan, self._clock.now(), self.keyring, self._validator, self.config)
        estimates = await self._estimates(plan)  # only for a valid plan: an invalid one calls nobody
        if estimates is not None:  # the mode again, with the gateway's worst case (HATP-MODE-5/6)
            machine.choose_with(estimates, self._clock.now())
        if self._bounds is not None:  # what each participant says it gives, against what the plan assumes
            offered = await self._participant_bounds(plan, self._bounds)
            again = check_participant_bounds(plan, machine.mode, offered, self._clock.now(), estimates)
            if again is not None:  # auto: the clock chose again with the participants' durations (HATP-MODE-9)
                machine.use_mode(*again)
        chain = RecordChain(plan, self._key, self.config.coordinator, plan_digest=machine.plan_digest)
        return await self._drive(machine, chain, [LogEntry("plan", plan.wire())], on_decided)

    async def _estimates(self, plan: Plan) -> dict[str, int | None] | None:
        """HATP-MODE-5: the gateway's signed worst case for each approval requirement, before begin chooses the
        mode. An approver that cannot estimate (fails or refuses) gives None: unbounded."""
        if self._approver is None or not plan.approvals:
            return None
        out: dict[str, int | None] = {}
        for req in plan.approvals:
            try:
                out[req.id] = (await self._approver.estimate(plan, req.id)).worst_seconds
            except Exception:  # no estimate is an unbounded one (fail closed); cancellation still passes
                out[req.id] = None
        return out

    @staticmethod
    async def _participant_bounds(plan: Plan, ask: BoundsAsker) -> dict[str, OperationBounds]:
        """HATP-MODE-9: every branch's bounds, what the asker already holds first (`known`: no task), the rest asked
        in parallel (one call per branch). A failed call leaves the branch out, which check_participant_bounds
        refuses (fail closed); cancellation still passes."""
        out: dict[str, OperationBounds] = {}
        known = getattr(ask, "known", None)
        missing: list[tuple[str, str]] = []
        for b in plan.branches:
            try:
                held = known(b.participant, plan, b.branch_id) if known is not None else None
            except Exception:  # not held after all: asked like any other branch
                held = None
            if held is not None:
                out[b.branch_id] = held
            else:
                missing.append((b.participant, b.branch_id))

        async def one(participant: str, branch_id: str) -> None:
            try:
                out[branch_id] = await ask(participant, plan, branch_id)
            except Exception:
                return

        if missing:
            await asyncio.gather(*(one(participant, branch_id) for participant, branch_id in missing))  # never raises
        return out

    async def recover(self, txn_id: str, abort_request: Mapping[str, Any] | None = None) -> TxnResult:
        """Finish a transaction a stopped coordinator left open; `abort_request` (`{"reason", "by"}`) when the agent
        asked to abort it (see Coordinator.recover). Raises KeyError when the log does not know it."""
        logged = await self._log.load(txn_id)
        if logged is None:
            raise KeyError(txn_id)
        plan = Plan.model_validate(logged.plan)
        if not logged.closed:  # the machine digests the plan once; the chain reuses it
            machine = Coordinator.recover(
                plan, logged.events, logged.decision, self.keyring, self.config, abort_request
            )
            chain = RecordChain(plan, self._key, self.config.coordinator, logged.events, machine.plan_digest)
            return await self._drive(machine, chain, [])
        chain = RecordChain(plan, self._key, self.config.coordinator, logged.events)
        outcome = Outcome(logged.events[-1]["body"]["outcome"])
        state = {Outcome.COMMITTED: TxnState.COMMITTED, Outcome.ABORTED: TxnState.ABORTED}.get(
            outcome, TxnState.NEEDS_RECOVERY
        )
        return TxnResult(txn_id, outcome, state, chain.record())

    async def recover_all(self) -> list[TxnResult]:
        return [await self.recover(t) for t in await self._log.unfinished()]

    # -- the loop -----------------------------------------------------------------------------------------
    async def _drive(
        self, machine: Coordinator, chain: RecordChain, first: list[LogEntry], on_decided: OnDecided | None = None
    ) -> TxnResult:
        children: Children[Event] = Children()
        outcome = Outcome.ABORTED
        alarms = alarms_for(self._clock, children)
        log = TxnWrites(self._log, machine.plan.txn_id, first)
        try:
            pending: list[Event] = [Start()]
            while not machine.done:
                if not pending and log.deferred and not log.calls and not children.waiting:
                    # no participant call in flight: nothing is worth waiting for (HATP-TXN-4), and nothing waits
                    # on these records, so they are written unforced (HATP-TXN-27)
                    await log.flush(forced=False)
                batch = [pending.pop() if pending else await children.next()]
                # Every answer that is already waiting is handled now, so one durable append covers the records
                # of all of them: four prepare answers cost one write, not four.
                batch += children.ready()
                commands: list[Command] = []
                for event in batch:
                    if machine.done:  # what comes after the end is dropped, as a finished machine accepts nothing
                        break
                    commands += self._handle(machine, _unforked(chain, event))
                decided = await self._execute(machine, chain, commands, children, alarms, log)
                if decided is not None and on_decided is not None:
                    on_decided(decided)
                    on_decided = None  # told once
                if machine.done and decided is not None:
                    outcome = decided
        except asyncio.CancelledError:
            if log.deferred:  # stopped on purpose (e.g. the agent's abort): what already happened stays on record
                with anyio.CancelScope(shield=True):
                    await log.flush()
            raise
        finally:
            alarms.close()
            await children.aclose()
        return TxnResult(machine.plan.txn_id, outcome, machine.state, chain.record())

    def _handle(self, machine: Coordinator, event: Event) -> list[Command]:
        try:
            return machine.handle(event, self._clock.now())
        except HatpError as exc:  # the machine refused the event and is unchanged: say so, carry on
            body = {"kind": event.kind, "rule": exc.rule, "code": exc.code, "reason": exc.reason[:500]}
            return [Record(event="event.refused", body=body)]

    async def _execute(
        self,
        machine: Coordinator,
        chain: RecordChain,
        commands: list[Command],
        children: Children[Event],
        alarms: Alarms,
        log: TxnWrites,
    ) -> Outcome | None:
        txn_id = machine.plan.txn_id
        at = format_ts(self._clock.now())
        entries: list[LogEntry] = []
        outcome: Outcome | None = None
        unjustified: UnjustifiedOutcome | None = None
        for cmd in commands:
            if self._keep_trace:
                self.trace.append((txn_id, cmd))
            if isinstance(cmd, Record):
                entries.append(LogEntry("event", chain.append(cmd.event, at, cmd.body, cmd.evidence, cmd.author)))
                if cmd.event == DECIDED_EVENT:  # HATP-TXN-25: decided before the end
                    outcome = Outcome(str(cmd.body["outcome"]))
            elif isinstance(cmd, Decide):
                entries.append(LogEntry("decision", {"decision": cmd.decision, "reason": cmd.reason, "at": at}))
                body = {"decision": cmd.decision, "reason": cmd.reason}
                entries.append(LogEntry("event", chain.append("decision", at, body)))
            elif isinstance(cmd, Finish):
                unjustified = self._unjustified(machine, chain, cmd.outcome)
                if unjustified is not None:  # HATP-REC-17: never close a record that does not prove its outcome
                    refused = {"outcome": cmd.outcome.value, "problems": unjustified.problems}
                    entries.append(LogEntry("event", chain.append("close.refused", at, refused)))
                    break
                outcome = cmd.outcome
                entries.append(LogEntry("event", chain.close(at, cmd.outcome.value)))
        ahead = await log.write(entries, commands)  # persist before send (HATP-TXN-4)
        if unjustified is not None:
            raise unjustified  # fail closed: nothing after the refused close is sent
        for cmd in commands:
            if not (ahead and isinstance(cmd, Ask)):
                self._send(machine, chain, cmd, children, alarms, log)
        if ahead:  # HATP-TXN-27: the begin durable (while the prepares are out) before any ask
            await log.flush()
            for cmd in commands:
                if isinstance(cmd, Ask):
                    self._send(machine, chain, cmd, children, alarms, log)
            await asyncio.sleep(0)  # the asks start before the answers that came meanwhile are handled
        return outcome

    def _send(
        self,
        machine: Coordinator,
        chain: RecordChain,
        cmd: Command,
        children: Children[Event],
        alarms: Alarms,
        log: TxnWrites,
    ) -> None:
        """Carry out one command that is not a record: arm a timer, or start a call (a task of its own)."""
        txn_id = machine.plan.txn_id
        if isinstance(cmd, Arm):
            alarms.arm(cmd.key, cmd.at)
        elif isinstance(cmd, SendPrepare | SendRenew | SendCommit | SendAbort | SendCompensate):
            decision = _decision_event(chain) if isinstance(cmd, SendCommit) else None
            vote = _vote_digest(chain, cmd.branch_id) if isinstance(cmd, SendCommit) else None
            # HATP-REC-19: the head is written (above) before a party signs it; the begin's is fsynced meanwhile
            head = chain.head_at
            call = self._call(machine.plan, machine.plan_digest, cmd, children.post, decision, vote, head)
            children.spawn(log.counted(call))
        elif isinstance(cmd, Ask | Poll):
            children.spawn(self._approve(machine.plan, cmd, children.post))
        elif isinstance(cmd, Tighten):
            children.spawn(self._tighten(txn_id, cmd, children.post))
        elif isinstance(cmd, Withdraw) and self._approver is not None:
            children.spawn(self._notify(self._approver.withdraw(txn_id, cmd.requirement_id)))
        elif isinstance(cmd, Escalate) and self._on_escalate is not None:
            children.spawn(self._notify(self._on_escalate(txn_id, cmd.to, cmd.reason)))

    def _unjustified(self, machine: Coordinator, chain: RecordChain, outcome: Outcome) -> UnjustifiedOutcome | None:
        """HATP-REC-17: the record so far must justify `outcome` by the rules `hatp verify` applies
        (hatp_mcp.core.txn.outcome); None when it does."""
        found = justify(
            machine.plan, machine.plan_digest, chain.events, outcome.value, self.keyring, self.config.humans
        )
        if not found.problems:
            return None
        problems = [p.to_dict() for p in found.problems[:20]]
        return UnjustifiedOutcome(machine.plan.txn_id, outcome, problems)

    @staticmethod
    async def _notify(call: Coroutine[Any, Any, None]) -> None:
        """A notification (withdraw an ask, escalate) whose failure must not stop the transaction; the record
        already holds the decision it reports."""
        try:
            await call
        except Exception:  # the callee reports its own failure; cancellation (BaseException) still passes
            return

    async def _bounded(self, seconds: float, fn: Callable[[], Awaitable[R]]) -> R:
        """Run fn, racing the clock. Raises _CallTimeout when the bound passes first."""
        if isinstance(self._clock, SystemClock):  # the event loop's own timer is the system clock: no extra task
            bound = asyncio.timeout(seconds)  # the runtime runs on asyncio (runtime/coordinator/calls.py)
            try:
                async with bound:
                    return await fn()
            except TimeoutError:
                if not bound.expired():  # the callee's own TimeoutError is its failure, not our bound
                    raise
                raise _CallTimeout(f"no answer within {seconds:g}s") from None
        deadline = self._clock.now() + timedelta(seconds=seconds)
        result: list[R] = []
        try:
            async with anyio.create_task_group() as tg:

                async def work() -> None:
                    result.append(await fn())
                    tg.cancel_scope.cancel()

                async def expire() -> None:
                    await self._clock.sleep_until(deadline)
                    tg.cancel_scope.cancel()

                tg.start_soon(work)
                tg.start_soon(expire)
        except ExceptionGroup as group:  # the callee's own failure, as the system-clock path raises it: unwrapped
            if len(group.exceptions) == 1:
                raise group.exceptions[0] from None
            raise
        if not result:
            raise _CallTimeout(f"no answer within {seconds:g}s")
        return result[0]

    async def _call(
        self,
        plan: Plan,
        digest: str,
        cmd: Any,
        post: Callable[[Event], None],
        decision: dict[str, Any] | None = None,
        vote: str | None = None,
        head: RecordHead | None = None,
    ) -> None:
        """Send one participant call; a commit carries `decision`, the signed decision event, and `vote`, the digest
        of the branch's yes vote it rests on (HATP-TRUST-7); the other calls name `head`, the record's durable head,
        which the answer signs (HATP-REC-19; a commit's answer signs the decision's own head)."""
        branch = plan.branch(cmd.branch_id)
        phase = {
            SendPrepare: "quote" if getattr(cmd, "quote_only", False) else "prepare",
            SendRenew: "renew",
            SendCommit: "commit",
            SendAbort: "abort",
            SendCompensate: "compensate",
        }[type(cmd)]
        participant = self._participants.get(branch.participant)
        event: Event
        try:
            if participant is None:
                raise HatpError("HATP-TXN-2", f"no route to participant {branch.participant}", code="UNREACHABLE")
            p = participant
            bound = float(branch.max_duration_seconds) if branch.max_duration_seconds is not None else self._unbounded
            t, b = plan.txn_id, branch.branch_id
            if isinstance(cmd, SendPrepare):
                req = PrepareRequest(
                    txn_id=t,
                    branch_id=b,
                    plan_digest=digest,
                    plan=plan,
                    coordinator=self.config.coordinator,
                    quote_only=cmd.quote_only,
                    record_head=head,
                )
                if branch.locks and not cmd.quote_only:  # HATP-LOCK-7: its resources are locked before it is prepared
                    await self._bounded(bound, lambda: self._locks.take(p, plan, digest, branch, self._clock.now()))
                res = await self._bounded(bound, lambda: p.prepare(req))
                event = PrepareAnswer(branch_id=b, vote=res.vote, receipt=res.receipt)
            else:
                if isinstance(cmd, SendCommit):
                    tokens = None
                    if branch.locks:  # HATP-LOCK-8: the write carries its fencing tokens
                        tokens = await self._bounded(
                            bound, lambda: self._locks.tokens(p, plan, digest, branch, self._clock.now())
                        )
                    creq = CommitRequest(
                        txn_id=t,
                        branch_id=b,
                        plan_digest=digest,
                        preconditions=Preconditions.model_validate(cmd.preconditions),
                        decision=decision,
                        vote_digest=vote,
                        lock_tokens=tokens,
                    )
                    res2 = await self._bounded(bound, lambda: p.commit(creq))
                elif isinstance(cmd, SendRenew):
                    rreq = RenewRequest(
                        txn_id=t, branch_id=b, plan_digest=digest, lease_seconds=cmd.lease_seconds, record_head=head
                    )
                    res2 = await self._bounded(bound, lambda: p.renew(rreq))
                elif isinstance(cmd, SendAbort):
                    areq = AbortRequest(txn_id=t, branch_id=b, plan_digest=digest, reason=cmd.reason, record_head=head)
                    res2 = await self._bounded(bound, lambda: p.abort(areq))
                else:
                    ureq = CompensateRequest(
                        txn_id=t, branch_id=b, plan_digest=digest, undo_token=cmd.undo_token, record_head=head
                    )
                    res2 = await self._bounded(bound, lambda: p.compensate(ureq))
                if branch.locks and isinstance(cmd, (SendCommit, SendAbort)):  # HATP-LOCK-9: answered, so given back
                    await self._locks.give_back(p, t, b, digest)
                event = ReceiptAnswer(branch_id=b, receipt=res2.receipt)
        except Exception as exc:  # a participant's failure is data for the machine; cancellation passes
            event = CallFailed(branch_id=cmd.branch_id, phase=phase, reason=str(exc)[:500] or type(exc).__name__)
        post(event)

    async def _tighten(self, txn_id: str, cmd: Tighten, post: Callable[[Event], None]) -> None:
        """HATP-MODE-7: the gateway shrinks the ask and binds the terms; its answer says they were accepted."""
        rid = cmd.requirement_id
        event: Event
        try:
            if self._approver is None:
                raise HatpError("HATP-TXN-3", "no approver is configured", code="NO_APPROVER")
            answer = await self._approver.tighten(txn_id, rid, cmd.terms)
            event = ApproverReply(requirement_id=rid, vote=answer.vote, approval=answer.approval, terms=cmd.terms)
        except Exception as exc:  # not accepted: the coordinator's own deadline still holds
            event = CallFailed(branch_id=rid, phase="tighten", reason=str(exc)[:500] or type(exc).__name__)
        post(event)

    async def _approve(self, plan: Plan, cmd: Ask | Poll, post: Callable[[Event], None]) -> None:
        rid = cmd.requirement_id
        event: Event
        try:
            if self._approver is None:
                raise HatpError("HATP-TXN-3", "no approver is configured", code="NO_APPROVER")
            terms = cmd.terms if isinstance(cmd, Ask) else None
            if isinstance(cmd, Ask):
                answer = await self._approver.ask(plan, rid, terms)
            else:
                answer = await self._approver.poll(plan.txn_id, rid)
            event = ApproverReply(requirement_id=rid, vote=answer.vote, approval=answer.approval, terms=terms)
        except Exception as exc:  # an approver that fails never counts as a yes; one that did not answer, no no
            unanswered = isinstance(exc, TransportFailed)
            reason = str(exc)[:500] or type(exc).__name__
            event = CallFailed(branch_id=rid, phase="approval", reason=reason, unanswered=unanswered)
        post(event)
        if isinstance(event, ApproverReply) and event.vote.get("decision") == "pending":
            await self._watch(plan.txn_id, rid, event.vote, post)

    async def _watch(self, txn_id: str, rid: str, vote: dict[str, Any], post: Callable[[Event], None]) -> None:
        """HATP-MCP-40: hold a long poll on a pending approval and hand the machine the decision the moment the
        gateway has it, instead of at the next poll (`Config.poll_seconds`, which stays as the fallback). One per
        requirement; it ends with the decision, when the transaction ends (cancelled with the other calls), on any
        failure (the next poll's pending answer starts it again), and when the approver answers without holding
        (HATP-MCP-40 lets a gateway hold for less: it is polled only, never hammered). An approver with no `wait`
        (the scripted one) is polled only."""
        wait = getattr(self._approver, "wait", None)
        if wait is None or self._watch_seconds <= 0 or (txn_id, rid) in self._watching:
            return
        self._watching.add((txn_id, rid))
        try:
            while True:
                asked_at = anyio.current_time()  # the event loop's monotonic clock: was the poll held at all?
                answer = await wait(txn_id, rid, self._watch_seconds)
                if answer.vote.get("decision") != "pending":
                    post(ApproverReply(requirement_id=rid, vote=answer.vote, approval=answer.approval, terms=None))
                    return
                if answer.vote == vote and anyio.current_time() - asked_at < self._watch_seconds / 2:
                    return  # answered the same pending vote without holding: the poll timer carries on alone
                vote = answer.vote
        except Exception:  # polling is the fallback; cancellation (BaseException) passes
            return
        finally:
            self._watching.discard((txn_id, rid))
