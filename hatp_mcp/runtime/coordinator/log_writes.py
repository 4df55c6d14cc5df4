"""One transaction's writes to the coordinator's durable log, forced, unforced or deferred as HATP-TXN-4 and
HATP-TXN-27 say.

A batch's record events and decisions are durable before its sends (a forced write), unless every send is a call
that is idempotent on (txnId, branchId): then they wait, in order, for the next forced write, or for the moment no
participant call is in flight (then written unforced: nothing waits on them). Presumed-abort two-phase commit
forces the same way (the decision, not the votes or acknowledgements). The begin (the plan with the first batch)
is written to the operating system before the prepares and made durable while they are out: a killed coordinator
loses nothing of it, so a replacement knows which holds to release, and the ask and the agent's answer wait for
it. The write that tells the agent the outcome (`outcome.decided`) is written before the holds' commits but not
forced: the decision it rests on is durable already (HATP-TXN-28).
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any

from hatp_mcp.core.model.record import DECIDED_EVENT
from hatp_mcp.core.txn.events import Arm, Ask, Command, Record, SendCommit, SendPrepare, SendRenew
from hatp_mcp.store.txn_log import LogEntry, TxnLog

__all__ = ["TxnWrites"]

# What may be sent while the batch's record events are not yet durable: calls that are idempotent on (txnId,
# branchId), so a replacement coordinator that lost those events asks again and gets the first answer
# (HATP-PART-6), and timers. Anything else (a decision, an abort or compensation, anything toward a human, the
# end) waits until every event before it is durable.
_MAY_SEND_BEFORE_DURABLE = (Record, Arm, SendPrepare, SendCommit, SendRenew)
# What the begin's batch may hold to be written to the operating system only, ahead of its prepares (HATP-TXN-27):
# the asks among it are sent once the begin is durable (`write` says so), anything else forces it as any batch.
_BEGIN_AHEAD = (Record, Arm, SendPrepare, Ask)


class TxnWrites:
    """One transaction's writes to the durable log: forced ones wait until durable, with every deferred entry
    before them in the same write; deferred ones wait in order for the next forced write, or for the moment no
    participant call is in flight (`calls`)."""

    def __init__(self, log: TxnLog, txn_id: str, first: list[LogEntry]) -> None:
        self._log = log
        self._txn_id = txn_id
        self.deferred: list[LogEntry] = list(first)  # the plan is written with the first batch (the begin)
        self.calls = 0

    async def write(self, entries: list[LogEntry], commands: list[Command]) -> bool:
        """HATP-TXN-4: durable before the batch's sends unless every send may go first (a plan or a decision
        entry never may, nor the outcome the agent is told, HATP-TXN-25). Returns True for the begin written
        ahead (HATP-TXN-27): only to the operating system; its prepares may go now, and the caller makes it
        durable (`flush()`) before sending the rest of the batch (the asks) or answering the agent."""
        self.deferred += entries
        if not self.deferred:
            return False
        if self._begin_ahead(commands):  # HATP-TXN-27: the begin, written before its prepares, durable after
            await self.flush(forced=False)
            return True
        if any(e.kind != "event" for e in self.deferred) or not all(  # HATP-TXN-27: forced
            isinstance(c, _MAY_SEND_BEFORE_DURABLE) for c in commands
        ):
            await self.flush()
        elif any(isinstance(c, Record) and c.event == DECIDED_EVENT for c in commands):  # HATP-TXN-28
            await self.flush(forced=False)
        return False

    def _begin_ahead(self, commands: list[Command]) -> bool:
        """The batch begins the transaction (the plan is among its entries), sends at least one prepare, and sends
        nothing but prepares and asks."""
        return (
            any(e.kind == "plan" for e in self.deferred)
            and any(isinstance(c, SendPrepare) for c in commands)
            and all(isinstance(c, _BEGIN_AHEAD) for c in commands)
        )

    async def flush(self, forced: bool = True) -> None:
        """Write every deferred entry now: fsynced when `forced`, else only written (HATP-STORE-8). Forced with
        nothing deferred, every earlier write is made durable."""
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
