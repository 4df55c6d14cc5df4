"""`hatp serve` and `hatp connect` as real processes, on a fresh organisation made by `hatp init-org`.

One service for the module (eight processes: the supervisor, the gateway, the Directory, four tool servers, the
coordinator). The agent reaches it the way a per-call client does: every call through a NEW `hatp connect
coordinator` process (a new stdio session), closed after the call. The approver decides in the terminal inbox,
another process sharing the gateway's store.

- begin through one bridge, the human approves, a new bridge sees COMMITTED (HATP-MCP-41);
- the bridge SIGKILLed while the approval is pending: the trip still commits, and a new bridge sees it;
- a tool server SIGKILLed mid-transaction is restarted by the service on its port, and the trip commits
  (HATP-MCP-43);
- a second service on the same organisation exits 2 naming the holder (HATP-MCP-42);
- the gateway's port taken: the service refuses at start and starts no coordinator (HATP-MCP-44);
- SIGTERM stops the service and every child; nothing is left (HATP-MCP-41);
- on a fresh organisation two bridges started at once start one service, which outlives them; SIGKILLed, it
  takes every child with it (HATP-MCP-41);
- a bridge given a 0600 token file sends it as a bearer token and never logs it (HATP-MCP-46);
- a client without the organisation's token is refused and begins nothing (HATP-MCP-49); at the gateway its
  tools and reads are refused too, while the gateway bridge gets in (HATP-GW-89);
- the MCP Inspector's CLI (npm, pinned by tests/e2e/inspector's lockfile), one process per call through the config
  `hatp mcp-config` prints: begin, Ben approves, a later call sees COMMITTED (HATP-MCP-41);
- on a fresh organisation whose service is stopped, the Inspector's CLI lists the coordinator's tools within its
  own connect timeout: its bridge starts the service, whose children start side by side (HATP-MCP-44);
- the service SIGKILLed while the approval is pending and started again: the coordinator takes the trip up from
  its log, the human approves, a new bridge sees COMMITTED (HATP-TXN-22).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from subprocess import PIPE
from typing import Any

import anyio
import anyio.abc
import pytest
from anyio.abc import Process
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from hatp_mcp.cli import main as hatp
from hatp_mcp.cli.org_layout import OrgLayout, load_suite
from hatp_mcp.mcp.call import call_raw
from hatp_mcp.runtime.service.supervisor import SERVICE_READY, service_folder
from hatp_mcp.store.data_lock import DataLock, held_by
from tests.e2e.coordinator_suite import alive, child_pids

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

PYTHON = sys.executable
HATP = str(Path(sys.executable).parent / "hatp")
BEN = "human://example.org/ben"


def make_org(home: Path) -> OrgLayout:
    """The README's organisation: Ann asks, the agent Claude acts for her, Ben approves travel with his own key."""
    root = home / "org"
    assert hatp(["keys", "new", "--out", str(home / "ben.jwk.json"), "--role", "approver"]) == 0
    ben = ["--authority", "travel.spend=5000:USD", "--decision-key", str(home / "ben.jwk.json")]
    steps = [
        ["init-org", str(root), "--name", "example.org"],
        ["card", "person", "--org", str(root), "ann", "--display", "Ann Lee", "--role", "travel-requester"],
        ["card", "person", "--org", str(root), "ben", "--display", "Ben Ng", "--role", "finance-approver", *ben],
        ["card", "agent", "--org", str(root), "claude", "--acts-for", "ann"],
    ]
    for step in steps:
        assert hatp(step) == 0, step
    return OrgLayout(root)


@dataclass
class Service:
    layout: OrgLayout
    process: Process
    home: Path

    def status(self) -> dict[str, Any]:
        value: dict[str, Any] = json.loads((service_folder(self.layout.root) / "status.json").read_text())
        return value

    def pid(self, child: str) -> int:
        pid = self.status()["children"][child]["pid"]
        assert isinstance(pid, int)
        return pid


async def start_service(layout: OrgLayout, *extra: str) -> tuple[Process, list[str]]:
    """`hatp serve` started; returns once it printed its readiness line (or exited: the lines say why)."""
    cmd = [HATP, "serve", "--org", str(layout.root), *extra]
    process = await anyio.open_process(cmd, stdout=PIPE, stderr=PIPE)
    assert process.stdout is not None
    out = BufferedByteReceiveStream(process.stdout)
    lines: list[str] = []
    with anyio.fail_after(120):
        while True:
            try:
                line = (await out.receive_until(b"\n", 1 << 16)).decode()
            except (anyio.EndOfStream, anyio.IncompleteRead):
                break
            lines.append(line)
            if line == SERVICE_READY:
                break
    return process, lines


