"""The stale coordinator, as real processes (spec/store.md HATP-STORE-4..6, spec/mcp-binding.md HATP-TRUST-9): two
`servers.coordinator --store postgresql://...` processes (A and B) share one log and one coordinator id, each with
its own key; the suite's four tool servers and the gateway trust both keys under that id. A begins a trip; once
the person approved, A decides commit and its commits leave. Its commit to the payments server is held on the
wire (a TCP relay the test controls) and A is SIGSTOPped. A's lease lapses; B takes the trip over at epoch 2,
recovers it from the log and commits it. Then A's held commit reaches the payments server, and A is SIGCONTed: the
payments server refuses that commit (STALE_COORDINATOR) and the log refuses A's appends; every effect happened
once, and the record verifies.

The relay holds and judges whole requests: the SDK names a request's method in its head (Mcp-Method) and writes
the head and the body separately, so a relay that stopped A on seeing the head alone would release a request
whose body A never sent, which the server then waits for forever (the flake this test had under load)."""

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

from tests.e2e.coordinator_suite import Agent, problems, trip
from tests.e2e.pg_coordinators import launch_coordinator, said, start_receivers
from tests.postgres_cluster import Cluster

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]
TXN = "txn-fence-1"
COMMIT = b"hatp/txn/commit"


def whole_requests(buffer: bytearray) -> list[bytes]:
    """The complete HTTP/1.1 requests at the front of `buffer` (taken out of it): each its head and the
    Content-Length bytes of its body. A request's method is named in its head too (the SDK's Mcp-Method header),
    so a request is judged, held and released whole: never headers on the wire and the body still in the client."""
    found = []
    while (end := buffer.find(b"\r\n\r\n")) >= 0:
        fields = dict(
            (name.strip().lower(), value.strip())
            for name, _, value in (line.partition(":") for line in buffer[:end].decode("latin-1").split("\r\n")[1:])
        )
        assert "transfer-encoding" not in fields, fields  # the SDK's client sends a length; a relay of bytes needs it
        total = end + 4 + int(fields.get("content-length", "0"))
        if len(buffer) < total:
            break
        found.append(bytes(buffer[:total]))
        del buffer[:total]
    return found


class Relay:
    """A TCP relay in front of one server. While `holding`, the requests clients send wait (in order) until
    `release`; `caught` is set once a whole held request (head and body) calls hatp/txn/commit. What the server
    answers is kept in `answers`."""

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
                async for held, request in queue:
                    if held:
                        await self.released.wait()
                        if not reopened:  # what was held goes on a new connection (the old one may be closing)
                            upstream.clear()
                            reopened = True
                    if not upstream:
                        upstream.append(await anyio.connect_tcp("127.0.0.1", self.upstream))
                        tg.start_soon(down, upstream[0])
                    await upstream[0].send(request)

            send, receive = anyio.create_memory_object_stream[tuple[bool, bytes]](max_buffer_size=math.inf)
            tg.start_soon(forward, receive)
            buffer = bytearray()
            async with send:
                async for chunk in client:
                    buffer += chunk
                    for request in whole_requests(buffer):
                        held = self.holding
                        await send.send((held, request))
                        if held and COMMIT in request.partition(b"\r\n\r\n")[2]:
                            self.caught.set()
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


async def test_HATP_TRUST_9_a_coordinator_stopped_past_its_lease_is_fenced_after_another_took_over(
    tmp_path: Path, postgres: Cluster
) -> None:
    async with AsyncExitStack() as stack:
        suite = await start_receivers(tmp_path, postgres, stack, ["a", "b"])  # both keys, one coordinator id
        log_url = postgres.new_database()
        relay, relay_port = await stack.enter_async_context(relay_to(suite.procs["payments"].port))
        a = await launch_coordinator(suite, "a", log_url, routes={"payments": f"http://127.0.0.1:{relay_port}/mcp"})
        b = await launch_coordinator(suite, "b", log_url)
        try:
            with anyio.fail_after(120):
                async with a.client() as client:
                    agent = Agent(client)
                    await agent.begin(trip(TXN, "2026-12-10", "14C"))
                    await agent.asked(TXN)
                relay.holding = True  # from now on what A sends the payments server waits on the wire
                await suite.decide(TXN, "approve")
                await relay.caught.wait()  # A's whole commit to the payments server is on the wire
                os.kill(a.pid, signal.SIGSTOP)  # A holds the lease, its decision durable, its commit in flight

                async with b.client() as client:  # B takes the lapsed lease over and finishes the trip
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
