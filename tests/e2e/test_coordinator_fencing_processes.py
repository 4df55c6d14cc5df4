"""The stale coordinator, as real processes (spec/store.md HATP-STORE-4..6, spec/mcp-binding.md HATP-TRUST-9): two
`servers.coordinator --store postgresql://...` processes (A and B) share one log and one coordinator id, each with
its own key; the suite's four tool servers and the gateway trust both keys under that id. A begins a trip; once
the person approved, A decides commit and its commits leave. Its commit to the payments server is held on the
wire (a TCP relay the test controls) and A is SIGSTOPped. A's lease lapses; B takes the trip over at epoch 2,
recovers it from the log and commits it. Then A's held commit reaches the payments server, and A is SIGCONTed: the
payments server refuses that commit (STALE_COORDINATOR) and the log refuses A's appends; every effect happened
once, and the record verifies."""

from __future__ import annotations

import math
import os
import signal
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import anyio
import psycopg
import pytest
from anyio.abc import SocketStream
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp import Client

from hatp_mcp.mcp.launch import HttpProcess, launch_http
from tests.acme_org import ORG_DIR
from tests.coordinators import trust_coordinator_dirs
from tests.e2e.coordinator_suite import GATEWAY_ARGS, PARTICIPANTS, Agent, problems, trip, uri
from tests.e2e.test_postgresql_suite import PgSuite
from tests.postgres_cluster import Cluster

# known_flaky: about 2 runs in 12 timed out under heavy load waiting for the payments server to answer the commit the
# relay released, after B had committed (the test's relay, not the fencing, is suspected). Left out of make test
# until that is found; tests/runtime/test_coordinator_takeover.py proves the same fencing deterministically.
pytestmark = [pytest.mark.e2e, pytest.mark.anyio, pytest.mark.known_flaky]
TXN = "txn-fence-1"
LEASE = "2"  # seconds: A's lease lapses about 2 s after it is stopped


