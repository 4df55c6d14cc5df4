"""The participant wrapper a tool author fills in per operation: hold / compensate / final callbacks.

`ParticipantRuntime` implements hatp_mcp.runtime.interfaces.Participant: it checks the plan digest, signs every
vote and receipt with the participant's key, keeps each branch's state durable in a ParticipantStore, answers a
repeated request on (txnId, branchId) with the first answer, checks preconditions before a commit and hands out
fencing-token locks. An effect runs exactly once: its intent (state `committing` / `compensating`) is durable
before the operation is called with the branch's idempotency key, and a retry that finds the intent without a
result reconciles through the operation (`lookup`) instead of performing again blindly (HATP-PART-10..12).
A `StoreOperation` whose effects live in the store's own database skips the intent: its effect and the answer are
kept by one durable transaction, both or neither (HATP-PART-13).
The tier rules themselves are pure (hatp_mcp.core.participant.branch); what a tool author implements is
hatp_mcp.runtime.participant.operation (re-exported here); the fencing-token locks are
hatp_mcp.runtime.participant.fencing. This module must not know about transports: the MCP binding calls these methods.
"""

from __future__ import annotations

import asyncio
from contextlib import AbstractContextManager
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import Preconditions, RecordHead
from hatp_mcp.core.model.messages import (
    AbortRequest,
    BranchResult,
    CommitRequest,
    CompensateRequest,
    LockAcquireRequest,
    LockReleaseRequest,
    LockRenewRequest,
    LockResult,
    PrepareRequest,
    PrepareResult,
    RenewRequest,
    StatusRequest,
    StatusResult,
)
from hatp_mcp.core.model.plan import Branch
from hatp_mcp.core.participant.branch import (
    BranchEvent,
    BranchMachine,
    BranchState,
    Lease,
    check_cost,
    check_preconditions,
    grant_lease,
    idempotency_key,
    renew_lease,
)
from hatp_mcp.core.participant.coordinator_auth import check_vote
from hatp_mcp.core.participant.record_head import check_commit_head, head_of
from hatp_mcp.core.participant.signed import signed_receipt, signed_vote
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.participant.fencing import FencingLocks
from hatp_mcp.runtime.participant.operation import DryRun, EffectInDoubt, Operation, Performed, StoreOperation
from hatp_mcp.store.participant_state import BranchRow, ParticipantStore, SqliteParticipantStore

__all__ = ["DryRun", "Operation", "ParticipantRuntime", "Performed", "StoreOperation", "kept_evidence"]


class _BranchLock:
    """`async with`: serialize requests on one branch; forget the lock once nobody holds or awaits it (no
    unbounded growth). `locks` maps a branch to [its asyncio.Lock, how many requests hold or await it]."""

    __slots__ = ("_key", "_locks")

    def __init__(self, locks: dict[tuple[str, str], list[Any]], key: tuple[str, str]) -> None:
        self._locks = locks
        self._key = key

    async def __aenter__(self) -> None:
        entry = self._locks.get(self._key)
        if entry is None:
            entry = self._locks[self._key] = [asyncio.Lock(), 0]
        entry[1] += 1
        try:
            await entry[0].acquire()
        except BaseException:  # cancelled while waiting: no longer a user of the lock
            self._leave(entry)
            raise

    async def __aexit__(self, *exc: object) -> None:
        entry = self._locks[self._key]
        entry[0].release()
        self._leave(entry)

    def _leave(self, entry: list[Any]) -> None:
        entry[1] -= 1
        if entry[1] == 0:
            del self._locks[self._key]


def _answer(result: PrepareResult | BranchResult) -> dict[str, Any]:
    """The stored first answer: the signed objects themselves (they are never changed), without a re-dump."""
    if isinstance(result, PrepareResult):
        return {"type": result.type, "vote": result.vote, "receipt": result.receipt}
    return {"type": result.type, "receipt": result.receipt}


