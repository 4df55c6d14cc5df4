"""An upstream that refuses or does not answer, seen by the coordinator through the participant driver
(spec/proxy.md section 3, HATP-PXY-60..62, 65): a signed no vote or a signed receipt stating the failure, never a
bare error, and never a compensate reported done when its undo failed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import mcp.types as types
import pytest
from mcp import MCPError

from hatp_mcp.core.journal.proxy_tools import UpstreamTool, resolve_tools
from hatp_mcp.core.model.evidence import Preconditions
from hatp_mcp.core.model.messages import (
    AbortRequest,
    CommitRequest,
    CompensateRequest,
    PrepareRequest,
    StatusRequest,
)
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.proxy_policy import ParticipantOperation, load_policy
from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.errors import CONNECTION_CLOSED, REQUEST_TIMEOUT
from hatp_mcp.mcp.proxy_participant import KeptResults, UpstreamOperation
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.participant.driver import ParticipantRuntime
from hatp_mcp.runtime.participant.operation import EffectInDoubt
from hatp_mcp.store.participant_state import MemoryParticipantStore
from tests.factories import trip_plan_json

pytestmark = pytest.mark.anyio

URI = "mcp://up.example/hatp"
MAKE = UpstreamTool("make", {"type": "object", "properties": {"names": {"type": "array", "items": {"type": "string"}}}})
UNDO = {"tool": "unmake", "arguments": {"ids": "result.ids"}}
PRECONDITION = {"tool": "find", "arguments": {"names": "args.names"}, "version": "result.found"}
HOLD = {
    "tier": "hold",
    "confirm": {"tool": "confirm", "arguments": {"hold": "result.holdId"}},
    "release": {"tool": "release", "arguments": {"hold": "result.holdId"}},
}


class Upstream:
    """A scripted upstream: `answers[tool]` is answered as JSON text; `errors[tool]` is a JSON-RPC error code the
    call raises instead (a refusal, or the SDK's timeout / closed connection: no answer)."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.errors: dict[str, int] = {}
        self.calls: list[str] = []

    async def __call__(self, name: str, arguments: dict[str, Any], key: str | None) -> types.CallToolResult:
        self.calls.append(name)
        if name in self.errors:
            raise MCPError(code=self.errors[name], message=f"{name} went wrong")
        if name not in self.answers:
            return types.CallToolResult(content=[types.TextContent(type="text", text="no such thing")], is_error=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(self.answers[name]))])


class Rig:
    """One ParticipantRuntime serving `make` over the scripted upstream, and the requests a coordinator sends."""

    def __init__(self, tmp_path: Path, up: Upstream, spec: dict[str, Any], *, idempotent: bool = False) -> None:
        self.up = up
        self.clock = FakeClock()
        self.key = SigningKey.generate(["participant"])
        self.keyring = Keyring()
        self.keyring.add_signer(self.key)
        spec_ = ParticipantOperation.model_validate(spec)
        self.op = UpstreamOperation(MAKE, spec_, up, KeptResults(tmp_path), idempotent)
        self.runtime = ParticipantRuntime(URI, self.key, {"make": self.op}, MemoryParticipantStore(), self.clock)
        data = trip_plan_json("txn-up-0001")
        data["branches"] = [
            {
                "branchId": "b1",
                "participant": URI,
                "operation": "make",
                "tier": spec["tier"],
                "args": {"names": ["a"]},
                "maxDurationSeconds": 30,
                **({"undoWindowSeconds": 3600} if spec["tier"] == "compensate" else {}),
                "settles": [],
            }
        ]
        data["approvals"] = []
        self.plan = Plan.model_validate(data)
        self.ids = {"txn_id": self.plan.txn_id, "branch_id": "b1", "plan_digest": self.plan.digest()}

    async def prepare(self) -> dict[str, Any]:
        res = await self.runtime.prepare(PrepareRequest(**self.ids, plan=self.plan, coordinator="c://x"))
        verify_raw(res.vote, self.keyring, "participant")
        verify_raw(res.receipt, self.keyring, "participant")
        return {"vote": res.vote, "receipt": res.receipt}

    def signed(self, receipt: dict[str, Any]) -> dict[str, Any]:
        verify_raw(receipt, self.keyring, "participant")
        return receipt

    async def commit(self, pre: dict[str, Any]) -> dict[str, Any]:
        req = CommitRequest(**self.ids, preconditions=Preconditions.model_validate(pre))
        return self.signed((await self.runtime.commit(req)).receipt)

    async def compensate(self) -> dict[str, Any]:
        return self.signed((await self.runtime.compensate(CompensateRequest(**self.ids))).receipt)

    async def abort(self) -> dict[str, Any]:
        return self.signed((await self.runtime.abort(AbortRequest(**self.ids))).receipt)

    async def state(self) -> str:
        return (await self.runtime.status(StatusRequest(txn_id=self.plan.txn_id, branch_id="b1"))).state


