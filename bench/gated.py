"""A gated tool call against the same call ungated, over stdio, and the cost of `hatp verify` per event.

The gated side is demo.gated_server's `charge_card` behind `gate_tools`: every call carries a fresh approval (made
beforehand, outside the clock: the gateway and the humans are not what is measured) that the gate checks in full
(the gateway's signature, each person's proof against the Directory-signed cards, quorum, requester, the agent's
request, freshness, the call digest) and spends in its durable replay cache. The baseline is the same server started
`--ungated`; a second ungated process is sent the same approval in `_meta` and ignores it, which tells what carrying
the approval over stdio costs apart from checking it. Calls alternate between the three processes, one at a time
(and a fourth: the gated server verifying an approval's signatures on two threads instead of one, `--verify-threads
2`); p50 of each and the gated/ungated ratio (goal `gated_call` in bench/_report.py: at most a multiple of its
floor). Then the gate alone in this process, and its parts: the Ed25519 verifications of fresh signatures and the
durable commit, which no gate may drop (their sum over the call that carries the approval is the least ratio any gate
can reach here: the approval has to reach the gate), the hop to the gate's thread and the rest. Then verify_record
over signed trip records as `hatp verify` runs it (each record against a keyring loaded for it, so every signature is
verified), on one thread and with the signatures verified ahead on two (`hatp verify --verify-threads 2`): events
checked per second (goal `hatp_verify`: a share of the Ed25519 bound) and CPU per event, beside the same records
against keyrings that verified them already (the Python work alone: every signature is found in the keyring's memo;
not the goal's figure).

Run: `.venv/bin/python -m bench.gated [CALLS]` (default 200)
"""

from __future__ import annotations

import importlib
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError, StdioServerParameters

from bench import _report as report
from bench._cpu import children, cpu_seconds, own_cpu
from demo.gated_server import REQUIRES, approval_gate, build
from hatp_mcp.cli.verify_cmd import checking_keyring, verify_ahead
from hatp_mcp.core.gated_tools.checks import APPROVAL_META_KEY
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.signing.keys import Keyring, b64u_decode, signing_bytes
from hatp_mcp.core.txn.record import signatures_ahead, verify_record
from hatp_mcp.mcp.gated_tools import ApprovalGate, gate_tools, verify_on_two_threads
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.store.replay_cache import SqliteReplayCache
from tests.factories import signed_trip_record

# What the gateway does when the agent asks (route, let two finance approvers decide, sign): the gate tests' own
# helper, loaded by name so the strict type check of bench/ does not take in that test module.
_gate_tests: Any = importlib.import_module("tests.mcp.test_gated_tools")
ARGS: dict[str, Any] = _gate_tests.ARGS
approve: Callable[..., dict[str, Any]] = _gate_tests.approve

ROOT = Path(__file__).resolve().parents[1]


def _params(db: Path, now: str, *extra: str) -> StdioServerParameters:
    org = ROOT / "spec" / "fixtures" / "org"
    args = ["-m", "demo.gated_server", "--db", str(db), "--org", str(org), "--now", now, *extra]
    return StdioServerParameters(command=sys.executable, args=args, cwd=str(ROOT))


class _Side:
    """One server process: the wall time of each call and its CPU over all of them."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self.walls: list[float] = []
        self.cpu = 0.0

    def cpu_now(self) -> float:
        return cpu_seconds(self.pid) if self.pid is not None else 0.0


async def _open(stack: AsyncExitStack, params: StdioServerParameters) -> tuple[Client, int | None]:
    """A client on a new server process, and that process's id (None where /proc cannot tell)."""
    before = set(children())
    client = await stack.enter_async_context(Client(params))
    new = set(children()) - before
    return client, (new.pop() if len(new) == 1 else None)


@dataclass(slots=True)
class _InProcess:
    """The gate alone, in this process, p50 of each part (seconds): the whole check_call, its CPU per call, and
    what it is made of: the Ed25519 verifications alone, the durable commit alone, the hop to the gate's thread."""

    wall: float
    cpu: float
    verifications: int
    calls: int
    fresh: int  # how many of the calls' signed messages no other call (nor this one) signs too
    verify: float
    verify_two: float  # the same verifications split over two threads, as the gate splits them
    commit: float
    commit_cpu: float
    hop: float


