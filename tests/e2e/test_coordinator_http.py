"""The coordinator as a real process over streamable HTTP, with the four tool servers and the Human Gateway as
processes too: an agent drives trips over MCP, a person decides through the gateway's MCP tools.

Commit; a seat locked, committed with its fencing token and released; abort on a participant's refusal; the
approver says no; a precondition changed after approval; a final step that outlasts the request timeout (in doubt,
then resolved); a participant killed mid-transaction; the coordinator killed (SIGKILL) mid-phase-2 and restarted.
Who may call it over HTTP (HATP-MCP-53): a process without a token reads, lists and aborts nothing; another
agent's token sees none of the travel-bot's transactions; the operator's (`"sees": "all"`) sees them all, and the
record names it as who asked for an abort. Processes start once per module."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from secrets import token_hex
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from demo.trip_suite import human_key_file
from hatp_mcp.core.gateway.proof import sign_decision
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.call import call_raw
from hatp_mcp.mcp.http_callers import bearer_client, new_token, write_callers
from hatp_mcp.mcp.launch import HttpProcess, launch_http
from hatp_mcp.store.participant_state import SqliteParticipantStore
from tests.acme_org import AGENT, ORG_DIR
from tests.coordinators import trust_coordinator_dirs
from tests.e2e.coordinator_suite import GATEWAY_ARGS, PARTICIPANTS, Agent, events, problems, trip, uri

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

OTHER = "agent://acme.com/other-bot"  # another agent with its own token
OPERATOR = "operator://acme.com/ops"  # the operator granted every transaction ("sees": "all")


def commits(record: dict[str, Any], branch: str) -> list[dict[str, Any]]:
    """The commit receipts the record holds for `branch` (a repeated commit is answered with the first receipt)."""
    return [e["evidence"] for e in record["events"] if e["event"] == "commit" and e["body"]["branchId"] == branch]


class Suite:
    # the data dirs of every coordinator process the suite runs: each participant and the gateway trust their keys
    COORDINATORS = ("coordinator", "coordinator-doubt", "coordinator-kill", "coordinator-crash")

    def __init__(self, data: Path, stack: AsyncExitStack) -> None:
        self.data = data
        self.stack = stack
        self.procs: dict[str, HttpProcess] = {}
        self.tokens = {AGENT: new_token(), OTHER: new_token(), OPERATOR: new_token()}

    def trust(self, receiver: Path) -> None:
        """`receiver` (a participant's or the gateway's --data) acts for this suite's coordinators (HATP-TRUST-10)."""
        trust_coordinator_dirs([receiver], [self.data / c for c in self.COORDINATORS])

    async def start(self, name: str, module: str, extra: list[str], port: int = 0) -> HttpProcess:
        self.trust(self.data / name)
        self.procs[name] = await self.stack.enter_async_context(
            launch_http(module, self.data / name, extra=extra, port=port, ready_timeout=60)
        )
        return self.procs[name]

    async def start_trip(self, *participant_args: str) -> None:
        """The trip's tool servers (each with `participant_args`) and the organisation's gateway."""
        for name in PARTICIPANTS:
            await self.start(name, f"servers.{name}", list(participant_args))
        await self.start("gateway", "servers.gateway", ["--org", str(ORG_DIR)])

    def coordinator(
        self, name: str, *extra: str, keys: dict[str, Path] | None = None, **urls: str
    ) -> AbstractAsyncContextManager[HttpProcess]:
        """A coordinator process on `data/name`; `urls` replace participants' URLs (e.g. a slow payments server).
        Each participant's key is pinned to the public key its server wrote under its --data (HATP-MCP-27), or to
        `keys[name]` for a server this suite did not start."""
        targets = {**{n: self.procs[n].url for n in PARTICIPANTS}, **urls}
        args = [f"--participant={uri(n)}={url}" for n, url in targets.items()]
        served_by = {p.url: self.data / proc / "public.jwk.json" for proc, p in self.procs.items()}
        pins = {n: (keys or {}).get(n) or served_by[url] for n, url in targets.items()}
        args += [f"--participant-keys={uri(n)}={file}" for n, file in pins.items()]
        args += ["--gateway", self.procs["gateway"].url, *GATEWAY_ARGS, "--poll-seconds", "1", "--retry-seconds", "1"]
        callers = write_callers(self.data / name / "callers.json", self.tokens, sees_all=[OPERATOR])
        args += ["--callers", str(callers)]  # HATP-MCP-53: the agent, another agent and the operator
        return launch_http(
            "servers.coordinator", self.data / name, extra=[*args, *extra], ready_timeout=60, token=self.tokens[AGENT]
        )

    async def decide(self, txn_id: str, action: str) -> dict[str, Any]:
        """The person the gateway asked approves or rejects through the gateway's MCP tools, signing with their key."""
        ask_id = f"{txn_id}/finance"
        shown = await self.tool("gateway", "show_ask", {"ask_id": ask_id})
        who = shown["waitingFor"][0]
        key = SigningKey.from_jwk(json.loads(human_key_file(who).read_text()))
        proof = sign_decision(key, ask_id, shown["subjectDigest"], who, action, datetime.now(UTC), nonce=token_hex(12))
        return await self.tool("gateway", "decide", {"ask_id": ask_id, "proof": proof.wire()})

    async def tool(self, server: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
        async with self.procs[server].client() as client:
            result = await client.call_tool(name, args)
        assert result.structured_content is not None
        return result.structured_content


@pytest.fixture(scope="module")
async def suite(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Suite]:
    data = tmp_path_factory.mktemp("coordinator-http")
    async with AsyncExitStack() as stack:
        s = Suite(data, stack)
        for name in PARTICIPANTS:
            # room_change, card_change: outside changes; locks for plans whose branches name them (HATP-LOCK-7)
            await s.start(name, f"servers.{name}", ["--demo-tools", "--serve-locks"])
        await s.start("payments-slow", "servers.payments", ["--commit-delay", "3"])
        await s.start("gateway", "servers.gateway", ["--org", str(ORG_DIR)])
        yield s


@pytest.fixture(scope="module")
async def agent(suite: Suite) -> AsyncIterator[Agent]:
    async with suite.coordinator("coordinator") as proc, proc.client() as client:
        suite.procs["coordinator"] = proc
        yield Agent(client)


async def test_HATP_MCP_20_an_agent_begins_a_trip_over_http_a_person_approves_and_it_commits(
    suite: Suite, agent: Agent
) -> None:
    with anyio.fail_after(60):
        begun = await agent.begin(trip("txn-h-commit", "2026-12-10", "14C"))
        asked = await agent.asked("txn-h-commit")
        await suite.decide("txn-h-commit", "approve")
        done = await agent.outcome("txn-h-commit")
        seat = await suite.tool("airline", "seat_status", {"resource": "LH123/2026-12-10/14C"})
    assert begun["state"] in ("preparing", "approving") and "outcome" not in begun
    assert {v["branchId"]: v["decision"] for v in asked["votes"]}["finance"] == "pending"
    assert (done["outcome"], done["state"]) == ("COMMITTED", "committed")
    assert problems(done["record"], suite.data) == []
    assert (seat["state"], seat["holder"]) == ("taken", "txn-h-commit")


async def test_HATP_LOCK_7_the_coordinator_process_locks_a_seat_commits_with_its_token_and_releases_it(
    suite: Suite, agent: Agent
) -> None:
    seat = "LH123/2026-12-10/19F"
    data = trip("txn-h-locked", "2026-12-19", "19F").wire()
    data["branches"][0]["locks"] = [seat]  # the seat branch writes that seat: the coordinator locks it
    plan = Plan.model_validate(data)
    with anyio.fail_after(60):
        await agent.begin(plan)
        await agent.asked(plan.txn_id)
        await suite.decide(plan.txn_id, "approve")
        done = await agent.outcome(plan.txn_id)
    store = SqliteParticipantStore(suite.data / "airline" / "state.db")
    try:
        lock = store.get_lock(seat)
    finally:
        store.close()
    assert (done["outcome"], done["state"]) == ("COMMITTED", "committed")  # the commit carried the live token
    assert lock is not None
    assert (lock["owner"], lock["token"], lock["released"]) == (plan.txn_id, 1, True)  # taken, then given back


async def test_a_participant_refusal_aborts_the_trip_and_releases_every_hold(suite: Suite, agent: Agent) -> None:
    with anyio.fail_after(60):
        await suite.tool("hotel", "room_change", {"resource": "Adlon/2026-12-17", "state": "taken"})
        await agent.begin(trip("txn-h-soldout", "2026-12-17", "15A"))
        done = await agent.outcome("txn-h-soldout")
        seat = await suite.tool("airline", "seat_status", {"resource": "LH123/2026-12-10/15A"})
    assert done["outcome"] == "ABORTED"
    assert {v["branchId"]: v["decision"] for v in done["votes"]}["room"] == "no"
    assert seat["state"] == "free"
    assert problems(done["record"], suite.data) == []


async def test_the_approver_saying_no_aborts_the_trip(suite: Suite, agent: Agent) -> None:
    with anyio.fail_after(60):
        await agent.begin(trip("txn-h-no", "2026-12-11", "16A"))
        await agent.asked("txn-h-no")
        decided = await suite.decide("txn-h-no", "reject")
        done = await agent.outcome("txn-h-no")
        room = await suite.tool("hotel", "room_status", {"resource": "Adlon/2026-12-11"})
    assert decided["state"] == "rejected"
    assert done["outcome"] == "ABORTED" and "approval" in events(done["record"])
    assert room["state"] == "free"
    assert problems(done["record"], suite.data) == []


async def test_a_precondition_changed_after_approval_refuses_the_commit_and_aborts(suite: Suite, agent: Agent) -> None:
    with anyio.fail_after(60):
        await agent.begin(trip("txn-h-moved", "2026-12-12", "17A"))
        await agent.asked("txn-h-moved")
        # the card's issuer changes something after the approval (the version moves; the card stays usable)
        await suite.tool("payments", "card_change", {"resource": "tok_visa_4242", "state": "free"})
        await suite.decide("txn-h-moved", "approve")
        done = await agent.outcome("txn-h-moved")
    codes = [e.get("evidence", {}).get("code") for e in done["record"]["events"]]
    assert done["outcome"] == "ABORTED"
    assert "PRECONDITION_CHANGED" in codes and "compensate" in events(done["record"])  # the event was undone
    assert problems(done["record"], suite.data) == []


async def test_HATP_MCP_6_a_final_step_outlasting_the_request_timeout_is_in_doubt_then_commits_once(
    suite: Suite,
) -> None:
    with anyio.fail_after(90):
        async with suite.coordinator(
            "coordinator-doubt", "--call-timeout", "1", payments=suite.procs["payments-slow"].url
        ) as proc:
            async with proc.client() as client:
                agent = Agent(client)
                await agent.begin(trip("txn-h-doubt", "2026-12-13", "18A"))
                await agent.asked("txn-h-doubt")
                await suite.decide("txn-h-doubt", "approve")
                doubt = await agent.until("txn-h-doubt", "in-doubt")
                done = await agent.outcome("txn-h-doubt")
    pay_commits = [
        e["evidence"] for e in done["record"]["events"] if e["event"] == "commit" and e["body"]["branchId"] == "pay"
    ]
    assert doubt["state"] == "in-doubt"
    assert done["outcome"] == "COMMITTED" and "commit.in-doubt" in events(done["record"])
    assert len({str(r["signature"]) for r in pay_commits}) == 1  # every answer is the one commit's receipt
    assert problems(done["record"], suite.data) == []


async def test_HATP_MCP_26_a_participant_killed_mid_transaction_is_asked_again_once_it_is_back(suite: Suite) -> None:
    hotel_data = suite.data / "hotel-killed"
    suite.trust(hotel_data)
    with anyio.fail_after(120):
        async with launch_http("servers.hotel", hotel_data, ready_timeout=60) as hotel:
            pinned = {"hotel": hotel_data / "public.jwk.json"}
            async with (
                suite.coordinator("coordinator-kill", keys=pinned, hotel=hotel.url) as proc,
                proc.client() as client,
            ):
                agent = Agent(client)
                await agent.begin(trip("txn-h-killed", "2026-12-14", "19A"))
                await agent.asked("txn-h-killed")
                hotel.kill()  # SIGKILL with the room held
                await hotel.process.wait()
                async with launch_http("servers.hotel", hotel_data, port=hotel.port, ready_timeout=60) as again:
                    await suite.decide("txn-h-killed", "approve")
                    done = await agent.outcome("txn-h-killed")
                    async with Client(again.url) as direct:
                        room = await direct.call_tool("room_status", {"resource": "Adlon/2026-12-14"})
    assert done["outcome"] == "COMMITTED"
    assert room.structured_content is not None
    assert (room.structured_content["state"], room.structured_content["holder"]) == ("taken", "txn-h-killed")
    assert problems(done["record"], suite.data) == []


async def test_HATP_MCP_24_the_coordinator_killed_mid_phase_2_restarts_and_finishes_the_commit_once(
    suite: Suite,
) -> None:
    with anyio.fail_after(120):
        async with suite.coordinator("coordinator-crash", payments=suite.procs["payments-slow"].url) as first:
            async with first.client() as client:
                agent = Agent(client)
                await agent.begin(trip("txn-h-crash", "2026-12-15", "20A"))
                await agent.asked("txn-h-crash")
                await suite.decide("txn-h-crash", "approve")
                committing = await agent.until("txn-h-crash", "committing")
            first.kill()  # SIGKILL mid-phase-2: the slow capture is still running on the payments server
            await first.process.wait()
        async with suite.coordinator("coordinator-crash", payments=suite.procs["payments-slow"].url) as second:
            async with second.client() as client:
                done = await Agent(client).outcome("txn-h-crash")
            lines = list(second.lines)
    names = events(done["record"])
    pay_commits = [
        e["evidence"] for e in done["record"]["events"] if e["event"] == "commit" and e["body"]["branchId"] == "pay"
    ]
    assert committing["decision"] == "commit"
    assert done["outcome"] == "COMMITTED" and "coordinator.recovered" in names
    assert len(pay_commits) >= 1 and len({str(r["signature"]) for r in pay_commits}) == 1
    assert any("finishing 1 unfinished transaction(s): txn-h-crash" in line for line in lines)
    assert problems(done["record"], suite.data) == []


async def refused(client: Client, tool: str, args: dict[str, Any]) -> dict[str, Any]:
    """The refusal of a request the coordinator turned away before any tool ran (a JSON-RPC error)."""
    with pytest.raises(MCPError) as err:
        await client.call_tool(tool, args)
    assert isinstance(err.value.error.data, dict)
    return err.value.error.data


async def test_HATP_MCP_53_a_local_process_without_a_token_reads_lists_and_aborts_nothing(
    suite: Suite, agent: Agent
) -> None:
    plan = trip("txn-h-theirs", "2026-12-21", "21A")
    url = suite.procs["coordinator"].url
    with anyio.fail_after(60):
        await agent.begin(plan)
        await agent.asked(plan.txn_id)
        async with Client(url) as anonymous, bearer_client(url, new_token()) as forged:
            tools = {t.name for t in (await anonymous.list_tools()).tools}  # the listings stay open
            answers = [
                await refused(anonymous, "list_pending", {}),
                await refused(anonymous, "transaction_status", {"txn_id": plan.txn_id, "include_record": True}),
                await refused(anonymous, "abort_transaction", {"txn_id": plan.txn_id, "reason": "mine now"}),
                await refused(forged, "abort_transaction", {"txn_id": plan.txn_id, "reason": "mine now"}),
                await refused(
                    anonymous, "begin_transaction", {"plan": trip("txn-h-squat", "2026-12-22", "22A").wire()}
                ),
            ]
            with pytest.raises(HatpError) as method:
                await call_raw(anonymous, "hatp/txn/abort", {"txnId": plan.txn_id}, 10)
            with pytest.raises(MCPError) as record:
                await anonymous.read_resource(f"hatp://txn/{plan.txn_id}/record")
        after = await agent.status(plan.txn_id)
        await agent.client.call_tool("abort_transaction", {"txn_id": plan.txn_id, "reason": "test over"})
    assert "list_pending" in tools
    for data in [*answers, method.value.to_dict(), record.value.error.data]:
        assert (data["rule"], data["code"], data["path"]) == ("HATP-MCP-53", "CALLER_UNPROVEN", "Authorization")
    assert after["state"] == "approving" and "decision" not in after  # nothing was aborted
    assert all(v["decision"] != "no" for v in after["votes"])


async def test_HATP_MCP_53_another_agent_sees_none_of_its_transactions_and_the_operator_aborts_in_its_own_name(
    suite: Suite, agent: Agent
) -> None:
    plan = trip("txn-h-mine", "2026-12-23", "23A")
    url = suite.procs["coordinator"].url
    with anyio.fail_after(60):
        await agent.begin(plan)
        await agent.asked(plan.txn_id)
        async with bearer_client(url, suite.tokens[OTHER]) as other, bearer_client(url, suite.tokens[OPERATOR]) as ops:
            listed = await other.call_tool("list_pending", {})
            peek = await other.call_tool("transaction_status", {"txn_id": plan.txn_id, "wait_seconds": 5})
            theirs = await other.call_tool("abort_transaction", {"txn_id": plan.txn_id, "reason": "not mine"})
            squat = await other.call_tool("begin_transaction", {"plan": trip("txn-h-as", "2026-12-24", "24A").wire()})
            seen = await ops.call_tool("list_pending", {})
            aborted = await ops.call_tool("abort_transaction", {"txn_id": plan.txn_id, "reason": "ops stop"})
        done = await agent.outcome(plan.txn_id)
        mine = await agent.client.call_tool("list_pending", {})
    assert listed.structured_content is not None and listed.structured_content["txns"] == []
    for result in (peek, theirs, squat):
        assert result.is_error and result.structured_content is not None
        assert (result.structured_content["refusal"]["rule"], result.structured_content["refusal"]["code"]) == (
            "HATP-MCP-53",
            "NOT_TXN_OWNER",
        )
    assert seen.structured_content is not None and plan.txn_id in [t["txnId"] for t in seen.structured_content["txns"]]
    assert not aborted.is_error and done["outcome"] == "ABORTED"
    asked = [e["body"] for e in done["record"]["events"] if e["event"] == "abort.requested"]
    assert asked == [{"reason": "ops stop", "by": OPERATOR}]  # who asked, as proven; not the plan's agent
    assert problems(done["record"], suite.data) == []
    assert mine.structured_content is not None
    assert plan.txn_id not in [t["txnId"] for t in mine.structured_content["txns"]]


async def test_HATP_MCP_32_a_waiting_status_of_an_unknown_txn_over_http_names_its_rule_and_logs_no_traceback(
    suite: Suite, agent: Agent
) -> None:
    with anyio.fail_after(30):
        at_once = await agent.client.call_tool("transaction_status", {"txn_id": "txn-h-nobody"})
        waiting = await agent.client.call_tool("transaction_status", {"txn_id": "txn-h-nobody", "wait_seconds": 5})
    assert waiting.is_error and waiting.structured_content == at_once.structured_content
    assert waiting.structured_content is not None
    assert waiting.structured_content["refusal"]["code"] == "UNKNOWN_TXN"
    assert not any("Traceback" in line or "ExceptionGroup" in line for line in suite.procs["coordinator"].lines)