@pytest.fixture(scope="module")
async def service(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Service]:
    home = tmp_path_factory.mktemp("service")
    layout = make_org(home)
    process, lines = await start_service(layout, "--poll-seconds", "1", "--retry-seconds", "1")
    assert lines[-1:] == [SERVICE_READY], lines
    try:
        yield Service(layout, process, home)
    finally:
        if process.returncode is None:
            process.send_signal(signal.SIGTERM)
            with anyio.fail_after(30):
                await process.wait()


@asynccontextmanager
async def bridge(layout: OrgLayout, server: str = "coordinator") -> AsyncIterator[Client]:
    """A NEW stdio session: `hatp connect SERVER` started as a client that starts a command would start it."""
    params = StdioServerParameters(command=HATP, args=["connect", server, "--org", str(layout.root)])
    with (layout.root.parent / "bridge.stderr").open("a") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            yield client


async def begin_trip(layout: OrgLayout, name: str, day: int) -> str:
    """As a model would, through its own bridge: read the example plan, make it its own (its id, the trip's day,
    so trips of one module book different rooms and seats) and begin it. Returns the txnId."""
    async with bridge(layout) as agent:
        (example,) = (await agent.read_resource("hatp://examples/trip-plan")).contents
        plan = json.loads(example.text)  # type: ignore[union-attr]
        plan["txnId"] = f"txn-service-{name}"
        date = f"2026-12-{day:02d}"
        for branch in plan["branches"]:
            args = branch["args"]
            for key in ("date", "checkIn"):
                if key in args:
                    args[key] = date
            if "start" in args:
                args["start"] = f"{date}T09:00:00Z"
        began = await agent.call_tool("begin_transaction", {"plan": plan})
        assert not began.is_error, began.content
    txn_id: str = plan["txnId"]
    return txn_id


async def status(layout: OrgLayout, txn_id: str, wait: int = 0) -> dict[str, Any]:
    """transaction status through a NEW bridge; with `wait`, up to `wait` seconds for the outcome and then as long
    again for the closed record (HATP-MCP-66: a committed trip is answered before its holds commit)."""
    async with bridge(layout) as agent:
        got = await call_raw(agent, "hatp/txn/status", {"txnId": txn_id, "waitSeconds": wait}, wait + 30)
        if wait and got.get("outcome") and not got.get("closed"):
            got = await call_raw(agent, "hatp/txn/status", {"txnId": txn_id, "waitSeconds": wait}, wait + 30)
        return got


async def approve(service: Service, txn_id: str) -> None:
    """Ben approves in the terminal inbox, signing with his own key; waits until the ask is there."""
    gateway = service.layout.data("gateway")
    cmd = [HATP, "inbox", "--data", str(gateway), "approve", f"{txn_id}/finance", "--as", BEN]
    done = await anyio.run_process([*cmd, "--key", str(service.home / "ben.jwk.json")], check=False)
    assert done.returncode == 0, done.stderr.decode()


async def asked(layout: OrgLayout, txn_id: str) -> None:
    """Until the coordinator has asked the gateway (its status names the pending approval)."""
    while True:
        now = await status(layout, txn_id)
        if any(v.get("decision") == "pending" for v in now.get("votes", [])) or now.get("state") == "approving":
            return
        assert now.get("outcome") is None, json.dumps(now)[:3000]


async def test_HATP_MCP_41_a_trip_begun_through_one_bridge_commits_and_a_new_bridge_sees_it(
    service: Service,
) -> None:
    with anyio.fail_after(120):
        txn_id = await begin_trip(service.layout, "one-bridge", 20)
        await asked(service.layout, txn_id)
        await approve(service, txn_id)
        done = await status(service.layout, txn_id, wait=60)
    assert done["outcome"] == "COMMITTED", done