async def calls(n: int) -> tuple[_Side, _Side, _Side, _Side, _InProcess]:
    """Interleaved calls to the gated server, the ungated one, and a second ungated one that is sent the same
    approval in _meta and ignores it (what carrying the approval over stdio costs, with no gate); then the gate's
    own work in this process (the same check_call on the same kind of approval, a durable replay cache of its
    own) and its parts."""
    clock = FakeClock()
    now = format_ts(clock.now())
    org = ROOT / "spec" / "fixtures" / "org"
    with tempfile.TemporaryDirectory() as tmp:
        async with AsyncExitStack() as stack:
            gated_c, gated_pid = await _open(stack, _params(Path(tmp) / "gated.db", now))
            plain_c, plain_pid = await _open(stack, _params(Path(tmp) / "plain.db", now, "--ungated"))
            carry_c, carry_pid = await _open(stack, _params(Path(tmp) / "carry.db", now, "--ungated"))
            one_c, one_pid = await _open(stack, _params(Path(tmp) / "two.db", now, "--verify-threads", "2"))
            gated, plain, carry, one = _Side(gated_pid), _Side(plain_pid), _Side(carry_pid), _Side(one_pid)
            try:
                await gated_c.call_tool("charge_card", ARGS)
            except MCPError as exc:  # refused: the error names the call to get approved
                tool_call = (exc.data or {})["data"]["toolCall"]
            else:
                raise SystemExit("the gated server ran an unapproved call")
            # one approval per call (single use), each for its own card, so each is its own ask
            args = [{**ARGS, "card": f"tok_visa_{i:04d}"} for i in range(2 * n + 20)]
            approvals = [approve(tool_call, clock.now(), args=a) for a in args]
            for i in range(n + 10):
                meta: Any = {APPROVAL_META_KEY: approvals[i]}
                # (each gated server spends the approval in its own replay cache)
                turn = [(gated, gated_c, meta), (carry, carry_c, meta), (plain, plain_c, None), (one, one_c, meta)]
                for side, client, with_meta in turn[i % 4 :] + turn[: i % 4]:  # each side leads in turn
                    c0, t0 = side.cpu_now(), time.perf_counter()
                    r = await client.call_tool("charge_card", args[i], meta=with_meta)
                    t1, c1 = time.perf_counter(), side.cpu_now()
                    if i >= 10:  # the first rounds warm every process
                        assert not r.is_error, r
                        side.walls.append(t1 - t0)
                        side.cpu += c1 - c0
        inproc = await _in_process(Path(tmp), org, clock, args[n + 10 :], approvals[n + 10 :])
    return gated, plain, carry, one, inproc


async def _in_process(
    tmp: Path, org: Path, clock: FakeClock, args: list[dict[str, Any]], approvals: list[dict[str, Any]]
) -> _InProcess:
    """The gate alone, in process: what it must do for each call (list and digest the tool, every check, the
    nonces spent in one durable commit), with no MCP around it; and, in the same rounds (so that each sees the
    same disk and the same neighbours), its parts on their own: the bare Ed25519 verifications of the call's
    signatures, one durable commit spending as many keys in a cache of its own, and an empty hop to the gate's
    thread."""
    server = build(tmp / "plain-again.db", org, clock, gated=False)
    gate = approval_gate(tmp / "in-process.db", org, clock)
    gate_tools(server, gate, tools={"charge_card": {"requires": REQUIRES}})
    alone = SqliteReplayCache(tmp / "commit-alone.db")
    second = ThreadPoolExecutor(max_workers=1, thread_name_prefix="bench-verify")
    # The signatures a gate must verify on every call, each over bytes it has never seen: the gateway's on the
    # approval, each person's on their proof, the agent's on its request.
    signed = [_signed_objects(approval, gate) for approval in approvals]
    walls: list[float] = []
    verify_walls: list[float] = []
    verify_two_walls: list[float] = []
    commit_walls: list[float] = []
    commit_cpus: list[float] = []
    hops: list[float] = []
    cpu = 0.0
    for i, (a, approval) in enumerate(zip(args, approvals, strict=True)):
        # Which fsync comes first in a round matters (the first flushes what the neighbours left in the journal),
        # so the whole call and the commit alone take turns.
        if i % 2:
            _commit_alone(alone, i, len(signed[i]), clock, commit_walls, commit_cpus)
        c0, t0 = own_cpu(), time.perf_counter()
        await gate.check_call(server, "charge_card", a, approval)
        walls.append(time.perf_counter() - t0)
        cpu += own_cpu() - c0
        if not i % 2:
            _commit_alone(alone, i, len(signed[i]), clock, commit_walls, commit_cpus)
        t0 = time.perf_counter()
        for key, sig, message in signed[i]:
            key.verify(sig, message)
        verify_walls.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        _verify_on_two_threads(second, signed[i])
        verify_two_walls.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        with anyio.CancelScope(shield=True):
            await gate.in_thread(_nothing)
        hops.append(time.perf_counter() - t0)
    alone.close()
    second.shutdown()
    gate.cache.close()
    med = statistics.median
    return _InProcess(
        wall=med(walls),
        cpu=cpu / len(walls),
        verifications=len(signed[0]),
        calls=len(walls),
        fresh=_fresh(signed),
        verify=med(verify_walls),
        verify_two=med(verify_two_walls),
        commit=med(commit_walls),
        commit_cpu=med(commit_cpus),
        hop=med(hops),
    )


