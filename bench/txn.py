"""Committed trip transactions per second (4 branches + 1 approval, in-memory participants, durable SQLite log),
beside the same run's floor: only the signatures, canonicalizations, digests and log appends those transactions
need (the plan digested once: in one process every party checks the same Plan object, whose digest is kept;
every event and piece of evidence signed once, the evidence verified once, every event canonicalized once and its
signed bytes hashed for the chain),
with none of the protocol around them. Goal (bench/_report.py, `in_process`): committed trips/s by CPU at least a
share of the floor's, by CPU, same rounds. The Ed25519 signatures and verifications the trips make are counted on
trips of their own (never a timed round) and printed beside the floor's: a floor that signs or verifies more than
the trips do is a bench error.

`python -m bench.txn [N] [CONCURRENCY] [ROUNDS]` (default 200 32 7). One process, so one core does the Python
work (SQLite fsyncs in a worker thread). Median and range over interleaved rounds. After the warm-up the heap
is settled as every server settles it once it is set up (hatp_mcp.runtime.gc_tuning, called by hatp_mcp.mcp.serve).
"""

from __future__ import annotations

import sys
import tempfile
import time
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any, cast
from unittest import mock

import anyio
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from bench import _report as report
from demo.trip_world import build_world, trip_plan
from hatp_mcp.core.signing.canonical import canonical, digest, digest_bytes
from hatp_mcp.core.signing.keys import ALG, Keyring, PublicKeyEntry, SigningKey, sign_object, verify_object
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.gc_tuning import settle_heap
from hatp_mcp.store.txn_log import LogEntry, SqliteTxnLog

__all__ = ["main"]

COUNTED_TRIPS = 20  # the trips the Ed25519 work is counted on, apart from every timed round
PLAN_DIGESTS = 1  # in one process the parties share the Plan object, and a Plan's digest is computed once


async def trips(path: Path, n: int, concurrency: int) -> tuple[float, list[dict[str, Any]], Keyring, int]:
    """Run n trips, `concurrency` at a time; (seconds, records, keyring, log appends per txn)."""
    clock = SystemClock()
    log = SqliteTxnLog(path)
    world = build_world(clock, log=log)
    coordinator = world.coordinator(keep_trace=False)
    plans = [trip_plan(clock.now(), f"txn-bench-{path.stem}-{i}") for i in range(n)]
    limiter = anyio.CapacityLimiter(concurrency)
    records: list[dict[str, Any]] = []

    async def one(i: int) -> None:
        async with limiter:
            result = await coordinator.run(plans[i])
            assert result.outcome.value == "COMMITTED"
            records.append(result.record)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed, records, world.keyring, log.appends // n