async def test_HATP_MCP_41_the_bridge_killed_while_the_approval_is_pending_and_the_trip_still_commits(
    service: Service,
) -> None:
    with anyio.fail_after(120):
        txn_id = await begin_trip(service.layout, "bridge-killed", 21)
        async with bridge(service.layout) as agent:
            [pid] = child_pids(os.getpid(), "connect coordinator")
            os.kill(pid, signal.SIGKILL)  # the client's process dies with its session open
            with pytest.raises(Exception):  # noqa: B017 - the session is gone, however the SDK says it
                await agent.list_tools()
        await asked(service.layout, txn_id)
        await approve(service, txn_id)
        done = await status(service.layout, txn_id, wait=60)
    assert done["outcome"] == "COMMITTED", done


async def test_HATP_MCP_43_a_tool_server_killed_mid_transaction_is_restarted_and_the_trip_commits(
    service: Service,
) -> None:
    hotel = service.pid("hotel")
    port = service.status()["children"]["hotel"]["port"]
    with anyio.fail_after(120):
        txn_id = await begin_trip(service.layout, "hotel-killed", 22)
        await asked(service.layout, txn_id)  # every branch prepared: the room is held in the hotel's store
        os.kill(hotel, signal.SIGKILL)
        await approve(service, txn_id)
        done = await status(service.layout, txn_id, wait=90)
    after = service.status()["children"]["hotel"]
    assert done["outcome"] == "COMMITTED", done
    assert after["restarts"] >= 1 and after["pid"] != hotel and after["port"] == port
    assert not alive(hotel)


async def test_HATP_TXN_38_the_gateway_killed_while_the_approval_is_pending_is_waited_for_and_the_trip_commits(
    service: Service,
) -> None:
    """The gateway alone dies while Ben's ask is pending; the service starts it again. The coordinator's polls
    meanwhile get no answer (connection refused: `approval.unanswered`, never a no), it re-attaches to the ask the
    gateway kept, Ben approves, and the trip commits."""
    gateway = service.pid("gateway")
    with anyio.fail_after(120):
        txn_id = await begin_trip(service.layout, "gateway-killed", 25)
        await prepared_and_asked(service.layout, txn_id)
        os.kill(gateway, signal.SIGKILL)
        await approve(service, txn_id)  # the terminal inbox reads the gateway's store: the ask survived the kill
        done = await status(service.layout, txn_id, wait=90)
    after = service.status()["children"]["gateway"]
    assert done["outcome"] == "COMMITTED", json.dumps(done)[:3000]
    assert after["restarts"] >= 1 and after["pid"] != gateway and not alive(gateway)
    assert done["closed"], json.dumps(done)[:3000]
    events = [e["event"] for e in done["record"]["events"]]
    assert "approval.unanswered" in events and "call.failed" not in events  # waited for, not failed


async def prepared_and_asked(layout: OrgLayout, txn_id: str) -> None:
    """Until the log holds every branch's yes vote and the gateway's pending vote: the APPROVING point."""
    while True:
        now = await status(layout, txn_id)
        votes = {v["branchId"]: v["decision"] for v in now.get("votes", [])}
        if votes.pop("finance", None) == "pending" and len(votes) == 4 and set(votes.values()) == {"yes"}:
            return
        assert now.get("outcome") is None, json.dumps(now)[:3000]


async def test_HATP_TXN_22_the_service_sigkilled_while_the_approval_is_pending_restarts_and_the_trip_commits(
    tmp_path: Path,
) -> None:
    """The whole service dies (the supervisor SIGKILLed; every child follows it), is started again on the same
    organisation, and the coordinator takes the transaction up from its log: the human approves in the inbox
    afterwards, and a new bridge sees COMMITTED."""
    layout = make_org(tmp_path)
    args = ("--poll-seconds", "1", "--retry-seconds", "1")
    first, lines = await start_service(layout, *args)
    assert lines[-1:] == [SERVICE_READY], lines
    again: Process | None = None
    try:
        with anyio.fail_after(240):
            txn_id = await begin_trip(layout, "service-killed", 23)
            await prepared_and_asked(layout, txn_id)
            children = json.loads((service_folder(layout.root) / "status.json").read_text())["children"]
            pidfds = [os.pidfd_open(p) for p in [first.pid, *(c["pid"] for c in children.values())]]
            try:
                os.kill(first.pid, signal.SIGKILL)
                for pidfd in pidfds:
                    await anyio.wait_readable(pidfd)  # readable once that process has ended
            finally:
                for pidfd in pidfds:
                    os.close(pidfd)
            await first.wait()
            again, lines = await start_service(layout, *args)
            assert lines[-1:] == [SERVICE_READY], lines
            await approve(Service(layout, again, tmp_path), txn_id)
            done = await status(layout, txn_id, wait=90)
    finally:
        for process in (first, again):
            if process is not None and process.returncode is None:
                process.send_signal(signal.SIGTERM)
                with anyio.fail_after(30):
                    await process.wait()
    assert done["outcome"] == "COMMITTED", json.dumps(done)[:3000]
    recovered = [e["body"] for e in done["record"]["events"] if e["event"] == "coordinator.recovered"]
    assert recovered == [{"decision": "resumed", "phase": "approving"}]


