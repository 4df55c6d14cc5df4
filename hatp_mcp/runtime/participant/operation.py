"""The tool author's side of a participant: what one operation of a tool does in each tier, and what it reports.

`Operation` is the contract a tool author fills in per operation (hold / compensate / final callbacks, with the
idempotency-key rules of HATP-PART-10); `StoreOperation` is one whose effects are writes in the participant
store's own database, kept in one transaction with the answer (HATP-PART-13). `DryRun` and `Performed` are what
the callbacks return; `EffectInDoubt` is what a callback raises when it cannot tell whether its effect happened.
hatp_mcp.runtime.participant.driver drives them; this module only defines them, and must not know about
transports, signing or the branch's state.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from hatp_mcp.core.model.amount import Amount
from hatp_mcp.core.model.plan import Branch
from hatp_mcp.core.participant.branch import Lease
from hatp_mcp.errors import HatpError
from hatp_mcp.store.participant_state import StateDb

__all__ = ["DryRun", "EffectInDoubt", "Operation", "Performed", "StoreOperation"]


@dataclass(frozen=True)
class DryRun:
    """What a dry run saw: target versions, the credential scope, the cost; or a reason to vote no."""

    versions: dict[str, str] = field(default_factory=dict)
    cost: Amount | None = None
    credential_scope: str | None = None
    refuse_code: str | None = None
    pending_until: datetime | None = None  # cannot answer yet: vote pending, promising to decide by then
    refuse_reason: str | None = None


class EffectInDoubt(HatpError):
    """Raised by a callback that got no answer for its effect (a timeout, a lost connection): it may have happened.

    A plain HatpError says the effect was refused and nothing happened; this one says nobody can tell yet. The
    driver answers it with a signed in-doubt receipt and leaves the branch where it was (committing or
    compensating), so a later request reconciles it (HATP-PART-11, 12) instead of reading it as a refusal."""


@dataclass(frozen=True)
class Performed:
    """What `Operation.lookup` found: the effect with that key happened, and `perform` returned `undo_token`."""

    undo_token: str | None = None


class Operation:
    """One operation of a tool, per tier. Override what your tier needs; the defaults do nothing.

    hold: `dry_run`, `place_hold`, `release_hold`, `perform` (turn the hold into the booking).
    compensate: `dry_run`, `perform` (returns an undo token), `undo`.  final: `dry_run`, `perform`.
    `current` returns the versions and credential scope a commit would act on now (checked against prepare's).

    The tool author's contract (HATP-PART-10): `perform` and `undo` get `key`, the branch's idempotency key
    ``<txnId>:<branchId>``; an effect made twice with the same key is made once (as payment APIs do it), and
    `lookup(key)` says whether the effect with that key happened. The runtime calls `lookup` when the process
    stopped between an effect and saving its result.
    """

    async def dry_run(self, branch: Branch, now: datetime) -> DryRun:
        return DryRun()

    async def current(self, branch: Branch, now: datetime) -> tuple[dict[str, str], str | None]:
        dry = await self.dry_run(branch, now)
        return dry.versions, dry.credential_scope

    async def place_hold(self, txn_id: str, branch: Branch, lease: Lease) -> None:
        return None

    async def release_hold(self, txn_id: str, branch: Branch) -> None:
        return None

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        return None

    async def undo(self, txn_id: str, branch: Branch, undo_token: str | None, now: datetime, *, key: str) -> None:
        return None

    async def lookup(self, key: str, branch: Branch) -> Performed | None:
        """Did the effect with idempotency key `key` happen? `Performed` (with what `perform` returned) or None.

        The default cannot tell and answers None, so a retry performs again with the same key: that is exactly
        once only when `perform` honours the key. An operation that cannot make its effect idempotent on the
        key MUST override this."""
        return None


class StoreOperation(Operation):
    """An operation whose effects are writes in the participant store's own database (HATP-PART-13).

    `database` is the `StateDb` it writes through. When it is the runtime store's database, the runtime calls the
    synchronous `hold_now` / `perform_now` inside the store's transaction together with the answer: the effect and
    the answer are durable together or not at all, so no intent is written first. They must write only through
    `database` and must not await (they run under the database's lock). On any other store the async callbacks
    run them in a transaction of their own, under HATP-PART-10/11 (intent first, `lookup` on a retry).
    """

    database: StateDb | None = None

    def hold_now(self, txn_id: str, branch: Branch, lease: Lease) -> None:
        return None

    def perform_now(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        return None

    async def place_hold(self, txn_id: str, branch: Branch, lease: Lease) -> None:
        self.hold_now(txn_id, branch, lease)

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        return self.perform_now(txn_id, branch, now, key=key)
