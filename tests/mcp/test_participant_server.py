"""serve_hatp on an MCPServer and on a low-level Server: methods, validation, refusals, ordinary tools."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client, MCPError
from mcp.server import Server

from hatp_mcp.core.model.messages import PrepareRequest, StatusRequest, StatusResult
from hatp_mcp.mcp.call import HatpRequest
from hatp_mcp.mcp.extension import EXPERIMENTAL_KEY, EXTENSION_ID, HatpSettings, read_advertisement
from hatp_mcp.mcp.hatp_methods import AnyParams
from hatp_mcp.mcp.participant_server import serve_hatp
from hatp_mcp.runtime.clock import FakeClock, SystemClock
from servers import airline
from servers._participant import build
from tests.coordinators import COORDINATOR, KEY, OTHER, OTHER_KEY, decision_for, signer, trusted, trusting
from tests.locks import acquire, release, renew
from tests.mcp.toy import Toy, plan, toy_server

pytestmark = pytest.mark.anyio


class _Any(types.Result):
    model_config = types.Result.model_config | {"extra": "allow"}


async def send(client: Client, method: str, params: dict[str, Any]) -> dict[str, Any]:
    result = await client.session.send_request(HatpRequest(method=method, params=params), _Any)
    return dict(result.model_extra or {})


async def test_ordinary_tools_keep_working_next_to_hatp(clock: FakeClock) -> None:
    with anyio.fail_after(10):
        async with Client(toy_server(Toy(clock))) as client:
            result = await client.call_tool("seats_left", {})
    assert not result.is_error
    assert result.structured_content == {"result": 7}


async def test_HATP_MCP_1_the_server_advertises_hatp_under_extensions_and_experimental(clock: FakeClock) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            caps = client.server_capabilities
    assert caps.extensions is not None and caps.experimental is not None
    assert caps.extensions[EXTENSION_ID] == caps.experimental[EXPERIMENTAL_KEY]
    hatp = read_advertisement(caps)
    assert hatp["roles"] == ["participant"]
    assert hatp["operations"] == {"seat.hold": {"tier": "hold", "maxLeaseSeconds": 900, "maxHoldSeconds": 14400}}
    assert hatp["keys"] == [toy.key.public_jwk()]


async def test_HATP_MCP_1_a_server_without_hatp_is_refused_by_read_advertisement() -> None:
    from hatp_mcp.errors import HatpError

    with pytest.raises(HatpError) as info:
        read_advertisement(types.ServerCapabilities(), "mcp://plain")
    assert (info.value.rule, info.value.code) == ("HATP-MCP-1", "UNSUPPORTED")


async def test_HATP_MCP_2_params_that_are_not_the_wire_model_are_refused_as_invalid_params(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            with pytest.raises(MCPError) as info:
                await send(client, "hatp/txn/commit", {"txnId": "t1", "branchId": "seat", "planDigest": "x"})
    assert info.value.code == -32602
    assert info.value.data["rule"] == "HATP-OBJ-3"
    assert info.value.data["path"] == "planDigest"
    assert toy.op.booked == set()


async def test_HATP_MCP_3_a_refusal_goes_on_the_wire_with_its_stable_code_and_rule(clock: FakeClock) -> None:
    toy = Toy(clock)
    p = plan()
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            with pytest.raises(MCPError) as info:
                await send(
                    client, "hatp/lock/renew", toy.signer("lock-renew", renew("seat/14C", 9, "txn-other").wire())
                )
            commit = {
                "txnId": p.txn_id,
                "branchId": "seat",
                "planDigest": p.digest(),
                "decision": decision_for(p),
                "voteDigest": "sha256:" + "0" * 64,  # never prepared: there is no vote to rest on
            }
            answer = await send(client, "hatp/txn/commit", toy.signer("commit", commit))
    assert info.value.code == -32055
    assert info.value.message.startswith("STALE_TOKEN: refused under HATP-LOCK-")
    assert info.value.data["rule"].startswith("HATP-LOCK-")
    # a commit of an unprepared branch is a signed refusal receipt, not an error
    assert answer["receipt"]["outcome"] == "refused"
    assert answer["receipt"]["code"] == "NOT_PREPARED"


async def test_locks_are_served_and_their_tokens_grow(clock: FakeClock) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            first = await send(client, "hatp/lock/acquire", toy.signer("lock-acquire", acquire("r", "txn-a").wire()))
            gone = release("r", first["token"], "txn-a")
            released = await send(client, "hatp/lock/release", toy.signer("lock-release", gone.wire()))
            second = await send(client, "hatp/lock/acquire", toy.signer("lock-acquire", acquire("r", "txn-b").wire()))
    assert released["released"] is True
    assert second["token"] > first["token"]


async def test_HATP_LOCK_4_a_lock_request_without_a_trusted_coordinators_proof_is_refused_and_takes_nothing(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    mine = acquire("seat-14C", "txn-a").wire()
    outsider = signer(clock, OTHER, OTHER_KEY)  # a coordinator this participant does not trust
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            refused = []
            hold_renew = toy.signer("renew", renew("seat-14C", 1, "txn-a").wire())  # a hold's renew auth
            for method, params in (
                ("hatp/lock/acquire", mine),
                ("hatp/lock/acquire", outsider("lock-acquire", mine)),
                ("hatp/lock/renew", hold_renew),
            ):
                with pytest.raises(MCPError) as err:
                    await send(client, method, params)
                refused.append((err.value.data["rule"], err.value.data["code"]))
            granted = await send(client, "hatp/lock/acquire", toy.signer("lock-acquire", mine))
    assert refused == [
        ("HATP-TRUST-1", "COORDINATOR_UNPROVEN"),  # no auth
        ("HATP-TRUST-2", "COORDINATOR_UNPROVEN"),  # a key the operator did not pin
        ("HATP-TRUST-3", "AUTH_MISMATCH"),  # an auth for another method: a hold's renew is not a lock's
    ]
    assert (granted["owner"], granted["token"]) == ("txn-a", 1)  # nothing was taken by the refused ones


async def test_HATP_LOCK_4_another_trusted_coordinator_cannot_lock_in_a_transaction_bound_to_the_first(
    clock: FakeClock,
) -> None:
    toy = Toy(clock)
    toy.trust = trusted(clock, (COORDINATOR, KEY), (OTHER, OTHER_KEY))
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            await send(client, "hatp/lock/acquire", toy.signer("lock-acquire", acquire("seat-14C", "txn-a").wire()))
            gone = release("seat-14C", 1, "txn-a").wire()
            with pytest.raises(MCPError) as err:
                await send(client, "hatp/lock/release", signer(clock, OTHER, OTHER_KEY)("lock-release", gone))
    assert (err.value.data["rule"], err.value.data["code"]) == ("HATP-TRUST-5", "TXN_BOUND")
    assert toy.runtime.locks.table.holder("seat-14C", clock.now()) is not None  # still held by txn-a


async def test_serve_hatp_works_on_a_low_level_server(clock: FakeClock) -> None:
    toy = Toy(clock)
    low: Server[Any] = Server("low", version="0.0.1")
    serve_hatp(low, toy.runtime, HatpSettings(roles=["participant"]), trust=toy.trust)
    with anyio.fail_after(10):
        async with Client(low) as client:
            status = await send(client, "hatp/txn/status", {"txnId": "t-9", "branchId": "seat"})
            assert EXTENSION_ID in (client.server_capabilities.extensions or {})
    assert status["state"] == "unknown"


async def test_an_unknown_hatp_method_is_method_not_found(clock: FakeClock) -> None:
    with anyio.fail_after(10):
        async with Client(toy_server(Toy(clock))) as client:
            with pytest.raises(MCPError) as info:
                await send(client, "hatp/txn/nope", {})
    assert info.value.code == -32601


def test_any_params_keeps_unknown_keys_and_nulls() -> None:
    params = AnyParams.model_validate({"txnId": "t", "reason": None})
    assert params.model_extra == {"txnId": "t", "reason": None}


async def test_HATP_MCP_51_locks_are_not_served_unless_the_operator_asks(clock: FakeClock) -> None:
    toy = Toy(clock)
    with anyio.fail_after(10):
        async with Client(toy_server(toy, serve_locks=False)) as client:
            with pytest.raises(MCPError) as refused:
                await send(client, "hatp/lock/acquire", toy.signer("lock-acquire", acquire("seat-14C", "txn-m").wire()))
    assert refused.value.error.code == types.METHOD_NOT_FOUND
    # nothing was taken: the resource is free for its real owner
    mine = toy.runtime.lock_acquire(acquire("seat-14C", "txn-a"))
    assert (mine.owner, mine.token) == ("txn-a", 1)


async def test_HATP_MCP_51_the_suites_participant_servers_offer_locks_only_with_serve_locks(tmp_path: Path) -> None:
    ask = signer(SystemClock())("lock-acquire", acquire("seat-14C", "txn-a").wire())
    off, _r1, inv1 = build(airline.SPEC, trusting(tmp_path / "off"))
    on, _r2, inv2 = build(airline.SPEC, trusting(tmp_path / "on"), serve_locks=True)
    try:
        with anyio.fail_after(20):
            async with Client(off) as client:
                with pytest.raises(MCPError) as refused:
                    await send(client, "hatp/lock/acquire", ask)
            async with Client(on) as client:
                granted = await send(client, "hatp/lock/acquire", ask)
    finally:
        inv1.close()
        inv2.close()
    assert refused.value.error.code == types.METHOD_NOT_FOUND
    assert (granted["owner"], granted["token"]) == ("txn-a", 1)  # served on request, to the trusted coordinator


@pytest.mark.parametrize(("field", "value"), [("createdAt", "2026-11-29T10:00:00Z\n"), ("txnId", "txn-toy-0001\n")])
async def test_HATP_OBJ_3_a_signed_prepare_whose_plan_has_a_trailing_newline_in_a_format_is_refused_and_holds_nothing(
    clock: FakeClock, field: str, value: str
) -> None:
    """Proven by the trusted coordinator, so only the format check stands in the way: "...Z\n" would have been
    read as the same instant (and "txn-toy-0001\n" as the same id) under other bytes."""
    toy = Toy(clock)
    p = plan()
    params = PrepareRequest(
        txn_id=p.txn_id, branch_id="seat", plan_digest=p.digest(), plan=p, coordinator=COORDINATOR
    ).wire()
    params["plan"][field] = value
    with anyio.fail_after(10):
        async with Client(toy_server(toy)) as client:
            with pytest.raises(MCPError) as refused:
                await send(client, "hatp/txn/prepare", toy.signer("prepare", params))
    assert refused.value.code == -32602
    assert (refused.value.data["rule"], refused.value.data["path"]) == ("HATP-OBJ-3", f"plan.{field}")
    assert toy.op.held == set() and toy.op.booked == set()


async def test_an_uncontended_request_reaches_its_participant_without_giving_up_the_event_loop(
    clock: FakeClock,
) -> None:
    # serve_hatp's gate lets a request with a free place straight through: a task started just before the request
    # has not run yet when the participant is called (anyio's default semaphore gives the loop a turn first)
    handlers: dict[str, Any] = {}
    low: Server[Any] = Server("low", version="0.0.1")
    low.add_request_handler = lambda method, params_type, handler: handlers.__setitem__(method, handler)  # type: ignore[method-assign]
    started: list[str] = []
    seen: list[list[str]] = []

    toy = Toy(clock)

    class Participant:
        async def status(self, req: StatusRequest) -> StatusResult:
            seen.append(list(started))
            return await toy.runtime.status(req)

        def __getattr__(self, name: str) -> Any:
            return getattr(toy.runtime, name)

    serve_hatp(low, Participant(), HatpSettings(roles=["participant"]), trust=toy.trust)  # type: ignore[arg-type]

    async def other() -> None:
        started.append("other")

    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            tg.start_soon(other)
            answer = await handlers["hatp/txn/status"](
                None, AnyParams.model_validate({"txnId": "t-1", "branchId": "s"})
            )
    assert answer["state"] == "unknown"
    assert seen == [[]]
    assert started == ["other"]