async def test_HATP_MCP_42_a_second_service_on_the_same_organisation_exits_2_naming_the_holder(
    service: Service,
) -> None:
    with anyio.fail_after(30):
        done = await anyio.run_process([HATP, "serve", "--org", str(service.layout.root)], check=False)
    said = done.stderr.decode()
    assert done.returncode == 2
    assert f"pid {service.process.pid}" in said and "HATP-MCP-42" in said


async def test_HATP_MCP_44_the_gateway_port_taken_the_service_refuses_at_start_and_starts_no_coordinator(
    tmp_path: Path,
) -> None:
    layout = make_org(tmp_path)
    port = load_suite(layout.root).gateway_mcp_port
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", port))
        squatter.listen()
        with anyio.fail_after(60):
            process, lines = await start_service(layout)
            await process.wait()
            assert process.stderr is not None
            said = (await process.stderr.receive(1 << 16)).decode()
    children = json.loads((service_folder(layout.root) / "status.json").read_text())["children"]
    assert process.returncode == 1 and lines == []
    assert f"gateway: 127.0.0.1:{port} is taken" in said and "HATP-MCP-44" in said
    assert children["coordinator"]["state"] == "waiting" and children["coordinator"]["pid"] is None


async def test_HATP_MCP_49_a_client_without_the_organisations_token_is_refused_and_nothing_begins(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    url = service.status()["children"]["coordinator"]["url"]
    token = service.layout.private / "clients" / "claude.token"
    with anyio.fail_after(60):
        async with Client(url) as anonymous:
            with pytest.raises(MCPError) as err:
                await anonymous.call_tool("begin_transaction", {"plan": {"txnId": "txn-service-no-token"}})
        async with bridge(service.layout) as agent:  # the organisation's own client: its bridge sends the token
            pending = await agent.call_tool("list_pending", {})
    data = err.value.error.data
    assert isinstance(data, dict) and (data["rule"], data["code"]) == ("HATP-MCP-53", "CALLER_UNPROVEN")
    assert not pending.is_error and "txn-service-no-token" not in json.dumps(pending.structured_content)
    assert token.stat().st_mode & 0o077 == 0
    secret = token.read_text().strip()
    assert secret not in (service_folder(service.layout.root) / "callers.json").read_text()
    capsys.readouterr()
    assert hatp(["mcp-config", "--org", str(service.layout.root)]) == 0
    printed = capsys.readouterr().out
    assert json.loads(printed)["httpServers"]["hatp-coordinator"]["tokenFile"] == str(token)
    assert secret not in printed


async def test_HATP_GW_89_the_gateways_tools_refuse_a_client_without_the_token_and_serve_the_bridge(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    url = service.status()["children"]["gateway"]["url"]
    with anyio.fail_after(60):
        async with Client(url) as anonymous:
            listed = await anonymous.list_tools()  # the listings stay open
            with pytest.raises(MCPError) as err:
                await anonymous.call_tool("list_asks", {})
        async with bridge(service.layout, "gateway") as agent:  # the bridge sends the organisation's token
            asks = await agent.call_tool("list_asks", {})
    data = err.value.error.data
    assert isinstance(data, dict) and (data["rule"], data["code"]) == ("HATP-GW-89", "CALLER_UNPROVEN")
    assert "list_asks" in {t.name for t in listed.tools} and not asks.is_error, asks.content
    capsys.readouterr()
    assert hatp(["mcp-config", "--org", str(service.layout.root)]) == 0
    token = service.layout.private / "clients" / "claude.token"
    assert json.loads(capsys.readouterr().out)["httpServers"]["hatp-gateway"]["tokenFile"] == str(token)


INSPECTOR = Path(__file__).with_name("inspector") / "node_modules" / ".bin" / "mcp-inspector"


async def inspector(config: Path, method: str, *args: str) -> dict[str, Any]:
    """One call of the MCP Inspector's CLI (npm, tests/e2e/inspector, pinned by its lockfile) through the config
    `hatp mcp-config` printed: it starts `hatp connect coordinator` for this one call and ends it after."""
    if not INSPECTOR.exists():
        pytest.fail("the MCP Inspector CLI is not installed: run `make inspector` (needs node and npm)")
    cmd = [str(INSPECTOR), "--cli", "--config", str(config), "--server", "hatp-coordinator", "--method", method]
    # no OS keychain here: the Inspector keeps its (unused) secrets in memory instead of asking for one
    env = {**os.environ, "MCP_INSPECTOR_SECRET_STORE": "memory"}
    done = await anyio.run_process([*cmd, *args], check=False, env=env)
    assert done.returncode == 0, (done.stdout.decode()[-2000:], done.stderr.decode()[-2000:])
    said: dict[str, Any] = json.loads(done.stdout.decode())
    return said


async def test_HATP_MCP_41_the_inspector_cli_a_process_per_call_begins_a_trip_that_commits_after_approval(
    service: Service, capsys: pytest.CaptureFixture[str]
) -> None:
    """A client nobody here wrote, set up as the README says: the config `hatp mcp-config` prints, one process
    per call. Begin, Ben approves in between, and a later call's status shows COMMITTED."""
    capsys.readouterr()
    assert hatp(["mcp-config", "--org", str(service.layout.root)]) == 0
    config = service.home / "inspector.json"
    config.write_text(capsys.readouterr().out)
    with anyio.fail_after(180):
        read = await inspector(config, "resources/read", "--uri", "hatp://examples/trip-plan")
        plan = json.loads(read["contents"][0]["text"])
        plan["txnId"] = "txn-service-inspector"
        for branch in plan["branches"]:  # a day of its own: the module's other trips book other rooms and seats
            args = branch["args"]
            for key in ("date", "checkIn"):
                if key in args:
                    args[key] = "2026-12-24"
            if "start" in args:
                args["start"] = "2026-12-24T09:00:00Z"
        began = await inspector(
            config, "tools/call", "--tool-name", "begin_transaction", "--tool-arg", f"plan={json.dumps(plan)}"
        )
        assert not began.get("isError"), began
        await asked(service.layout, plan["txnId"])
        await approve(service, plan["txnId"])
        arg = ["--tool-arg", f"txn_id={plan['txnId']}", "--tool-arg", "wait_seconds=50"]
        done = await inspector(config, "tools/call", "--tool-name", "transaction_status", *arg)
    assert not done.get("isError"), done
    assert done["structuredContent"]["outcome"] == "COMMITTED", done


async def test_HATP_MCP_44_the_inspector_cli_lists_the_coordinators_tools_from_a_stopped_service_within_its_timeout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A newcomer's first call: no service runs; the Inspector's CLI, with its own connect timeout (30 s for a
    config's server) and nothing passed to stretch it, starts `hatp connect coordinator`, which starts the service:
    the tools are listed before the Inspector gives up. The service started outlives the call and is stopped after."""
    layout = make_org(tmp_path)
    lock = service_folder(layout.root) / "service.lock"
    assert held_by(lock) is None
    capsys.readouterr()
    assert hatp(["mcp-config", "--org", str(layout.root)]) == 0
    config = tmp_path / "inspector.json"
    config.write_text(capsys.readouterr().out)
    assert "connectionTimeout" not in config.read_text()  # the Inspector's default bound, as a newcomer has it
    try:
        with anyio.fail_after(120):
            listed = await inspector(config, "tools/list")
    finally:
        holder = held_by(lock)
        if holder is not None:
            pidfd = os.pidfd_open(holder["pid"])
            try:
                os.kill(holder["pid"], signal.SIGTERM)
                with anyio.fail_after(60):
                    await anyio.wait_readable(pidfd)  # readable once the service has ended
            finally:
                os.close(pidfd)
    assert holder is not None  # the bridge started the service
    assert "begin_transaction" in {t["name"] for t in listed["tools"]}


async def test_HATP_MCP_41_sigterm_stops_the_service_and_every_child_is_gone(service: Service) -> None:
    pids = [c["pid"] for c in service.status()["children"].values()]
    service.process.send_signal(signal.SIGTERM)
    with anyio.fail_after(60):
        code = await service.process.wait()
    assert code == 0
    assert all(isinstance(p, int) for p in pids) and not any(alive(p) for p in pids)
    assert {c["state"] for c in service.status()["children"].values()} == {"stopped"}


async def test_HATP_MCP_41_bridges_started_together_start_one_service_which_outlives_them_and_dies_whole(
    tmp_path: Path,
) -> None:
    """As Claude Desktop starts its entries: the coordinator's and the gateway's bridges at once, no service yet."""
    layout = make_org(tmp_path)
    lock = service_folder(layout.root) / "service.lock"
    assert held_by(lock) is None
    tools: dict[str, set[str]] = {}

    async def use(server: str) -> None:
        async with bridge(layout, server) as client:
            tools[server] = {t.name for t in (await client.list_tools()).tools}

    with anyio.fail_after(180):
        async with anyio.create_task_group() as tg:
            tg.start_soon(use, "coordinator")
            tg.start_soon(use, "gateway")
        holder = held_by(lock)  # the bridges are gone; the one service they started is not
        assert holder is not None and alive(holder["pid"])
        await use("directory")  # the next bridge uses the same service
        assert held_by(lock) == holder
        status = json.loads((service_folder(layout.root) / "status.json").read_text())
        pids = [c["pid"] for c in status["children"].values()]
        # the service killed outright: each child sees its stdin end (--parent-watch) and exits too
        pidfds = [os.pidfd_open(p) for p in [holder["pid"], *pids]]
        try:
            os.kill(holder["pid"], signal.SIGKILL)
            for pidfd in pidfds:
                await anyio.wait_readable(pidfd)  # readable once that process has ended
        finally:
            for pidfd in pidfds:
                os.close(pidfd)
    assert "begin_transaction" in tools["coordinator"] and "request_approval" in tools["gateway"]
    assert "directory" in tools and status["pid"] == holder["pid"]  # it answered (it serves resources only)
    assert len(pidfds) == 8 and held_by(lock) is None  # each pidfd became readable: every process ended


async def test_HATP_MCP_46_the_bridge_sends_the_token_of_its_0600_file_as_a_bearer_and_never_logs_it(
    tmp_path: Path,
) -> None:
    """A recording server stands in for the service's coordinator (it holds the lock and names its URL)."""
    root = tmp_path / "org"
    folder = service_folder(root)
    folder.mkdir(parents=True)
    (root / "suite.json").write_text("{}")
    token = tmp_path / "coordinator.token"
    token.write_text("hatp-secret-5d1e\n")
    token.chmod(0o600)
    heads: list[bytes] = []

    async def record(conn: anyio.abc.SocketStream) -> None:
        async with conn:
            head = b""
            while b"\r\n\r\n" not in head:
                head += await conn.receive()
            heads.append(head)
            await conn.send(b"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

    lock = DataLock(folder / "service.lock")
    lock.acquire(datetime.now(UTC).isoformat())
    try:
        async with await anyio.create_tcp_listener(local_host="127.0.0.1") as listener:
            port = listener.extra(anyio.abc.SocketAttribute.local_port)
            status = {"children": {"coordinator": {"state": "ready", "url": f"http://127.0.0.1:{port}/mcp"}}}
            (folder / "status.json").write_text(json.dumps(status))
            args = ["connect", "coordinator", "--org", str(root), "--token-file", str(token)]
            params = StdioServerParameters(command=HATP, args=args)
            with anyio.fail_after(60):
                async with anyio.create_task_group() as tg:
                    tg.start_soon(listener.serve, record)
                    with (tmp_path / "bridge.stderr").open("w") as errlog, pytest.raises(Exception):  # noqa: B017
                        async with Client(stdio_client(params, errlog=errlog)):
                            pass
                    tg.cancel_scope.cancel()
    finally:
        lock.release()
    assert heads and b"authorization: Bearer hatp-secret-5d1e\r\n" in heads[0].lower().replace(b"bearer", b"Bearer")
    assert "hatp-secret-5d1e" not in (tmp_path / "bridge.stderr").read_text()