def outcome(receipt: dict[str, Any]) -> tuple[str, str | None]:
    return receipt["outcome"], receipt.get("code")


async def test_HATP_PXY_60_an_upstream_refusing_the_precondition_read_or_the_hold_gets_a_signed_no_vote(
    tmp_path: Path,
) -> None:
    up = Upstream(find={"found": []})
    up.errors["find"] = -32602  # a JSON-RPC error: the upstream refused the read
    rig = Rig(tmp_path / "read", up, {"tier": "compensate", "undo": UNDO, "precondition": PRECONDITION})
    read = await rig.prepare()
    assert (read["vote"]["decision"], read["vote"]["code"]) == ("no", "PRECONDITION_UNREADABLE")
    assert "find went wrong" in read["vote"]["reason"] and outcome(read["receipt"])[0] == "refused"
    for failure in ("isError", -32603, REQUEST_TIMEOUT):  # refused as a result, as an error, or unanswered
        hold_up = Upstream(release={"ok": True})
        if failure != "isError":
            hold_up.errors["make"] = int(failure)
        hold = Rig(tmp_path / f"hold{failure}", hold_up, HOLD)
        held = await hold.prepare()
        assert held["vote"]["decision"] == "no" and "make" in held["vote"]["reason"]
        assert held["vote"]["code"] == ("UPSTREAM_NO_ANSWER" if failure == REQUEST_TIMEOUT else "UPSTREAM_REFUSED")
        assert await hold.state() == "refused" and hold_up.calls == ["make"]


async def test_HATP_PXY_61_a_refused_commit_is_a_signed_refusal_and_an_unanswered_one_a_signed_in_doubt(
    tmp_path: Path,
) -> None:
    up = Upstream(make={"ids": ["id-a"]})
    up.errors["make"] = -32602
    rig = Rig(tmp_path / "refused", up, {"tier": "compensate", "undo": UNDO})
    pre = (await rig.prepare())["receipt"]["preconditions"]
    assert outcome(await rig.commit(pre)) == ("refused", "UPSTREAM_REFUSED")
    assert await rig.state() == "prepared"  # nothing happened upstream
    for lost in (REQUEST_TIMEOUT, CONNECTION_CLOSED):
        up2 = Upstream(make={"ids": ["id-a"]})
        up2.errors["make"] = lost
        rig2 = Rig(tmp_path / f"lost{lost}", up2, {"tier": "compensate", "undo": UNDO}, idempotent=True)
        pre2 = (await rig2.prepare())["receipt"]["preconditions"]
        assert outcome(await rig2.commit(pre2)) == ("in-doubt", "UPSTREAM_NO_ANSWER")
        assert await rig2.state() == "committing"  # never read as "nothing happened"
        del up2.errors["make"]  # answered now: an idempotent call is sent again with the same key
        assert outcome(await rig2.commit(pre2)) == ("ok", None) and up2.calls == ["make", "make"]