class ParticipantRuntime:
    """A participant server's HATP side, independent of transport."""

    def __init__(
        self,
        uri: str,
        key: SigningKey,
        operations: dict[str, Operation],
        store: ParticipantStore,
        clock: Clock,
        *,
        max_lease_seconds: int = 900,
        max_horizon_seconds: int = 24 * 3600,
        quote_valid_seconds: int = 900,
    ) -> None:
        self.uri = uri
        self._key = key
        self._ops = operations
        self.store = store
        self._clock = clock
        self._max_lease = max_lease_seconds
        self._max_horizon = max_horizon_seconds
        self._quote_valid = quote_valid_seconds
        self._locks: dict[tuple[str, str], list[Any]] = {}
        self.locks = FencingLocks(store, clock)
        # HATP-PART-13: operations whose effects are kept in the store's own transaction (none on another store)
        self._sqlite = store if isinstance(store, SqliteParticipantStore) else None
        database = self._sqlite.database if self._sqlite is not None else None
        self._in_store: dict[str, StoreOperation] = {
            name: op
            for name, op in operations.items()
            if isinstance(op, StoreOperation) and database is not None and op.database is database
        }

    def _atomic(self) -> AbstractContextManager[object]:
        """The store's transaction (only operations in `_in_store` get here, so the store is a SQLite one)."""
        if self._sqlite is None:
            raise BrokenInvariant("an operation kept in the store ran on a store that is not a SQLite one")
        return self._sqlite.transaction()

    def _lock(self, txn_id: str, branch_id: str) -> _BranchLock:
        """One request at a time per (txnId, branchId); the lock is dropped once nobody holds or awaits it."""
        return _BranchLock(self._locks, (txn_id, branch_id))

    # -- signing -------------------------------------------------------------------------------------------
    def _vote(
        self,
        row: BranchRow,
        decision: str,
        code: str | None = None,
        reason: str | None = None,
        decide_by: str | None = None,
        head: RecordHead | None = None,
    ) -> dict[str, Any]:
        return signed_vote(
            self._key,
            txn_id=row.txn_id,
            branch_id=row.branch_id,
            plan_digest=row.plan_digest,
            voter=self.uri,
            decision=decision,
            code=code,
            reason=reason,
            decide_by=decide_by,
            record_head=head,
            issued_at=format_ts(self._clock.now()),
        )

    def _receipt(self, row: BranchRow, phase: str, outcome: str, **extra: Any) -> dict[str, Any]:
        return signed_receipt(
            self._key,
            txn_id=row.txn_id,
            branch_id=row.branch_id,
            plan_digest=row.plan_digest,
            participant=self.uri,
            phase=phase,
            outcome=outcome,
            issued_at=format_ts(self._clock.now()),
            **extra,
        )

    def _refusal(self, row: BranchRow, phase: str, exc: HatpError, head: RecordHead | None) -> dict[str, Any]:
        return self._receipt(row, phase, "refused", code=exc.code, reason=exc.reason[:2000], record_head=head)

    def _failed(self, row: BranchRow, phase: str, exc: HatpError, head: RecordHead | None) -> BranchResult:
        """A signed receipt stating that the operation's effect failed (refused) or got no answer (in-doubt),
        never kept as the phase's answer: the branch stays where it was and the next request tries again."""
        outcome = "in-doubt" if isinstance(exc, EffectInDoubt) else "refused"
        reason = exc.reason[:2000]
        return BranchResult(receipt=self._receipt(row, phase, outcome, code=exc.code, reason=reason, record_head=head))

    # -- phase 1 -------------------------------------------------------------------------------------------
    async def prepare(self, req: PrepareRequest) -> PrepareResult:
        async with self._lock(req.txn_id, req.branch_id):
            return await self._prepare(req)

    async def _prepare(self, req: PrepareRequest) -> PrepareResult:
        now = self._clock.now()
        head = req.record_head  # HATP-REC-19: every answer signs the head the request named
        phase = "quote" if req.quote_only else "prepare"
        row = self.store.get(req.txn_id, req.branch_id) or BranchRow(req.txn_id, req.branch_id, req.plan_digest)
        state = BranchState(row.state)
        first = row.answers.get(phase)
        lapsed = state is BranchState.PREPARED and row.lease is not None and now >= row.lease.expires_at
        if first is not None and state is not BranchState.NONE and not lapsed:
            return PrepareResult.model_validate(first)  # HATP-PART-6: the first answer, again
        if state in (BranchState.ABORTED, BranchState.COMMITTED, BranchState.COMPENSATED, BranchState.REFUSED):
            return self._no(row, phase, "ALREADY_" + state.name, f"this branch is already {state.value}", head)
        try:
            branch = self._check_request(req)
        except HatpError as exc:
            return self._no(row, phase, exc.code, exc.reason, head, store=False)
        row.plan_digest = req.plan_digest
        row.branch = branch.wire()
        op = self._ops[branch.operation]
        try:
            dry = await op.dry_run(branch, now)
        except HatpError as exc:  # the dry run itself failed: a signed no, never a bare error
            return self._no(row, phase, exc.code, exc.reason, head)
        if dry.pending_until is not None:  # HATP-PART-9: nothing held, nothing kept
            return PrepareResult(
                vote=self._vote(row, "pending", decide_by=format_ts(dry.pending_until), head=head),
                receipt=self._receipt(row, phase, "in-doubt", code="PENDING", record_head=head),
            )
        if dry.refuse_code is not None:
            return self._no(row, phase, dry.refuse_code, dry.refuse_reason or dry.refuse_code, head)
        try:
            check_cost(branch, dry.cost, self._index(req, branch))
        except HatpError as exc:
            return self._no(row, phase, exc.code, exc.reason, head)
        if req.quote_only or branch.tier != "hold":
            return self._yes(row, phase, dry, now, None, head, quote=req.quote_only)
        lease = grant_lease(branch, now, self._max_lease, self._max_horizon)
        if state is BranchState.PREPARED:  # the hold lapsed: place it again (HATP-TXN-8)
            row.machine = BranchMachine(state).fire(BranchEvent.LOST)
        in_store = self._in_store.get(branch.operation)
        if in_store is not None:  # HATP-PART-13: the hold and the answer in one durable transaction
            with self._atomic():
                in_store.hold_now(req.txn_id, branch, lease)
                return self._yes(row, phase, dry, now, lease, head)
        try:
            await op.place_hold(req.txn_id, branch, lease)
        except HatpError as exc:  # the hold was refused or got no answer: a signed no, and nothing is held here
            return self._no(row, phase, exc.code, exc.reason, head)
        return self._yes(row, phase, dry, now, lease, head)

    def _yes(
        self,
        row: BranchRow,
        phase: str,
        dry: DryRun,
        now: datetime,
        lease: Lease | None,
        head: RecordHead | None,
        *,
        quote: bool = False,
    ) -> PrepareResult:
        """Vote yes (a quote, or a prepare whose hold, if any, is placed) and keep the answer."""
        pre = Preconditions(versions=dict(dry.versions), credential_scope=dry.credential_scope)
        extra: dict[str, Any] = {"preconditions": pre, "reported_cost": dry.cost, "record_head": head}
        if quote:
            extra["valid_until"] = format_ts(now + timedelta(seconds=self._quote_valid))
            row.machine = row.machine.fire(BranchEvent.QUOTE)
        else:
            if lease is not None:
                row.lease = lease
                extra["lease_expires_at"] = format_ts(lease.expires_at)
                extra["hold_horizon"] = format_ts(lease.horizon)
            row.machine = row.machine.fire(BranchEvent.PREPARE_YES)
            row.preconditions = pre.wire()
        result = PrepareResult(vote=self._vote(row, "yes", head=head), receipt=self._receipt(row, phase, "ok", **extra))
        row.answers[phase] = _answer(result)
        self.store.put(row)
        return result

    def _no(
        self, row: BranchRow, phase: str, code: str, reason: str, head: RecordHead | None, *, store: bool = True
    ) -> PrepareResult:
        result = PrepareResult(
            vote=self._vote(row, "no", code, reason[:2000], head=head),
            receipt=self._receipt(row, phase, "refused", code=code, reason=reason[:2000], record_head=head),
        )
        if store and BranchState(row.state) in (BranchState.NONE, BranchState.QUOTED):
            row.machine = row.machine.fire(BranchEvent.PREPARE_NO)
            row.answers[phase] = _answer(result)
            self.store.put(row)
        return result

    @staticmethod
    def _index(req: PrepareRequest, branch: Branch) -> int:
        return [b.branch_id for b in req.plan.branches].index(branch.branch_id)

    def _check_request(self, req: PrepareRequest) -> Branch:
        """Raises HatpError HATP-PART-2 when the request does not name this participant's branch of this plan."""
        if req.plan.digest() != req.plan_digest or req.plan.txn_id != req.txn_id:
            raise HatpError(
                "HATP-PART-2",
                "planDigest / txnId do not match the plan sent",
                path="$.planDigest",
                code="PLAN_MISMATCH",
                fix="send the plan whose digest you name",
            )
        try:
            branch = req.plan.branch(req.branch_id)
        except KeyError:
            raise HatpError(
                "HATP-PART-2", "no such branch in the plan", path="$.branchId", code="PLAN_MISMATCH"
            ) from None
        if branch.participant != self.uri or branch.operation not in self._ops:
            raise HatpError(
                "HATP-PART-2",
                f"this participant ({self.uri}) does not serve {branch.participant} {branch.operation}",
                path="$.branchId",
                code="PLAN_MISMATCH",
            )
        return branch

    # -- phase 2 -------------------------------------------------------------------------------------------
    async def commit(self, req: CommitRequest) -> BranchResult:
        async with self._lock(req.txn_id, req.branch_id):
            now = self._clock.now()
            head = head_of(req.decision)  # HATP-REC-19: a commit answers at the decision it carries out
            row = self.store.get(req.txn_id, req.branch_id) or BranchRow(req.txn_id, req.branch_id, req.plan_digest)
            if "commit" in row.answers:
                return BranchResult.model_validate(row.answers["commit"])  # HATP-PART-6
            if BranchState(row.state) is BranchState.COMMITTING and row.branch is not None:
                # HATP-PART-11: the effect may have happened before the process stopped; ask the operation
                branch = Branch.model_validate(row.branch)
                try:
                    found = await self._ops[branch.operation].lookup(idempotency_key(row.txn_id, row.branch_id), branch)
                except HatpError as exc:  # it cannot tell: in doubt, and the effect is not sent again blindly
                    return self._failed(row, "commit", EffectInDoubt(exc.rule, exc.reason, code=exc.code), head)
                if found is not None:
                    return self._committed(row, found.undo_token, now, head)
                return await self._perform(row, branch, now, head)
            # HATP-TRUST-7: the commit rests on this branch's own yes vote; if not, refused and nothing is kept
            own_vote = (row.answers.get("prepare") or {}).get("vote")
            check_vote(req.vote_digest, own_vote)
            check_commit_head(head, own_vote)  # HATP-REC-23: refused before anything is written
            try:
                branch = self._prepared(row, req.plan_digest, now)
                self.locks.check_branch(branch.locks, req.lock_tokens)  # HATP-LOCK-6: a stale writer is refused
                versions, scope = await self._ops[branch.operation].current(branch, now)
                check_preconditions(req.preconditions, versions, scope)
                check_preconditions(Preconditions.model_validate(row.preconditions or {}), versions, scope)
            except HatpError as exc:
                result = BranchResult(receipt=self._refusal(row, "commit", exc, head))
                if BranchState(row.state) is BranchState.PREPARED:
                    row.answers["commit"] = _answer(result)
                    self.store.put(row)
                return result
            row.machine = row.machine.fire(BranchEvent.COMMIT_INTENT)
            in_store = self._in_store.get(branch.operation)
            if in_store is not None:
                return self._perform_in_store(in_store, row, branch, now, head)
            self.store.put(row)  # HATP-PART-10: the intent is durable before the effect
            return await self._perform(row, branch, now, head)

    def _perform_in_store(
        self, op: StoreOperation, row: BranchRow, branch: Branch, now: datetime, head: RecordHead | None
    ) -> BranchResult:
        """HATP-PART-13: the effect and the answer in ONE durable transaction; the intent is never written."""
        key = idempotency_key(row.txn_id, row.branch_id)
        try:
            with self._atomic():
                return self._committed(row, op.perform_now(row.txn_id, branch, now, key=key), now, head)
        except HatpError as exc:  # the operation refused: its writes were rolled back, nothing happened
            return self._commit_refused(row, exc, head)

    async def _perform(self, row: BranchRow, branch: Branch, now: datetime, head: RecordHead | None) -> BranchResult:
        """Run the effect of a `committing` branch with its idempotency key, then keep and answer the result."""
        key = idempotency_key(row.txn_id, row.branch_id)
        try:
            undo = await self._ops[branch.operation].perform(row.txn_id, branch, now, key=key)
        except HatpError as exc:
            if isinstance(exc, EffectInDoubt):  # HATP-PXY-61: no answer, it may have happened: still committing
                return self._failed(row, "commit", exc, head)
            return self._commit_refused(row, exc, head)  # the operation refused: nothing happened, the first answer
        return self._committed(row, undo, now, head)

    def _commit_refused(self, row: BranchRow, exc: HatpError, head: RecordHead | None) -> BranchResult:
        row.machine = row.machine.fire(BranchEvent.COMMIT_REFUSED)
        result = BranchResult(receipt=self._refusal(row, "commit", exc, head))
        row.answers["commit"] = _answer(result)
        self.store.put(row)
        return result

    def _committed(self, row: BranchRow, undo: str | None, now: datetime, head: RecordHead | None) -> BranchResult:
        row.machine = row.machine.fire(BranchEvent.COMMIT)
        row.committed_at = format_ts(now)
        result = BranchResult(receipt=self._receipt(row, "commit", "ok", undo_token=undo, record_head=head))
        row.answers["commit"] = _answer(result)
        self.store.put(row)
        return result

    def _prepared(self, row: BranchRow, plan_digest: str, now: datetime) -> Branch:
        if BranchState(row.state) is not BranchState.PREPARED or row.branch is None:
            raise HatpError(
                "HATP-PART-6", f"the branch is {row.state}, not prepared", code="NOT_PREPARED", fix="prepare first"
            )
        if plan_digest != row.plan_digest:
            raise HatpError("HATP-PART-2", "the request names another plan", path="$.planDigest", code="PLAN_MISMATCH")
        if row.lease is not None and now >= row.lease.expires_at:
            raise HatpError("HATP-PART-4", "the hold's lease lapsed", code="HOLD_LOST", fix="prepare the branch again")
        return Branch.model_validate(row.branch)

    async def abort(self, req: AbortRequest) -> BranchResult:
        async with self._lock(req.txn_id, req.branch_id):
            row = self.store.get(req.txn_id, req.branch_id) or BranchRow(req.txn_id, req.branch_id, req.plan_digest)
            if "abort" in row.answers:
                return BranchResult.model_validate(row.answers["abort"])
            state = BranchState(row.state)
            try:
                nxt = row.machine.fire(BranchEvent.ABORT)
            except HatpError as exc:  # committed: only compensate can undo it
                return BranchResult(receipt=self._refusal(row, "abort", exc, req.record_head))
            if state is BranchState.PREPARED and row.branch is not None:
                branch = Branch.model_validate(row.branch)
                if branch.tier == "hold":
                    try:
                        await self._ops[branch.operation].release_hold(req.txn_id, branch)
                    except HatpError as exc:  # still held (or unknown): said so, and the next abort tries again
                        return self._failed(row, "abort", exc, req.record_head)
            row.machine = nxt
            row.lease = None
            result = BranchResult(receipt=self._receipt(row, "abort", "ok", record_head=req.record_head))
            row.answers["abort"] = _answer(result)
            self.store.put(row)
            return result

    async def compensate(self, req: CompensateRequest) -> BranchResult:
        async with self._lock(req.txn_id, req.branch_id):
            now = self._clock.now()
            row = self.store.get(req.txn_id, req.branch_id) or BranchRow(req.txn_id, req.branch_id, req.plan_digest)
            if "compensate" in row.answers:
                return BranchResult.model_validate(row.answers["compensate"])
            if BranchState(row.state) is not BranchState.COMPENSATING:  # else HATP-PART-12: undo again, same key
                try:
                    self._compensable(row, now)
                    row.machine = row.machine.fire(BranchEvent.COMPENSATE_INTENT)
                except HatpError as exc:
                    return BranchResult(receipt=self._refusal(row, "compensate", exc, req.record_head))
                self.store.put(row)  # HATP-PART-12: the intent is durable before the undo
            if row.branch is None:
                raise BrokenInvariant(f"branch {row.branch_id} has a row and no branch to compensate")
            branch = Branch.model_validate(row.branch)
            key = idempotency_key(row.txn_id, row.branch_id)
            try:
                await self._ops[branch.operation].undo(req.txn_id, branch, req.undo_token, now, key=key)
            except HatpError as exc:
                if isinstance(exc, EffectInDoubt):  # HATP-PXY-62: no answer: still compensating, never compensated
                    return self._failed(row, "compensate", exc, req.record_head)
                # the operation refused: nothing was undone
                row.machine = row.machine.fire(BranchEvent.COMPENSATE_REFUSED)
                result = BranchResult(receipt=self._refusal(row, "compensate", exc, req.record_head))
                self.store.put(row)
                return result
            row.machine = row.machine.fire(BranchEvent.COMPENSATE)
            result = BranchResult(receipt=self._receipt(row, "compensate", "ok", record_head=req.record_head))
            row.answers["compensate"] = _answer(result)
            self.store.put(row)
            return result

    @staticmethod
    def _compensable(row: BranchRow, now: datetime) -> Branch:
        """Raises HatpError HATP-PART-7 for a branch that cannot be undone (final, hold, or past its window)."""
        if row.branch is None:
            raise HatpError("HATP-PART-8", "nothing was committed on this branch", code="ILLEGAL_TRANSITION")
        branch = Branch.model_validate(row.branch)
        if branch.tier != "compensate":
            raise HatpError(
                "HATP-PART-7",
                f"a {branch.tier}-tier commit cannot be compensated",
                code="IRREVERSIBLE",
                fix="offer recovery (a linked transaction) instead",
            )
        if row.committed_at and branch.undo_window_seconds is not None:
            if now > parse_ts(row.committed_at) + timedelta(seconds=branch.undo_window_seconds):
                raise HatpError("HATP-PART-7", "the undo window has passed", code="UNDO_WINDOW_PASSED")
        return branch

    async def renew(self, req: RenewRequest) -> BranchResult:
        async with self._lock(req.txn_id, req.branch_id):
            now = self._clock.now()
            row = self.store.get(req.txn_id, req.branch_id) or BranchRow(req.txn_id, req.branch_id, req.plan_digest)
            try:
                self._prepared(row, req.plan_digest, now)
                if row.lease is None:
                    raise HatpError("HATP-PART-4", "this branch holds nothing", code="NOT_A_HOLD")
                row.lease = renew_lease(row.lease, now, req.lease_seconds, self._max_lease)
            except HatpError as exc:
                if exc.code == "HOLD_LOST" and BranchState(row.state) is BranchState.PREPARED:
                    row.machine = row.machine.fire(BranchEvent.LOST)
                    row.lease = None
                    self.store.put(row)
                return BranchResult(receipt=self._refusal(row, "renew", exc, req.record_head))
            self.store.put(row)
            receipt = self._receipt(
                row,
                "renew",
                "ok",
                lease_expires_at=format_ts(row.lease.expires_at),
                hold_horizon=format_ts(row.lease.horizon),
                record_head=req.record_head,
            )
            return BranchResult(receipt=receipt)

    async def status(self, req: StatusRequest) -> StatusResult:
        row = self.store.get(req.txn_id, req.branch_id)
        if row is None:
            return StatusResult(txn_id=req.txn_id, branch_id=req.branch_id, state="unknown")
        last = None
        for phase in ("compensate", "abort", "commit", "prepare", "quote"):
            if phase in row.answers:
                answer = row.answers[phase]
                last = answer["receipt"]
                break
        # an effect under way is reported as under way (committing / compensating): its receipt is not made yet
        state = {"quoted": "unknown"}.get(row.state, row.state)
        return StatusResult(txn_id=req.txn_id, branch_id=req.branch_id, state=state, receipt=last)  # type: ignore[arg-type]

    # -- locks: the fencing-token service (runtime/participant/fencing.py), kept in this participant's store ----
    def lock_acquire(self, req: LockAcquireRequest) -> LockResult:
        """Raises HatpError HATP-LOCK-1 while another owner holds the resource."""
        return self.locks.acquire(req)

    def lock_renew(self, req: LockRenewRequest) -> LockResult:
        """Raises HatpError HATP-LOCK-2 for a stale token."""
        return self.locks.renew(req)

    def lock_release(self, req: LockReleaseRequest) -> LockResult:
        """Raises HatpError HATP-LOCK-2 for a stale token."""
        return self.locks.release(req)

    async def acquire_lock(self, req: LockAcquireRequest) -> LockResult:
        """`lock_acquire` for a coordinator in this process (hatp_mcp.runtime.interfaces.ParticipantLocks)."""
        return self.locks.acquire(req)

    async def release_lock(self, req: LockReleaseRequest) -> LockResult:
        """`lock_release` for a coordinator in this process."""
        return self.locks.release(req)

    def fenced_write(self, resource: str, token: int) -> None:
        """Call before a write guarded by a lock. Raises HatpError HATP-LOCK-2 for a stale token."""
        self.locks.check(resource, token)


def kept_evidence(store: ParticipantStore, txn_id: str) -> list[dict[str, Any]]:
    """Every vote and receipt this participant kept for `txn_id` (its first answer per phase, HATP-PART-6), as it
    signed them: what it exports for `hatp verify --evidence` to check a record against (HATP-REC-21)."""
    out: list[dict[str, Any]] = []
    for row in store.branches(txn_id):
        for phase in ("quote", "prepare", "commit", "abort", "compensate"):
            answer = row.answers.get(phase)
            if answer is None:
                continue
            out.extend(answer[name] for name in ("vote", "receipt") if isinstance(answer.get(name), dict))
    return out
