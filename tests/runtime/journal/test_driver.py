"""The journal around the machine: durable steps, rollback on an exception, retries on the fake clock, dead
letters and alerts, in-doubt steps, recovery when a journal opens its store, and the Python API."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import pytest

from hatp_mcp.core.journal.events import SagaStatus, StepState
from hatp_mcp.core.journal.machine import RetryPolicy
from hatp_mcp.core.journal.record import verify_journal
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.journal.driver import Journal, SagaRollbackFailed, SagaRolledBack, StepInDoubt
from hatp_mcp.runtime.journal.undoable import OutcomeUnknown, undoable
from hatp_mcp.store.journal_store import MemoryJournalStore, SqliteJournalStore
from tests.journal_shop import Shop

KEY = SigningKey.generate(["journal"], kid="journal-test")
RING = Keyring()
RING.add_signer(KEY)
P = StepState


async def until(done: Callable[[], bool]) -> None:
    """Let the other tasks run until `done()` (bounded: a test never hangs)."""
    with anyio.fail_after(5):
        while not done():
            await anyio.lowlevel.checkpoint()


def last_entry(j: Journal, saga_id: str) -> str | None:
    saga = j.running(saga_id)
    return saga.record()["events"][-1]["event"] if saga is not None else None


def journal(store: Any, shop: Shop, clock: FakeClock, **kw: Any) -> Journal:
    return Journal(store, KEY, tools=shop.tools().values(), clock=clock, **kw)


async def return_882(j: Journal, shop: Shop, saga_id: str = "saga-882") -> None:
    t = shop.tools()
    async with j.saga("return-882", saga_id) as saga:
        await saga.run(t["mark_returned"], {"item": "882"})
        await saga.run(t["refund"], {"item": "882", "usd": "40.00"})
        await saga.run(t["label"], {"item": "882"})


@pytest.mark.anyio
async def test_a_saga_that_runs_through_completes_and_its_record_verifies(clock: FakeClock) -> None:
    shop, store = Shop(), MemoryJournalStore()
    shop.label_fails = False
    async with journal(store, shop, clock) as j:
        await return_882(j, shop)
        saga = await j.get("saga-882")
    assert saga.status is SagaStatus.COMPLETED
    assert [s.state for s in saga.steps] == [P.COMPLETED] * 3
    assert shop.kinds() == ["mark", "refund", "label"]
    record = await j.record("saga-882")
    assert verify_journal(record, RING) == []
    assert record["events"][-1]["body"]["status"] == "COMPLETED"


@pytest.mark.anyio
async def test_a_failing_step_rolls_back_the_completed_ones_last_first_HATP_JRN_3_HATP_JRN_7(
    tmp_path: Path, clock: FakeClock
) -> None:
    shop, store = Shop(), SqliteJournalStore(tmp_path / "journal.db")
    async with journal(store, shop, clock) as j:
        with pytest.raises(SagaRolledBack) as err:
            await return_882(j, shop)
    e = err.value
    assert isinstance(e.cause, RuntimeError) and str(e.cause) == "label service down"  # the original failure
    assert isinstance(e.__cause__, RuntimeError)
    assert [(s.tool, s.state, s.rollback) for s in e.steps] == [
        ("mark_returned", P.ROLLED_BACK, "undone"),
        ("refund", P.ROLLED_BACK, "undone"),
        ("label", P.FAILED, None),
    ]
    assert shop.kinds() == ["mark", "refund", "unrefund", "unmark"]  # refund undone first, then the return
    assert shop.effects[2] == ("unrefund", "saga-882:s2:1:undo")  # HATP-JRN-7
    stored = await store.load("saga-882")
    assert stored is not None and stored.closed
    record = {"type": "hatp.journal", "sagaId": "saga-882", "name": stored.name, "events": stored.events}
    assert verify_journal(record, RING) == []
    assert await store.unfinished() == []
    store.close()


@pytest.mark.anyio
async def test_a_step_is_durable_before_its_call_goes_out_and_its_result_after_HATP_JRN_2(clock: FakeClock) -> None:
    store = MemoryJournalStore()
    seen: list[list[str]] = []

    async def execute(args: dict[str, Any], key: str) -> dict[str, Any]:
        stored = await store.load("saga-1")
        assert stored is not None
        seen.append([e["event"] for e in stored.events])
        return {"ok": True}

    async with Journal(store, KEY, clock=clock) as j:
        async with j.saga("one", "saga-1") as saga:
            await saga.run(undoable("t", execute), {})
    stored = await store.load("saga-1")
    assert stored is not None
    assert seen == [["saga.begin", "step.started"]]
    assert [e["event"] for e in stored.events] == ["saga.begin", "step.started", "step.completed", "saga.closed"]


@pytest.mark.anyio
async def test_a_failed_undo_is_retried_with_backoff_on_the_clock_with_the_same_key_HATP_JRN_8(
    clock: FakeClock,
) -> None:
    shop = Shop()
    shop.undo_failures["refund"] = 2
    j = journal(MemoryJournalStore(), shop, clock, retry=RetryPolicy(max_attempts=5, base_ms=1000, factor=2))
    await j.recover()
    outcome: list[BaseException] = []

    async def run() -> None:
        try:
            await return_882(j, shop)
        except SagaRolledBack as exc:
            outcome.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await until(lambda: last_entry(j, "saga-882") == "undo.failed")  # first retry armed: 1 s after the failure
        await until(lambda: clock.sleepers == 1)
        start = clock.now()
        clock.advance(0.999)
        await anyio.wait_all_tasks_blocked()
        assert shop.calls.count("unrefund saga-882:s2:1:undo") == 1  # not yet
        clock.advance(0.001)
        await until(lambda: shop.calls.count("unrefund saga-882:s2:1:undo") == 2)
        await until(lambda: last_entry(j, "saga-882") == "undo.failed")  # second retry: 2 s later
        await until(lambda: clock.sleepers == 1)
        clock.set(start + timedelta(seconds=3))
        await until(lambda: bool(outcome))
    assert shop.calls.count("unrefund saga-882:s2:1:undo") == 3
    assert shop.kinds() == ["mark", "refund", "unrefund", "unmark"]


@pytest.mark.anyio
async def test_an_undo_that_keeps_failing_is_a_dead_letter_with_an_alert_HATP_JRN_8(
    tmp_path: Path, clock: FakeClock
) -> None:
    shop = Shop()
    shop.undo_failures["refund"] = 99
    alerts: list[dict[str, Any]] = []
    store = SqliteJournalStore(tmp_path / "j.db")
    j = journal(store, shop, clock, retry=RetryPolicy(max_attempts=2, base_ms=10), alert=alerts.append)
    await j.recover()
    caught: list[SagaRollbackFailed] = []

    async def run() -> None:
        try:
            await return_882(j, shop)
        except SagaRollbackFailed as exc:
            caught.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await until(lambda: last_entry(j, "saga-882") == "undo.failed")
        await until(lambda: clock.sleepers == 1)
        clock.advance(1)
        await until(lambda: bool(caught))
    e = caught[0]
    assert e.status is SagaStatus.ROLLBACK_FAILED
    assert [(s.tool, s.state) for s in e.steps][:2] == [("mark_returned", P.ROLLED_BACK), ("refund", P.ROLLBACK_FAILED)]
    assert shop.kinds() == ["mark", "refund", "unmark"]  # the return was still undone
    assert len(e.dead_letters) == 1 and alerts == e.dead_letters
    dead = e.dead_letters[0]
    assert dead["tool"] == "refund" and dead["input"] == {"item": "882", "usd": "40.00"}
    assert dead["output"] == {"refundId": "r-saga-882:s2:1", "usd": "40.00"}
    assert dead["error"] == "RuntimeError: refund undo: service unavailable" and dead["attempts"] == 2
    rows = await store.dead_letters()
    assert [r.entry for r in rows] == [dead] and rows[0].alerted
    store.close()


@pytest.mark.anyio
async def test_a_step_whose_outcome_is_unknown_is_looked_up_never_guessed_HATP_JRN_6(clock: FakeClock) -> None:
    shop = Shop()
    lost = {"done": False}

    async def flaky_refund(args: dict[str, Any], key: str) -> Any:
        await shop.refund(args, key)  # the refund happened ...
        lost["done"] = True
        raise OutcomeUnknown("the payments API timed out")  # ... but its answer was lost

    tools = shop.tools()
    refund = undoable("refund", flaky_refund, shop.unrefund, shop.lookup_refund)
    j = Journal(MemoryJournalStore(), KEY, tools=[tools["mark_returned"], refund], clock=clock)
    with pytest.raises(SagaRolledBack) as err:
        async with j.saga("r", "saga-1") as saga:
            await saga.run(tools["mark_returned"], {"item": "882"})
            await saga.run(refund, {"item": "882", "usd": "40.00"})
    assert isinstance(err.value.cause, StepInDoubt)
    assert shop.kinds() == ["mark", "refund", "unrefund", "unmark"]  # the lookup found it; it was undone
    record = (await j.get("saga-1")).record()
    names = [e["event"] for e in record["events"]]
    assert "step.in-doubt" in names and "lookup.happened" in names


@pytest.mark.anyio
async def test_an_in_doubt_step_without_a_lookup_is_left_for_a_person_HATP_JRN_6(clock: FakeClock) -> None:
    async def hangs(args: dict[str, Any], key: str) -> Any:
        await anyio.sleep_forever()

    async def undo(args: dict[str, Any], output: Any, key: str) -> None:
        raise AssertionError("an in-doubt step without a lookup is never undone on a guess")

    tool = undoable("hangs", hangs, undo)
    alerts: list[dict[str, Any]] = []
    j = Journal(MemoryJournalStore(), KEY, tools=[tool], clock=clock, alert=alerts.append)
    caught: list[BaseException] = []

    async def run() -> None:
        try:
            async with j.saga("r", "saga-1") as saga:
                await saga.run(tool, {})
        except SagaRollbackFailed as exc:
            caught.append(exc)

    async with anyio.create_task_group() as tg:
        tg.start_soon(run)
        await until(lambda: last_entry(j, "saga-1") == "step.started")
        await until(lambda: clock.sleepers == 1)  # the call's bound on the clock
        clock.advance(30)
        await until(lambda: bool(caught))
    e = caught[0]
    assert isinstance(e, SagaRollbackFailed) and isinstance(e.cause, StepInDoubt)
    assert e.steps[0].state is P.IN_DOUBT and e.steps[0].rollback == "dead-letter"
    assert alerts[0]["phase"] == "execute" and "declares no lookup" in alerts[0]["error"]


@pytest.mark.anyio
async def test_opening_a_journal_rolls_back_what_a_crashed_run_left_HATP_JRN_10(
    tmp_path: Path, clock: FakeClock
) -> None:
    shop = Shop()
    t = shop.tools()
    first = Journal(SqliteJournalStore(tmp_path / "j.db"), KEY, tools=[t["mark_returned"]], clock=clock)
    await first.recover()
    saga = await first.begin("return-882", "saga-882")
    await saga.run(t["mark_returned"], {"item": "882"})
    with anyio.CancelScope() as scope:  # the process "dies" while the refund's call is out

        async def refund_then_die(args: dict[str, Any], key: str) -> Any:
            await shop.refund(args, key)
            scope.cancel()
            await anyio.sleep_forever()

        await saga.run(undoable("refund", refund_then_die, shop.unrefund, shop.lookup_refund), {"usd": "40.00"})
    assert saga.steps[-1].state is P.PENDING  # its result was never written
    # a new journal on the same store, as after a restart
    second = Journal(SqliteJournalStore(tmp_path / "j.db"), KEY, tools=shop.tools().values(), clock=clock)
    async with second:
        assert second.recovered == {"saga-882": SagaStatus.ROLLED_BACK}
    assert shop.kinds() == ["mark", "refund", "unrefund", "unmark"]
    assert verify_journal(await second.record("saga-882"), RING) == []


@pytest.mark.anyio
async def test_a_journal_whose_store_was_tampered_with_touches_nothing_and_alerts_HATP_JRN_12(
    tmp_path: Path, clock: FakeClock
) -> None:
    shop = Shop()
    path = tmp_path / "j.db"
    first = journal(SqliteJournalStore(path), shop, clock)
    saga = await first.begin("return-882", "saga-882")
    await saga.run(shop.tools()["refund"], {"item": "882", "usd": "40.00"})
    import sqlite3

    db = sqlite3.connect(path)
    row = db.execute("SELECT event FROM journal_event WHERE seq = 1").fetchone()[0]
    db.execute("UPDATE journal_event SET event = ? WHERE seq = 1", (row.replace("40.00", "4000.00"),))
    db.commit()
    db.close()
    alerts: list[dict[str, Any]] = []
    async with journal(SqliteJournalStore(path), shop, clock, alert=alerts.append) as second:
        assert second.recovered == {}
        with pytest.raises(HatpError) as err:
            await second.get("saga-882")
    assert err.value.rule == "HATP-JRN-12" and err.value.code == "JOURNAL_TAMPERED"
    assert alerts[0]["phase"] == "recover" and "HATP-SIG-4" in alerts[0]["error"]
    assert shop.kinds() == ["refund"]  # nothing was undone on the strength of a tampered journal


@pytest.mark.anyio
async def test_wrapped_tools_run_as_steps_of_the_enclosing_saga(clock: FakeClock) -> None:
    shop = Shop()
    j = journal(MemoryJournalStore(), shop, clock)
    tools = j.wrap(shop.tools())
    with pytest.raises(RuntimeError, match=r"inside `async with journal\.saga"):
        await tools["refund"](item="882", usd="40.00")
    with pytest.raises(SagaRolledBack) as err:
        async with j.saga("return-882") as saga:
            await tools["mark_returned"](item="882")
            await tools["refund"](item="882", usd="40.00")
            assert saga.status is SagaStatus.IN_PROGRESS and len(saga.steps) == 2
            await tools["label"](item="882")
    assert err.value.status is SagaStatus.ROLLED_BACK
    assert shop.kinds() == ["mark", "refund", "unrefund", "unmark"]


@pytest.mark.anyio
async def test_a_cancelled_saga_is_rolled_back_before_the_cancellation_goes_on(clock: FakeClock) -> None:
    shop = Shop()
    t = shop.tools()
    j = journal(MemoryJournalStore(), shop, clock)
    with anyio.CancelScope() as scope:
        async with j.saga("return-882", "saga-1") as saga:
            await saga.run(t["mark_returned"], {"item": "882"})
            scope.cancel()
            await anyio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    assert (await j.get("saga-1")).status is SagaStatus.ROLLED_BACK and shop.kinds() == ["mark", "unmark"]


@pytest.mark.anyio
async def test_a_rollback_whose_caller_is_cancelled_runs_to_its_end_HATP_JRN_18(clock: FakeClock) -> None:
    """Planted: the agent's saga_rollback request is cancelled (or times out on its side) while the journal waits to
    retry a failed undo. Before HATP-JRN-18 the rollback stopped there: the saga stayed FAILED with a step UNDOING,
    nothing was undone, and a second rollback was refused (HATP-JRN-1) until the process restarted."""
    shop = Shop()
    shop.undo_failures["refund"] = 1
    t = shop.tools()
    j = journal(MemoryJournalStore(), shop, clock, retry=RetryPolicy(max_attempts=5, base_ms=1000, factor=2))
    await j.recover()
    saga = await j.begin("return-882", "saga-1")
    await saga.run(t["mark_returned"], {"item": "882"})
    await saga.run(t["refund"], {"item": "882", "usd": "40.00"})
    finished: list[SagaStatus] = []
    caller = anyio.CancelScope()

    async def agent_rolls_back() -> None:
        with caller:
            finished.append(await saga.rollback("the agent gave up"))

    async with anyio.create_task_group() as tg:
        tg.start_soon(agent_rolls_back)
        await until(lambda: last_entry(j, "saga-1") == "undo.failed")  # the refund's undo failed once
        await until(lambda: clock.sleepers == 1)  # its retry waits on the clock
        caller.cancel()  # the caller goes away
        await anyio.wait_all_tasks_blocked()
        still_rolling_back = (saga.status, shop.kinds())  # (asserted outside: a failure here would wait forever)
        due = clock.next_deadline()
        assert due is not None
        clock.set(due)  # the retry is due: the rollback goes on although its caller was cancelled
    assert still_rolling_back == (SagaStatus.FAILED, ["mark", "refund"])  # not abandoned when its caller went away
    assert caller.cancel_called and finished == [SagaStatus.ROLLED_BACK]  # it ran to its end, then returned
    assert saga.status is SagaStatus.ROLLED_BACK and shop.kinds() == ["mark", "refund", "unrefund", "unmark"]
    assert shop.calls.count("unrefund saga-1:s2:1:undo") == 2  # the retry, with the same key
    assert saga.record()["events"][-1]["event"] == "saga.closed"
    verify_journal(saga.record(), RING)


def test_a_pivot_declares_no_undo_and_the_journal_needs_a_journal_key() -> None:
    async def run(args: dict[str, Any], key: str) -> None:
        return None

    async def undo(args: dict[str, Any], output: Any, key: str) -> None:
        return None

    with pytest.raises(ValueError, match="pivot or irreversible tool cannot be undone"):
        undoable("ship", run, undo, pivot=True)
    with pytest.raises(ValueError, match="'journal'"):
        Journal(MemoryJournalStore(), SigningKey.generate(["coordinator"]))


class FailingStore(MemoryJournalStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail_next = False

    async def append(self, saga_id: str, name: str, events: Any, dead_letters: Any = ()) -> list[int]:
        if self.fail_next:
            self.fail_next = False
            raise OSError("disk full")
        return await super().append(saga_id, name, events, dead_letters)


@pytest.mark.anyio
async def test_a_saga_whose_entry_was_not_made_durable_does_nothing_more_until_rebuilt_HATP_JRN_2(
    clock: FakeClock,
) -> None:
    shop, store = Shop(), FailingStore()
    t = shop.tools()
    j = journal(store, shop, clock)
    saga = await j.begin("return-882", "saga-1")
    store.fail_next = True
    with pytest.raises(OSError, match="disk full"):
        await saga.run(t["refund"], {"item": "882", "usd": "40.00"})
    assert shop.calls == []  # the call never went out: its step was not durable
    with pytest.raises(HatpError) as err:
        await saga.run(t["mark_returned"], {"item": "882"})
    assert (err.value.rule, err.value.code) == ("HATP-JRN-2", "JOURNAL_NOT_DURABLE") and saga.broken
    rebuilt = await j.get("saga-1")  # from the store: only what is durable
    assert rebuilt is not saga and rebuilt.steps == [] and rebuilt.status is SagaStatus.IN_PROGRESS
    await rebuilt.run(t["mark_returned"], {"item": "882"})
    assert [s.step_id for s in rebuilt.steps] == ["s1"] and verify_journal(
        rebuilt.record(), RING, require_closed=False
    ) == []


@pytest.mark.anyio
async def test_HATP_PXY_44_a_steps_rule_is_found_by_its_key_when_one_sagas_id_begins_another(clock: FakeClock) -> None:
    """Planted: step_rule looked in the first open saga whose id its key begins with and stopped there, so a step of
    saga `s:b` was looked for in saga `s` (its key `s:b:...` begins with `s:` too) and its undo rule was lost."""
    shop = Shop()
    t = shop.tools()
    j = journal(MemoryJournalStore(), shop, clock)
    await j.recover()
    first = await j.begin("return-882", "s")
    await first.add_step(t["mark_returned"], {"item": "882"}, rule={"undo": "of s"})
    nested = await j.begin("return-882", "s:b")
    step = await nested.add_step(t["mark_returned"], {"item": "883"}, rule={"undo": "of s:b"})
    assert j.step_rule(step.key) == {"undo": "of s:b"} and j.step_rule(f"{step.key}:undo") == {"undo": "of s:b"}
    assert j.step_rule("s:b:nothing:1") is None