async def test_HATP_PXY_62_a_failed_undo_or_release_is_a_signed_receipt_saying_so_never_compensated(
    tmp_path: Path,
) -> None:
    up = Upstream(make={"ids": ["id-a"]}, unmake={"ok": True})
    rig = Rig(tmp_path / "undo", up, {"tier": "compensate", "undo": UNDO})
    pre = (await rig.prepare())["receipt"]["preconditions"]
    assert outcome(await rig.commit(pre)) == ("ok", None)
    up.errors["unmake"] = -32602  # the upstream refuses the undo
    assert outcome(await rig.compensate()) == ("refused", "UPSTREAM_REFUSED")
    assert await rig.state() == "committed"
    up.errors["unmake"] = REQUEST_TIMEOUT  # no answer: it may have been undone
    assert outcome(await rig.compensate()) == ("in-doubt", "UPSTREAM_NO_ANSWER")
    assert await rig.state() == "compensating"
    del up.errors["unmake"]
    assert outcome(await rig.compensate()) == ("ok", None) and await rig.state() == "compensated"

    hold_up = Upstream(make={"holdId": "h-1"})  # `release` answers isError
    hold = Rig(tmp_path / "release", hold_up, HOLD)
    assert (await hold.prepare())["vote"]["decision"] == "yes"
    assert outcome(await hold.abort()) == ("refused", "UPSTREAM_REFUSED")
    assert await hold.state() == "prepared"  # still held upstream: said so, and the next abort tries again
    hold_up.answers["release"] = {"ok": True}
    assert outcome(await hold.abort()) == ("ok", None) and await hold.state() == "aborted"


def test_HATP_PXY_65_a_participant_without_lookup_on_a_tool_not_marked_idempotent_is_refused_at_start() -> None:
    policy = {
        "upstream": {"url": "http://127.0.0.1:9/mcp"},
        "participant": {"uri": URI},
        "tools": {"make": {"policy": "participant", "participant": {"tier": "compensate", "undo": UNDO}}},
    }
    unmake = UpstreamTool("unmake", {"type": "object", "properties": {"ids": {"type": "array"}}})
    with pytest.raises(HatpError) as err:
        resolve_tools(load_policy(policy), [MAKE, unmake])
    assert (err.value.rule, err.value.code) == ("HATP-PXY-65", "NO_LOOKUP")
    assert err.value.path == "tools.make.participant.lookup"
    idempotent = UpstreamTool(MAKE.name, MAKE.input_schema, idempotent_hint=True)
    assert resolve_tools(load_policy(policy), [idempotent, unmake])["make"].action == "participant"
    look = {"tool": "unmake", "arguments": {"ids": "args.names"}, "happened": "result.found"}
    policy["tools"]["make"]["participant"]["lookup"] = look  # type: ignore[index]
    assert resolve_tools(load_policy(policy), [MAKE, unmake])["make"].action == "participant"


async def test_HATP_PXY_65_an_interrupted_commit_without_lookup_is_in_doubt_and_never_sent_again(
    tmp_path: Path,
) -> None:
    up = Upstream(make={"ids": ["id-a"]})
    up.errors["make"] = CONNECTION_CLOSED  # the commit is cut off: its intent is durable, its answer is not
    rig = Rig(tmp_path, up, {"tier": "compensate", "undo": UNDO})  # not marked idempotent
    pre = (await rig.prepare())["receipt"]["preconditions"]
    assert outcome(await rig.commit(pre)) == ("in-doubt", "UPSTREAM_NO_ANSWER")
    del up.errors["make"]
    again = await rig.commit(pre)
    assert outcome(again) == ("in-doubt", "IN_DOUBT") and "idempotentHint" in again["reason"]
    assert up.calls == ["make"] and await rig.state() == "committing"  # sent once, never again blindly
    with pytest.raises(EffectInDoubt) as err:
        await rig.op.lookup("txn-up-0001:b1", rig.plan.branches[0])
    assert err.value.rule == "HATP-PXY-65"