def _verify_on_two_threads(second: ThreadPoolExecutor, signed: list[tuple[Any, bytes, bytes]]) -> None:
    """The bare verifications split as the gate splits them (hatp_mcp.mcp.gated_tools.verify_on_two_threads)."""
    verify_on_two_threads(signed, _bare_verify, second)


def _bare_verify(triple: tuple[Any, bytes, bytes]) -> None:
    key, sig, message = triple
    key.verify(sig, message)


def _nothing() -> None:
    return None


def _commit_alone(
    cache: SqliteReplayCache, i: int, spent: int, clock: FakeClock, walls: list[float], cpus: list[float]
) -> None:
    """One durable commit spending `spent` fresh keys, as a gated call does: its wall and CPU time appended."""
    keys = [f"bench-{i}-{k}" for k in range(spent)]
    t0, c0 = time.perf_counter(), time.thread_time()
    cache.consume_all("bench", keys, approval_id=f"bench-{i}", expires_at="2999-01-01T00:00:00Z", now=clock.now())
    cpus.append(time.thread_time() - c0)
    walls.append(time.perf_counter() - t0)


def _signed_objects(approval: dict[str, Any], gate: ApprovalGate) -> list[tuple[Any, bytes, bytes]]:
    """(public key, signature, signed bytes) of every signature the gate verifies in `approval`."""
    out = [_triple(approval, gate.trusted)]
    for d in approval["decisions"]:
        ring = gate.humans.keyring_for(d["proof"]["human"])
        assert ring is not None
        out.append(_triple(d["proof"], ring))
    request = approval.get("request")
    if request is not None and gate.agents is not None:
        ring = gate.agents.keyring_for(request["agent"])
        assert ring is not None
        out.append(_triple(request, ring))
    return out


def _fresh(signed: list[list[tuple[Any, bytes, bytes]]]) -> int:
    """How many (key, signed bytes) pairs occur once over all calls: a pair met again (the same card, say) could be
    remembered by its exact bytes; one met once must be verified."""
    seen: dict[tuple[bytes, bytes], int] = {}
    for call in signed:
        for key, _sig, message in call:
            pair = (key.public_bytes_raw(), message)
            seen[pair] = seen.get(pair, 0) + 1
    return sum(1 for n in seen.values() if n == 1)


def _triple(obj: dict[str, Any], ring: Keyring) -> tuple[Any, bytes, bytes]:
    sig = obj["signature"]
    entry = ring.get(sig["kid"])
    assert entry is not None
    return entry.key, b64u_decode(sig["sig"]), signing_bytes(obj)


@dataclass(slots=True)
class _VerifyRate:
    """hatp verify's figures: per thread count, each round's cold events/s and CPU seconds per event (each record
    against a keyring loaded for it: every signature verified); the warm events/s; events per record."""

    cold: dict[int, list[tuple[float, float]]]
    warm: float
    per_record: int
    signatures: int  # the signatures check_record verifies in one record (all the records carry as many)
    alone: list[float]  # per round: CPU seconds per event of the records' own signatures verified fresh, nothing else


