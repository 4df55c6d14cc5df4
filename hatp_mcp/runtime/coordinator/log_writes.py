"""One transaction's writes to the coordinator's durable log, forced, unforced or deferred as HATP-TXN-4 and
HATP-TXN-27 say.

A batch's record events and decisions are durable before its sends (a forced write), unless every send is a call
that is idempotent on (txnId, branchId): then they wait, in order, for the next forced write, or for the moment no
participant call is in flight (then written unforced: nothing waits on them). Presumed-abort two-phase commit
forces the same way (the decision, not the votes or acknowledgements); begin is forced too, so a replacement knows
which holds to release. The write that tells the agent the outcome (`outcome.decided`) is written before the
holds' commits but not forced: the decision it rests on is durable already (HATP-TXN-28).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from hatp_mcp.core.model.record import DECIDED_EVENT
from hatp_mcp.core.txn.events import Arm, Command, Record, SendCommit, SendPrepare, SendRenew
from hatp_mcp.store.txn_log import LogEntry, TxnLog

__all__ = ["TxnWrites"]

# What may be sent while the batch's record events are not yet durable: calls that are idempotent on (txnId,
# branchId), so a replacement coordinator that lost those events asks again and gets the first answer
# (HATP-PART-6), and timers. Anything else (a decision, an abort or compensation, anything toward a human, the
# end) waits until every event before it is durable.
_MAY_SEND_BEFORE_DURABLE = (Record, Arm, SendPrepare, SendCommit, SendRenew)


class TxnWrites:
    """One transaction's writes to the durable log: forced ones wait until durable, with every deferred entry
    before them in the same write; deferred ones wait in order for the next forced write, or for the moment no
    participant call is in flight (`calls`)."""

    def __init__(self, log: TxnLog, txn_id: str, first: list[LogEntry]) -> None:
        self._log = log
        self._txn_id = txn_id
        self.deferred: list[LogEntry] = list(first)  # the plan is written with the first batch, which is forced
        self.calls = 0

    async def write(self, entries: list[LogEntry], commands: list[Command]) -> None:
        """HATP-TXN-4: durable before the batch's sends unless every send may go first (a plan or a decision
        entry never may, nor the outcome the agent is told, HATP-TXN-25)."""
        self.deferred += entries
        if not self.deferred:
            return
        if any(e.kind != "event" for e in self.deferred) or not all(  # HATP-TXN-27: forced
            isinstance(c, _MAY_SEND_BEFORE_DURABLE) for c in commands
        ):
            await self.flush()
        elif any(isinstance(c, Record) and c.event == DECIDED_EVENT for c in commands):  # HATP-TXN-28
            await self.flush(forced=False)

    async def flush(self, forced: bool = True) -> None:
        """Write every deferred entry now: fsynced when `forced`, else only written (HATP-STORE-8)."""
        entries, self.deferred = self.deferred, []
        await self._log.append(self._txn_id, entries, forced)

    def counted(self, call: Coroutine[Any, Any, None]) -> Coroutine[Any, Any, None]:
        """`call`, counted in `calls` from now (not from when its task first runs) until it returns."""
        self.calls += 1

        async def run() -> None:
            try:
                await call
            finally:
                self.calls -= 1

        return run()
