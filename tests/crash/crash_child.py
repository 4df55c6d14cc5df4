"""The child process of the crash tests: runs (or recovers) the trip with durable participants and log.

`python tests/crash/crash_child.py WORKDIR run|recover|ask|approved|undo-doubt [PAUSE_AT]`. It counts steps:
each durable log write, and each commit a participant has answered (durable at the participant, not yet recorded
by the coordinator: HATP-TXN-4 lets a receipt's record wait for the next forced write). After each it prints
`STEP n what`; at step PAUSE_AT it prints `PAUSED` and stops there, so the parent can SIGKILL it at exactly that
step. Participants keep their state in SQLite and their effects in an append-only, fsynced file, so "no effect
performed twice" can be checked across processes. It prints `DONE <outcome>` at the end, then `STEPS n`.

`undo-doubt` runs the trip with the payment declined after the calendar event was created, so the event is
compensated, and the calendar's undo gets no answer from its upstream (a signed in-doubt compensate receipt): once
the log holds that receipt it prints `STEP undo in doubt` and `PAUSED` and stops there. `recover` after that kill
finds the undo still in doubt in the log; its calendar answers.

`ask` runs the trip with a human who has not decided: once the log holds every prepare and the gateway's pending
vote (the APPROVING point) it prints `STEP approving` and `PAUSED` and stops there. `approved` is the restart
after that kill: the gateway still holds the ask (it keeps asks durably, HATP-GW-13), the human has approved it
meanwhile, and the replacement recovers from the log.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from demo.trip_world import build_world, trip_plan
from hatp_mcp.core.model.messages import CommitRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.terms import ApprovalTerms
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.coordinator.scripted_approver import HumanScript
from hatp_mcp.runtime.participant.operation import EffectInDoubt
from hatp_mcp.store.participant_state import SqliteParticipantStore
from hatp_mcp.store.txn_log import LoggedTxn, SqliteTxnLog

TXN = "txn-crash-0001"


class DurableEffects(list[str]):
    """A list whose appends also go to an fsynced file (the participant's side effects, as the world sees them)."""

    def __init__(self, path: Path, name: str) -> None:
        super().__init__()
        self.path = path
        self.name = name

    def append(self, item: str) -> None:
        super().append(item)
        with self.path.open("a") as f:
            f.write(f"{self.name} {item}\n")
            f.flush()
            os.fsync(f.fileno())


def waiting_for_the_human(logged: LoggedTxn) -> bool:
    """Every branch's prepare receipt and the finance ask's pending vote are durable, and nothing is decided."""
    prepared = {
        e["body"]["branchId"]
        for e in logged.events
        if e.get("event") == "receipt" and (e.get("evidence") or {}).get("outcome") == "ok"
    }
    pending = any(
        e.get("event") == "vote" and (e.get("evidence") or {}).get("decision") == "pending" for e in logged.events
    )
    return logged.decision is None and pending and prepared == {"seat", "room", "event", "pay"}


def undo_in_doubt(logged: LoggedTxn) -> bool:
    """The abort is decided and the calendar's compensate receipt in the log says in doubt."""
    return logged.decision == "abort" and any(
        e.get("event") == "compensate" and (e.get("evidence") or {}).get("outcome") == "in-doubt" for e in logged.events
    )


class PauseWhen:
    """The log, stopping the process right after the append that makes `point` true of what the log holds."""

    def __init__(self, inner: SqliteTxnLog, point: Callable[[LoggedTxn], bool], say: str) -> None:
        self.inner = inner
        self.point = point
        self.say = say

    async def append(self, txn_id: str, entries: Any, forced: bool = True) -> None:
        await self.inner.append(txn_id, entries, forced)
        logged = await self.inner.load(txn_id)
        if logged is not None and self.point(logged):
            print(f"STEP {self.say}", flush=True)
            print("PAUSED", flush=True)
            threading.Event().wait()  # the parent kills us here

    async def load(self, txn_id: str) -> LoggedTxn | None:
        return await self.inner.load(txn_id)

    async def unfinished(self) -> list[str]:
        return await self.inner.unfinished()


def keys(workdir: Path) -> dict[str, SigningKey]:
    path = workdir / "keys.json"
    if not path.exists():
        made = {
            "coordinator": SigningKey.generate(["coordinator"], kid="coord-1"),
            "gateway": SigningKey.generate(["gateway"], kid="gw-1"),
            **{
                n: SigningKey.generate(["participant"], kid=f"{n}-1")
                for n in ("airline", "hotel", "calendar", "payments")
            },
        }
        path.write_text(json.dumps({n: k.private_jwk() for n, k in made.items()}))
    return {n: SigningKey.from_jwk(j) for n, j in json.loads(path.read_text()).items()}


async def main(workdir: Path, mode: str, pause_at: int) -> int:
    steps = 0

    def step(what: str) -> None:
        nonlocal steps
        steps += 1
        print(f"STEP {steps} {what}", flush=True)
        if steps == pause_at:
            print("PAUSED", flush=True)
            threading.Event().wait()  # the parent kills us here, with what the step did on disk

    clock = SystemClock()
    log: Any = SqliteTxnLog(workdir / "txn.db", on_durable=lambda n: step(f"durable write {n}"))
    human = {"ask": HumanScript("never"), "approved": HumanScript("approve")}.get(mode)
    if mode == "ask":
        log = PauseWhen(log, waiting_for_the_human, "approving")
    if mode == "undo-doubt":
        log = PauseWhen(log, undo_in_doubt, "undo in doubt")
    world = build_world(
        clock,
        log=log,
        stores=lambda name: SqliteParticipantStore(workdir / f"{name}.db"),
        keys=keys(workdir),
        scripts={"finance": human} if human is not None else None,
    )
    effects = workdir / "effects.log"
    world.seat.effects = DurableEffects(effects, "seat")
    world.room.effects = DurableEffects(effects, "room")
    world.event.effects = DurableEffects(effects, "event")
    world.pay.effects = DurableEffects(effects, "pay")
    if mode == "undo-doubt":
        world.pay.decline = True

        async def undo(*_args: Any, **_kwargs: Any) -> None:
            raise EffectInDoubt("HATP-PXY-62", "the upstream did not answer the undo", code="UPSTREAM_NO_ANSWER")

        world.event.undo = undo  # type: ignore[method-assign]
    for participant in world.participants.values():

        async def commit(req: CommitRequest, inner: Any = participant.commit) -> Any:
            answer = await inner(req)
            step(f"{req.branch_id} answered its commit")
            return answer

        participant.commit = commit  # type: ignore[method-assign]
    coordinator = world.coordinator()
    if mode in ("run", "ask", "undo-doubt"):
        results = [await coordinator.run(trip_plan(clock.now(), TXN))]
    else:
        logged = await log.load(TXN)
        if mode == "approved" and logged is not None:  # the gateway's durable ask, decided while we were down
            # under the terms the old coordinator sent it (tighten to its approval deadline, HATP-MODE-7)
            deadline = [e["body"]["decideBy"] for e in logged.events if e.get("event") == "approval.deadline"]
            terms = ApprovalTerms(decide_by=deadline[-1], holds=[])
            await world.approver.ask(Plan.model_validate(logged.plan), "finance", terms)
        results = await coordinator.recover_all()
    for r in results:
        (workdir / "record.json").write_text(json.dumps(r.record))
        print(f"DONE {r.outcome.value}", flush=True)
    (workdir / "keyring.json").write_text(json.dumps(world.keyring.to_jwks()))
    print(f"STEPS {steps}", flush=True)
    return 0


if __name__ == "__main__":
    pause = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    sys.exit(anyio.run(main, Path(sys.argv[1]), sys.argv[2], pause))