def verify_rate(rounds: int = 200, threads: tuple[int, ...] = (1, 2)) -> _VerifyRate:
    """verify_record as `hatp verify` runs it: each record against a keyring loaded for it alone
    (verify_cmd.checking_keyring: no memo on one thread, an empty one on more, so every signature in the record is
    verified), its signatures first verified ahead on N threads as `--verify-threads N` does
    (verify_cmd.verify_ahead; N = 1: none ahead); the
    thread counts take turns leading each round. Then the same records against keyrings that have already
    verified them (every signature found in the keyring's memo, none verified again): the Python work alone."""
    records: list[tuple[dict[str, Any], Keyring]] = []
    for i in range(20):
        record, ring, _ = signed_trip_record(f"txn-bench-verify-{i}")
        records.append((record, ring))
    events = sum(len(r["events"]) for r, _ in records)
    triples = [signatures_ahead(record, ring) for record, ring in records]  # (key, signature, signed bytes)
    signed = {len(t) for t in triples}  # counted from the records
    assert len(signed) == 1, signed
    cold: dict[int, list[tuple[float, float]]] = {n: [] for n in threads}
    alone: list[float] = []
    pool = ThreadPoolExecutor(max_workers=max(threads) - 1 or 1, thread_name_prefix="bench-verify-ahead")
    for r in range(max(1, rounds // 20)):
        cpu = time.process_time()  # the floor, in the same rounds and by the same clock as the goal's figure
        for record_triples in triples:
            for entry, sig, message in record_triples:
                entry.key.verify(sig, message)
        alone.append((time.process_time() - cpu) / events)
        for n in threads[r % len(threads) :] + threads[: r % len(threads)]:
            fresh = [(record, checking_keyring(ring, n)) for record, ring in records]  # as `hatp verify` loads it
            start, cpu = time.perf_counter(), time.process_time()
            for record, ring in fresh:
                verify_ahead(record, ring, n, pool)
                problems = verify_record(record, ring)
                assert not problems, problems
            wall, used = time.perf_counter() - start, time.process_time() - cpu
            cold[n].append((events / wall, used / events))
    pool.shutdown()
    warm = float("inf")
    for _ in range(max(1, rounds // 20)):
        start = time.perf_counter()
        for record, ring in records:  # these keyrings verified their records' signatures in the first round
            problems = verify_record(record, ring)
            assert not problems, problems
        warm = min(warm, time.perf_counter() - start)
    return _VerifyRate(cold, events / warm, events // len(records), signed.pop(), alone)


def _signature_floor(found: _VerifyRate) -> str:
    """The least time per event the signatures set while every one is verified, hence the most events/s one thread
    (and two, with a core free for the second) can reach: the records' own signatures, each verified fresh over its
    own bytes, by process CPU in every round (the median round)."""
    per_event = statistics.median(found.alone)
    each = per_event * found.per_record / found.signatures
    return (
        f"the floor the signatures set, same rounds: {found.signatures} signatures in a {found.per_record}-event "
        f"record ({found.signatures / found.per_record:.2f} per event), each verified fresh over its own bytes and "
        f"nothing else done: {per_event * 1e6:.0f} us of CPU per event ({each * 1e6:.0f} us a verification), so at "
        f"most {1 / per_event:,.0f} events/s on one thread, {2 / per_event:,.0f} on two with a core free for the "
        "second"
    )


def _round_ratios(a: list[float], b: list[float], rounds: int = 5) -> list[float]:
    """p50(a)/p50(b) over each of `rounds` consecutive slices of the calls (one slice per call when fewer)."""
    size = max(1, len(a) // rounds)
    return [
        statistics.median(a[i : i + size]) / statistics.median(b[i : i + size])
        for i in range(0, size * (len(a) // size), size)
    ]


def main() -> int:
    n = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else report.rounds(200, 20)
    gated, plain, carry, one, gate = anyio.run(calls, n)
    g, u, c, o = (statistics.median(s.walls) for s in (gated, plain, carry, one))
    ratio = g / u
    print(f"a tool call over stdio, gated (approval checked, replay cache written) against ungated, {n} calls each,")
    print("  alternating (p50 wall; CPU per call of each server process)")
    print(f"  ungated (baseline)  p50 {u * 1e3:7.2f} ms   server CPU {plain.cpu / n * 1e3:6.2f} ms/call")
    print(
        f"  ungated, carrying the approval in _meta (ignored)  p50 {c * 1e3:7.2f} ms   server CPU "
        f"{carry.cpu / n * 1e3:6.2f} ms/call: {c / u:.2f}x, what moving the approval over stdio costs"
    )
    print(f"  gated               p50 {g * 1e3:7.2f} ms   server CPU {gated.cpu / n * 1e3:6.2f} ms/call")
    per_round = _round_ratios(gated.walls, plain.walls)
    print(
        f"  gated / ungated: {ratio:.2f}x over all calls; in {len(per_round)} consecutive rounds of "
        f"{n // len(per_round)} calls {report.Spread.of(per_round).show(unit='x')}"
    )
    if plain.cpu > 0:
        print(f"  server CPU per call, gated / ungated: {gated.cpu / plain.cpu:.2f}x")
    print(
        f"  gated, the signatures verified on two threads (--verify-threads 2)  p50 {o * 1e3:7.2f} ms"
        f"   server CPU {one.cpu / n * 1e3:6.2f} ms/call: {o / u:.2f}x; two threads / one thread: {o / g:.2f}"
    )
    floor = (u + gate.wall) / u
    carried = max(u, c)  # carrying the approval never makes a call cheaper: below u is noise
    print(
        f"  the gate's own work in process (tool digest, every check, the nonces spent, one durable commit): "
        f"p50 {gate.wall * 1e3:.2f} ms, CPU {gate.cpu * 1e3:.2f} ms/call: the ratio cannot go below "
        f"{floor:.2f}x on this machine while that work stays (same run); with the approval carried, "
        f"{(carried + gate.wall) / u:.2f}x"
    )
    rest = gate.wall - gate.verify - gate.commit - gate.hop  # p50s of parts timed alone: noise can make it < 0
    print(
        f"    its parts timed alone in the same rounds (p50): {gate.verifications} Ed25519 verifications of fresh "
        f"signatures {gate.verify * 1e3:.2f} ms, one durable commit (WAL, synchronous=FULL) {gate.commit * 1e3:.2f} "
        f"ms (CPU {gate.commit_cpu * 1e3:.2f}), an empty hop to the gate's thread {gate.hop * 1e3:.2f} ms; the rest "
        f"(parsing, canonical JSON, digests, every other check) about {rest * 1e3:.2f} ms"
    )
    total = gate.verifications * gate.calls
    print(
        f"    the {gate.verifications} verifications: the gateway's signature over the approval, each approver's over "
        f"their decision proof, the agent's over its request; {gate.fresh} of {total} signed messages occur in one "
        f"call only (each binds the call digest and a nonce), so none could be remembered. The Directory's "
        f"signatures on the cards are verified once, when the gate loads them, not per call"
    )
    # The approval has to reach the gate: a call that carries it over stdio (and a gate that ignores it) is the
    # least a gated call can cost before anything is checked, so the floor stands on it, not on the bare call.
    least = (carried + gate.verify + gate.commit) / u
    least_two = (carried + gate.verify_two + gate.commit) / u
    print(
        f"  what no gate can drop (the approval carried to it, those verifications and the commit), same run: "
        f"verified one after another ({gate.verify * 1e3:.2f} ms) the ratio cannot go below {least:.2f}x (without "
        f"the approval's carriage {(u + gate.verify + gate.commit) / u:.2f}x); verified on two threads, as "
        f"`--verify-threads 2` does ({gate.verify_two * 1e3:.2f} ms, p50 of the same signatures), {least_two:.2f}x. "
        f"The goal is checked against the measured ratio above; the two-thread figure is the least a gate that "
        f"verifies in parallel reaches on this machine, and only with a core free for the second thread"
    )
    report.record(
        "gated_call", report.Spread.of(per_round), least, note="wall; the floor carries the approval and commits"
    )
    found = verify_rate(rounds=report.rounds(200, 40))
    print(
        f"hatp verify (verify_record) on signed trip records of {found.per_record} events, cold: each record against "
        "a keyring loaded for it, every signature verified, as `hatp verify` does"
    )
    for n, figures in found.cold.items():
        rates = [rate for rate, _ in figures]
        best = max(rates)
        cpu = min(c for _, c in figures)
        how = "one thread" if n == 1 else f"--verify-threads {n} (signatures verified ahead on {n} threads)"
        print(
            f"  {how}: {report.Spread.of(rates).show(unit='events/s')} over {len(rates)} rounds (best {best:,.0f}), "
            f"CPU {cpu * 1e6:.0f} us/event (least round)"
        )
    print(
        f"  aside, not the goal's figure: {found.warm:,.0f} events/s against keyrings that already verified these "
        f"signatures (found in the keyring's memo, none verified again): the Python work alone"
    )
    print("  " + _signature_floor(found))
    bound = report.Spread.of(1 / a for a in found.alone)
    # by CPU: the floor is Ed25519's CPU work (a fresh verification, too short to be preempted often), while a
    # round of 20 records is long enough for the neighbours' load to stretch its wall time
    by_cpu = report.Spread.of(1 / c for _, c in found.cold[1])
    print(f"  one thread by CPU: {by_cpu.show(unit='events/s')} (the goal's figure; the wall's above)")
    report.record("hatp_verify", by_cpu, bound, note="by CPU; one thread")
    return 0


if __name__ == "__main__":
    raise SystemExit(report.alone("gated", main))