async def floor(path: Path, records: list[dict[str, Any]], appends_per_txn: int, concurrency: int) -> float:
    """The same signatures, verifications, digests and durable appends, without the protocol around them."""
    log = SqliteTxnLog(path)
    signer = SigningKey.generate(["coordinator", "participant", "gateway"])
    ring = Keyring()
    ring.add_signer(signer)
    limiter = anyio.CapacityLimiter(concurrency)

    async def one(record: dict[str, Any]) -> None:
        async with limiter:
            events = record["events"]
            chunk = max(1, len(events) // appends_per_txn)
            for _ in range(PLAN_DIGESTS):
                digest(record["plan"])
            await log.append(record["txnId"], [LogEntry("plan", record["plan"])])
            for start in range(0, len(events), chunk):
                batch = []
                for e in events[start : start + chunk]:
                    evidence = e.get("evidence")
                    if evidence is not None:  # its producer signs it; the coordinator verifies it
                        verify_object(sign_object(evidence, signer), ring)
                    # the coordinator signs the event and chains it from one canonicalization, as RecordChain
                    # does: one hash over the signed bytes, which it builds from the unsigned ones
                    body = {k: v for k, v in e.items() if k != "signature"}
                    unsigned = canonical(body)
                    sig = signer.sign(unsigned)
                    digest_bytes(unsigned + sig.encode())
                    signed = {**body, "signature": {"alg": ALG, "kid": signer.kid, "sig": sig}}
                    batch.append(LogEntry("event", signed))
                await log.append(record["txnId"], batch)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for r in records:
            tg.start_soon(one, r)
    elapsed = time.perf_counter() - start
    log.close()
    return elapsed


class _CountedKey:
    """A public key that counts the verifications it makes (`cryptography`'s key type cannot be patched)."""

    def __init__(self, key: Any, counts: Counter[str]) -> None:
        self._key, self._counts = key, counts

    def verify(self, signature: bytes, data: bytes) -> None:
        self._counts["verifies"] += 1
        self._key.verify(signature, data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._key, name)


def crypto_per_trip(path: Path, n: int, concurrency: int) -> tuple[float, float]:
    """(Ed25519 signatures made, Ed25519 verifications made) per committed trip, counted on `n` trips of their own
    (never a timed round): every signature goes through SigningKey.sign and every verification through
    Keyring.check_signature (a signature the keyring remembers is not verified, so not counted). The floor must
    do no more of either than this, or it is not a floor."""
    counts: Counter[str] = Counter()
    sign, check = SigningKey.sign, Keyring.check_signature

    def counted_sign(key: SigningKey, data: bytes) -> str:
        counts["signs"] += 1
        return sign(key, data)

    def counted_check(ring: Keyring, entry: PublicKeyEntry, sig: bytes, message: bytes) -> None:
        counted = cast(Ed25519PublicKey, _CountedKey(entry.key, counts))  # it forwards all else to the key
        check(ring, replace(entry, key=counted), sig, message)

    with (
        mock.patch.object(SigningKey, "sign", counted_sign),
        mock.patch.object(Keyring, "check_signature", counted_check),
    ):
        anyio.run(trips, path, n, concurrency)
    return counts["signs"] / n, counts["verifies"] / n


def ed25519_only(records: list[dict[str, Any]]) -> tuple[float, int, int]:
    """The Ed25519 signatures and verifications alone (bytes prepared beforehand): (seconds, signs, verifies)
    per the same records. What the mandated library allows at most on this machine, with nothing else done."""
    key = SigningKey.generate(["coordinator"])
    public = key.private.public_key()
    work: list[tuple[bytes, bool]] = []  # (bytes, is it verified too)
    for record in records:
        for e in record["events"]:
            work.append((canonical(e), False))
            if e.get("evidence") is not None:
                work.append((canonical(e["evidence"]), True))
    signs, verifies = len(work), sum(1 for _b, v in work if v)
    start = time.perf_counter()
    for data, check in work:
        sig = key.private.sign(data)
        if check:
            public.verify(sig, data)
    return time.perf_counter() - start, signs // len(records), verifies // len(records)


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args and args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    n, concurrency, rounds = report.trip_sizes(args)
    rates, floors, crypto, bad = [], [], [], 0
    cpu_run: list[float] = []  # process CPU seconds per side (every thread: the log's SQLite work too)
    cpu_floor: list[float] = []
    with tempfile.TemporaryDirectory(prefix="hatp-bench-") as tmp:
        d = Path(tmp)
        fsync = report.fsync_cost(d)
        anyio.run(trips, d / "warm.db", 20, concurrency)
        trip_signs, trip_verifies = crypto_per_trip(d / "counted.db", COUNTED_TRIPS, concurrency)
        settle_heap()  # what a server does before its first request (hatp_mcp.mcp.serve.serve)
        for r in range(rounds):  # interleaved, so a noisy neighbour hits both sides alike
            c0 = time.process_time()
            t_run, records, ring, appends = anyio.run(trips, d / f"run{r}.db", n, concurrency)
            c1 = time.process_time()
            t_floor = anyio.run(floor, d / f"floor{r}.db", records, appends, concurrency)
            cpu_run.append(c1 - c0)
            cpu_floor.append(time.process_time() - c1)
            t_crypto, signs, verifies = ed25519_only(records)
            crypto.append(n / t_crypto)
            rates.append(n / t_run)
            floors.append(n / t_floor)
            bad += sum(1 for rec in records[:10] if verify_record(rec, ring))
    wall, wall_floor = report.Spread.of(rates), report.Spread.of(floors)
    by_cpu, cpu_floor_rate = report.Spread.of(n / c for c in cpu_run), report.Spread.of(n / c for c in cpu_floor)
    ed25519 = report.Spread.of(crypto)
    print(f"trip transactions (4 branches + 1 approval, durable SQLite log, concurrency {concurrency}):")
    print(
        f"  median (range) over {rounds} interleaved rounds of {n}; "
        f"fsync in the log's directory {fsync.show(1e3, 'ms')}"
    )
    print(f"  committed: {wall.show(unit='txn/s')} by wall, {by_cpu.show(unit='txn/s')} by CPU")
    print(
        f"  floor (the same signatures, verifications, plan and event digests, {appends} durable appends per txn): "
        f"{wall_floor.show(unit='txn/s')} by wall, {cpu_floor_rate.show(unit='txn/s')} by CPU"
    )
    per_round = report.Spread.of(a / b for a, b in zip(cpu_floor, cpu_run, strict=True))
    print(f"  committed / floor by CPU, per round: {per_round.show(unit='x')}")
    print(
        f"  CPU per txn: {by_cpu.map(lambda r: 1 / r).show(1e3, 'ms')} committed, "
        f"{cpu_floor_rate.map(lambda r: 1 / r).show(1e3, 'ms')} floor"
    )
    print(f"  Ed25519 alone ({signs} signs + {verifies} verifies per txn, nothing else): {ed25519.show(unit='txn/s')}")
    print(
        f"  Ed25519 per txn, counted on {COUNTED_TRIPS} trips of their own: the trips {trip_signs:g} signs + "
        f"{trip_verifies:g} verifies, the floor {signs} + {verifies}"
    )
    if wall_floor.median > ed25519.median:
        print("  bench error: the floor ran faster than its own Ed25519 work alone: the rounds are too noisy to read")
    over = signs > trip_signs or verifies > trip_verifies
    if over:
        print("  bench error: the floor signs or verifies more than the trips do: it is not a floor")
    report.record("in_process", by_cpu, cpu_floor_rate)
    print(f"  records verified: {rounds * 10 - bad}/{rounds * 10}")
    return 0 if bad == 0 and not over else 1


if __name__ == "__main__":
    raise SystemExit(report.alone("txn", main))