class Relay:
    """A TCP relay in front of one server. While `holding`, what clients send waits (in order) until `release`;
    `caught` is set once a held chunk names hatp/txn/commit. What the server answers is kept in `answers`."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.holding = False
        self.caught = anyio.Event()
        self.released = anyio.Event()
        self.answers = bytearray()
        self.answered_late = anyio.Event()  # the server answered after `release`

    async def serve(self, client: SocketStream) -> None:
        """One client connection. The upstream connection is opened when there is something to send, again when
        the server closed it, and anew for what was held (a keep-alive connection idle that long may be closing)."""
        upstream: list[SocketStream] = []  # the open connection to the server, if any
        async with client, anyio.create_task_group() as tg:

            async def down(server: SocketStream) -> None:
                async with server:
                    async for chunk in server:
                        self.answers += chunk
                        if self.released.is_set():
                            self.answered_late.set()
                        await client.send(chunk)
                if upstream and upstream[0] is server:
                    upstream.clear()

            async def forward(queue: MemoryObjectReceiveStream[tuple[bool, bytes]]) -> None:
                reopened = False
                async for held, chunk in queue:
                    if held:
                        await self.released.wait()
                        if not reopened:  # what was held goes on a new connection (the old one may be closing)
                            upstream.clear()
                            reopened = True
                    if not upstream:
                        upstream.append(await anyio.connect_tcp("127.0.0.1", self.upstream))
                        tg.start_soon(down, upstream[0])
                    await upstream[0].send(chunk)

            # read ahead of what is held: a request's headers and body may come as separate chunks
            send, receive = anyio.create_memory_object_stream[tuple[bool, bytes]](max_buffer_size=math.inf)
            tg.start_soon(forward, receive)
            async with send:
                async for chunk in client:
                    if self.holding and b"hatp/txn/commit" in chunk:
                        self.caught.set()
                    await send.send((self.holding, chunk))
            tg.cancel_scope.cancel()


@asynccontextmanager
async def relay_to(port: int) -> AsyncIterator[tuple[Relay, int]]:
    relay = Relay(port)
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1", local_port=0)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, relay.serve)
        yield relay, listener.extra(anyio.abc.SocketAttribute.local_port)
        relay.released.set()
        tg.cancel_scope.cancel()


async def coordinator(
    suite: PgSuite, stack: AsyncExitStack, name: str, log_url: str, routes: dict[str, str]
) -> HttpProcess:
    args = [f"--participant={uri(n)}={routes[n]}" for n in PARTICIPANTS]
    args += [f"--participant-keys={uri(n)}={suite.data / n / 'public.jwk.json'}" for n in PARTICIPANTS]
    args += ["--gateway", suite.procs["gateway"].url, *GATEWAY_ARGS, "--poll-seconds", "1", "--retry-seconds", "1"]
    args += ["--store", log_url, "--owner", name, "--lease-seconds", LEASE, "--call-timeout", "60"]
    return await stack.enter_async_context(launch_http("servers.coordinator", suite.data / name, extra=args))


async def said(proc: HttpProcess, text: str, seconds: float = 30) -> None:
    """Wait, bounded, until another process's stderr (read by its launcher's own task) holds `text`: looked at every
    50 ms, as nothing else signals it. Not a timed assertion: a process that never says it fails the test."""
    with anyio.fail_after(seconds):
        while not any(text in line for line in proc.lines):  # noqa: ASYNC110 (another task's lines; no event)
            await anyio.sleep(0.05)


async def test_HATP_TRUST_9_a_coordinator_stopped_past_its_lease_is_fenced_after_another_took_over(
    tmp_path: Path, postgres: Cluster
) -> None:
    async with AsyncExitStack() as stack:
        suite = PgSuite(tmp_path, postgres, stack)
        for name, extra in [*((n, []) for n in PARTICIPANTS), ("gateway", ["--org", str(ORG_DIR)])]:
            # both coordinators' keys, under the one coordinator id, in every receiver's trust list
            trust_coordinator_dirs([tmp_path / name], [tmp_path / "a", tmp_path / "b"])
            suite.stores[name] = postgres.new_database()
            suite.procs[name] = await stack.enter_async_context(
                launch_http(f"servers.{name}", tmp_path / name, extra=[*extra, "--store", suite.stores[name]])
            )
        log_url = postgres.new_database()
        direct = {n: suite.procs[n].url for n in PARTICIPANTS}
        relay, relay_port = await stack.enter_async_context(relay_to(suite.procs["payments"].port))
        a = await coordinator(suite, stack, "a", log_url, {**direct, "payments": f"http://127.0.0.1:{relay_port}/mcp"})
        b = await coordinator(suite, stack, "b", log_url, direct)
        try:
            with anyio.fail_after(120):
                async with Client(a.url) as client:
                    agent = Agent(client)
                    await agent.begin(trip(TXN, "2026-12-10", "14C"))
                    await agent.asked(TXN)
                relay.holding = True  # from now on what A sends the payments server waits on the wire
                await suite.decide(TXN, "approve")
                await relay.caught.wait()  # A's commit to the payments server is on the wire
                os.kill(a.pid, signal.SIGSTOP)  # A holds the lease, its decision durable, its commit in flight

                async with Client(b.url) as client:  # B takes the lapsed lease over and finishes the trip
                    done = await Agent(client).outcome(TXN)
                assert done["outcome"] == "COMMITTED"
                with psycopg.connect(log_url) as conn:
                    lease = conn.execute("SELECT owner, epoch FROM txn_lease WHERE txn_id = %s", (TXN,)).fetchone()
                assert lease == ("b", 2)

                seen = len(relay.answers)
                relay.released.set()  # A's stale commit (signed at epoch 1) reaches the payments server
                await relay.answered_late.wait()
                os.kill(a.pid, signal.SIGCONT)
                await said(a, f"{TXN} taken over")  # its append of the refusal was refused (HATP-STORE-5)
                seat = await suite.tool("airline", "seat_status", {"resource": "LH123/2026-12-10/14C"})
        finally:
            os.kill(a.pid, signal.SIGCONT)

    answer = bytes(relay.answers[seen:])
    assert b"STALE_COORDINATOR" in answer and b"epoch 2" in answer, answer[-600:]  # HATP-TRUST-9: refused
    assert any("HATP-STORE-5" in line or "STALE_COORDINATOR" in line for line in a.lines), a.lines[-5:]
    assert problems(done["record"], tmp_path) == []
    assert (seat["state"], seat["holder"]) == ("taken", TXN)
    with psycopg.connect(log_url) as conn:
        seqs = [r[0] for r in conn.execute("SELECT seq FROM txn_event WHERE txn_id = %s ORDER BY seq", (TXN,))]
        last = conn.execute(
            "SELECT event FROM txn_event WHERE txn_id = %s ORDER BY seq DESC LIMIT 1", (TXN,)
        ).fetchone()
    assert seqs == list(range(len(seqs))) and last is not None and '"record.closed"' in str(last[0])
    assert len(done["record"]["events"]) == len(seqs)  # nothing of A's after B closed the record
    with psycopg.connect(suite.stores["payments"]) as conn:
        epochs = conn.execute("SELECT epoch FROM txn_epochs WHERE txn_id = %s", (TXN,)).fetchall()
    assert epochs == [(2,)]
