"""The proxy's participant tools (hatp_mcp/mcp/proxy_participant.py, spec/proxy.md section 3): each tier's callbacks
as calls to a recorded upstream, the participant's own key, and the tools kept out of the model's reach."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import mcp.types as types
import pytest
from mcp import Client
from mcp.server import MCPServer

from hatp_mcp.cli.proxy_cmd import starter_readme
from hatp_mcp.core.journal.proxy_tools import UpstreamTool, resolve_tools
from hatp_mcp.core.model.plan import Branch
from hatp_mcp.core.model.proxy_policy import APPROVER_PLACEHOLDER, ParticipantOperation, load_policy
from hatp_mcp.core.participant.branch import Lease
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.journal_proxy import JournalingProxy
from hatp_mcp.mcp.proxy_participant import KeptResults, UpstreamOperation, check_participant, open_participant
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.runtime.participant.operation import Performed
from hatp_mcp.store.journal_store import MemoryJournalStore
from tests.coordinators import COORDINATOR, trust_dirs

pytestmark = pytest.mark.anyio

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
KEY = "txn-1:b1"
MAKE = UpstreamTool(
    "make",
    {
        "type": "object",
        "properties": {"names": {"type": "array", "items": {"type": "string"}}},
        "required": ["names"],
        "additionalProperties": False,
    },
)


class Upstream:
    """A recorded upstream: each call is kept; `answers[tool]` is what it answers (an `isError` when absent)."""

    def __init__(self, **answers: Any) -> None:
        self.answers = answers
        self.calls: list[tuple[str, dict[str, Any], str | None]] = []

    async def __call__(self, name: str, arguments: dict[str, Any], key: str | None) -> types.CallToolResult:
        self.calls.append((name, arguments, key))
        if name not in self.answers:
            return types.CallToolResult(content=[types.TextContent(type="text", text="no such thing")], is_error=True)
        value = self.answers[name]
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(value))])


def branch(args: dict[str, Any], tier: str = "compensate") -> Branch:
    return Branch.model_validate(
        {"branchId": "b1", "participant": "mcp://up.example/hatp", "operation": "make", "tier": tier, "args": args}
    )


def operation(tmp_path: Path, up: Upstream, **spec: Any) -> UpstreamOperation:
    return UpstreamOperation(MAKE, ParticipantOperation.model_validate(spec), up, KeptResults(tmp_path / "kept"))


COMPENSATE = {
    "tier": "compensate",
    "undo": {"tool": "unmake", "arguments": {"ids": "result.ids", "names": "args.names"}},
    "precondition": {"tool": "find", "arguments": {"names": "args.names"}, "version": "result.found"},
}


async def test_HATP_PXY_33_arguments_unfit_for_the_tools_input_schema_vote_no_and_nothing_is_sent(
    tmp_path: Path,
) -> None:
    up = Upstream(find={"found": []})
    op = operation(tmp_path, up, **COMPENSATE)
    for args in ({}, {"names": "a"}, {"names": ["a"], "extra": 1}):
        dry = await op.dry_run(branch(args), NOW)
        assert (dry.refuse_code, (dry.refuse_reason or "")[:12]) == ("ARGUMENTS_UNFIT", "HATP-PXY-33:")
    assert up.calls == []
    fits = await op.dry_run(branch({"names": ["a"]}), NOW)
    assert fits.refuse_code is None and [c[0] for c in up.calls] == ["find"]


async def test_HATP_PXY_34_the_precondition_reads_answer_is_the_signed_version_and_a_failed_read_votes_no(
    tmp_path: Path,
) -> None:
    up = Upstream(find={"found": [], "noise": 1})
    op = operation(tmp_path, up, **COMPENSATE)
    first = await op.dry_run(branch({"names": ["a"]}), NOW)
    up.answers["find"] = {"found": [], "noise": 2}  # outside what `version` selects: the same version
    same = await op.dry_run(branch({"names": ["a"]}), NOW)
    up.answers["find"] = {"found": ["a"]}
    moved = await op.dry_run(branch({"names": ["a"]}), NOW)
    assert first.versions == same.versions == {"find": digest([])} != moved.versions
    assert up.calls[0] == ("find", {"names": ["a"]}, None)
    del up.answers["find"]
    failed = await op.dry_run(branch({"names": ["a"]}), NOW)
    assert failed.refuse_code == "PRECONDITION_UNREADABLE" and failed.versions == {}
    assert (failed.refuse_reason or "").startswith("HATP-PXY-34: find failed")


async def test_HATP_PXY_35_commit_is_the_upstream_call_with_its_key_and_its_result_is_kept(tmp_path: Path) -> None:
    up = Upstream(make={"ids": ["id-a"]})
    op = operation(tmp_path, up, **COMPENSATE)
    await op.perform("txn-1", branch({"names": ["a"]}), NOW, key=KEY)
    assert up.calls == [("make", {"names": ["a"]}, KEY)]
    assert op.kept.get(KEY, "commit") == (True, {"ids": ["id-a"]})
    del up.answers["make"]
    with pytest.raises(HatpError) as err:
        await op.perform("txn-2", branch({"names": ["b"]}), NOW, key="txn-2:b1")
    assert (err.value.rule, err.value.code) == ("HATP-PXY-35", "UPSTREAM_REFUSED")
    assert op.kept.get("txn-2:b1", "commit") == (False, None)


async def test_HATP_PXY_36_compensate_sends_the_undo_built_from_the_args_and_the_kept_result(tmp_path: Path) -> None:
    up = Upstream(make={"ids": ["id-a"]}, unmake={"ok": True})
    op = operation(tmp_path, up, **COMPENSATE)
    with pytest.raises(HatpError) as err:  # nothing committed, nothing kept: no undo is guessed
        await op.undo("txn-1", branch({"names": ["a"]}), None, NOW, key=KEY)
    assert (err.value.rule, err.value.code, up.calls) == ("HATP-PXY-36", "NOTHING_TO_UNDO", [])
    await op.perform("txn-1", branch({"names": ["a"]}), NOW, key=KEY)
    await op.undo("txn-1", branch({"names": ["a"]}), None, NOW, key=KEY)
    assert up.calls[-1] == ("unmake", {"ids": ["id-a"], "names": ["a"]}, KEY)
    del up.answers["unmake"]
    with pytest.raises(HatpError) as refused:
        await op.undo("txn-1", branch({"names": ["a"]}), None, NOW, key=KEY)
    assert (refused.value.rule, refused.value.code) == ("HATP-PXY-36", "UPSTREAM_REFUSED")


async def test_HATP_PXY_37_a_hold_tier_holds_at_prepare_confirms_at_commit_and_releases_at_abort(
    tmp_path: Path,
) -> None:
    up = Upstream(make={"holdId": "h-1"}, confirm={"ok": True}, release={"ok": True})
    op = operation(
        tmp_path,
        up,
        tier="hold",
        confirm={"tool": "confirm", "arguments": {"hold": "result.holdId"}},
        release={"tool": "release", "arguments": {"hold": "result.holdId"}},
    )
    held = branch({"names": ["a"]}, "hold")
    with pytest.raises(HatpError) as err:  # a commit with no hold placed confirms nothing
        await op.perform("txn-1", held, NOW, key=KEY)
    assert (err.value.rule, err.value.code, up.calls) == ("HATP-PXY-37", "HOLD_LOST", [])
    await op.place_hold("txn-1", held, Lease(NOW, NOW))
    await op.release_hold("txn-1", held)
    await op.perform("txn-1", held, NOW, key=KEY)
    assert up.calls == [
        ("make", {"names": ["a"]}, KEY),
        ("release", {"hold": "h-1"}, KEY),
        ("confirm", {"hold": "h-1"}, KEY),
    ]


async def test_HATP_PXY_39_a_lost_commit_is_found_by_its_kept_result_or_the_lookup_never_sent_again_blindly(
    tmp_path: Path,
) -> None:
    up = Upstream(find={"found": ["a"]})
    look = {"tool": "find", "arguments": {"names": "args.names"}, "happened": "contains(result.found, 'a')"}
    op = operation(tmp_path, up, **{**COMPENSATE, "lookup": look})
    assert isinstance(await op.lookup(KEY, branch({"names": ["a"]})), Performed)
    up.answers["find"] = {"found": []}
    assert await op.lookup("txn-2:b1", branch({"names": ["a"]})) is None
    up.answers["find"] = {"nothing": True}  # the lookup cannot tell
    with pytest.raises(HatpError) as err:
        await op.lookup("txn-3:b1", branch({"names": ["a"]}))
    assert (err.value.rule, err.value.code) == ("HATP-PXY-39", "IN_DOUBT")
    calls = len(up.calls)
    assert isinstance(await op.lookup(KEY, branch({"names": ["a"]})), Performed)  # the kept answer says so
    assert len(up.calls) == calls and [c[0] for c in up.calls] == ["find", "find", "find"]


POLICY = {
    "upstream": {"url": "http://127.0.0.1:9/mcp"},
    "participant": {"uri": "mcp://up.example/hatp"},
    "tools": {
        "make": {
            "policy": "participant",
            "participant": {
                "tier": "compensate",
                "undo": {"tool": "unmake", "arguments": {"id": "result.id"}},
                "lookup": {"tool": "unmake", "arguments": {"id": "args.name"}, "happened": "result.id"},
            },
        },
        "unmake": {"policy": "pass"},
    },
}


def upstream() -> tuple[MCPServer, list[str]]:
    made: list[str] = []
    server = MCPServer("upstream", log_level="WARNING")

    @server.tool()
    def make(name: str) -> dict[str, Any]:
        made.append(name)
        return {"id": name}

    @server.tool()
    def unmake(id: str) -> dict[str, Any]:
        return {"id": id}

    return server, made


async def test_HATP_PXY_32_a_participant_tool_is_not_listed_and_a_direct_call_is_refused_unsent() -> None:
    server, made = upstream()
    with anyio.fail_after(10):
        async with Client(server) as client:
            j = Journal(MemoryJournalStore(), SigningKey.generate(["journal"]))
            proxy = JournalingProxy(client, (await client.list_tools()).tools, j, load_policy(POLICY))
            async with Client(proxy.server()) as model:
                listed = {t.name for t in (await model.list_tools()).tools}
                result = await model.call_tool("make", {"name": "a"})
    assert "make" not in listed and "unmake" in listed
    assert result.is_error and made == []
    assert (result.structured_content or {})["refusal"]["code"] == "PARTICIPANT_ONLY"
    assert (result.structured_content or {})["refusal"]["rule"] == "HATP-PXY-32"


def test_HATP_PXY_38_the_participant_signs_with_its_own_key_and_a_key_of_another_role_is_refused(
    tmp_path: Path,
) -> None:
    policy = load_policy(POLICY)
    tools = [MAKE, UpstreamTool("unmake", {"type": "object", "properties": {"id": {"type": "string"}}})]
    rules = resolve_tools(policy, tools)
    up = Upstream()
    with open_participant(tmp_path, policy, rules, tools, up, FakeClock(NOW)) as opened:
        assert opened is not None
        advertised = opened.settings.to_json()["hatp"]
    key = json.loads((tmp_path / "participant" / "public.jwk.json").read_text())
    assert advertised["roles"] == ["participant"] and advertised["operations"]["make"]["tier"] == "compensate"
    assert [k["kid"] for k in advertised["keys"]] == [key["kid"]] and "participant" in key.get("roles", [])
    other = tmp_path / "other"
    (other / "participant").mkdir(parents=True)
    journal_key = SigningKey.generate(["journal"])
    (other / "participant" / "key.jwk.json").write_text(json.dumps(journal_key.private_jwk()))
    with pytest.raises(HatpError) as err, open_participant(other, policy, rules, tools, up, FakeClock(NOW)):
        pass
    assert (err.value.rule, err.value.code) == ("HATP-PXY-38", "WRONG_KEY_ROLE")


def test_HATP_PXY_63_a_key_file_signs_when_only_its_owner_may_read_it_and_is_a_participants(tmp_path: Path) -> None:
    policy = load_policy(POLICY)
    tools = [MAKE, UpstreamTool("unmake", {"type": "object", "properties": {"id": {"type": "string"}}})]
    rules = resolve_tools(policy, tools)
    own = SigningKey.generate(["participant"])
    path = tmp_path / "participant.jwk.json"
    path.write_text(json.dumps(own.private_jwk()))

    def refusal(data: Path, key_file: Path) -> tuple[str, str]:
        with (
            pytest.raises(HatpError) as err,
            open_participant(data, policy, rules, tools, Upstream(), FakeClock(NOW), None, key_file),
        ):
            pass
        return err.value.rule, err.value.code

    path.chmod(0o644)  # others may read it: refused before it is used
    assert refusal(tmp_path / "a", path) == ("HATP-PXY-63", "KEY_FILE_OPEN")
    assert refusal(tmp_path / "a", tmp_path / "absent.json") == ("HATP-PXY-63", "KEY_FILE_UNREADABLE")
    path.chmod(0o600)
    with open_participant(tmp_path / "b", policy, rules, tools, Upstream(), FakeClock(NOW), None, path) as opened:
        assert opened is not None
        advertised = opened.settings.to_json()["hatp"]
    assert [k["kid"] for k in advertised["keys"]] == [own.kid]
    public = json.loads((tmp_path / "b" / "participant" / "public.jwk.json").read_text())
    assert public["kid"] == own.kid and "d" not in public
    assert not (tmp_path / "b" / "participant" / "key.jwk.json").exists()  # the default key is not made
    other = tmp_path / "other.jwk.json"  # a second key against the public half the coordinators pinned
    other.write_text(json.dumps(SigningKey.generate(["participant"]).private_jwk()))
    other.chmod(0o600)
    assert refusal(tmp_path / "b", other) == ("HATP-PXY-63", "KEY_MISMATCH")
    journal = tmp_path / "journal.jwk.json"
    journal.write_text(json.dumps(SigningKey.generate(["journal"]).private_jwk()))
    journal.chmod(0o600)
    assert refusal(tmp_path / "c", journal) == ("HATP-PXY-38", "WRONG_KEY_ROLE")


def test_HATP_PXY_64_the_participant_side_is_checked_without_writing_anything(tmp_path: Path) -> None:
    policy = load_policy(POLICY)
    tools = [MAKE, UpstreamTool("unmake", {"type": "object", "properties": {"id": {"type": "string"}}})]
    rules = resolve_tools(policy, tools)
    data = tmp_path / "data"

    def refusal(*args: Any) -> tuple[str, str]:
        with pytest.raises(HatpError) as err:
            check_participant(*args)
        return err.value.rule, err.value.code

    assert refusal(None, policy, rules) == ("HATP-PXY-64", "DATA_NEEDED")
    assert refusal(data, policy, rules) == ("HATP-PXY-64", "NO_TRUST_LIST")  # every request would be refused
    (tmp_path / "bad.json").write_text(json.dumps({"keys": [SigningKey.generate(["journal"]).public_jwk()]}))
    assert refusal(data, policy, rules, None, str(tmp_path / "bad.json")) == ("HATP-PXY-64", "BAD_TRUST_LIST")
    trust_dirs([data])
    checked = check_participant(data, policy, rules)
    assert checked is not None and checked["trustedCoordinators"] == [COORDINATOR]
    assert checked["key"].startswith("made on first start") and not (data / "participant").exists()
    (data / "participant").mkdir()
    (data / "participant" / "key.jwk.json").write_text(json.dumps(SigningKey.generate(["journal"]).private_jwk()))
    assert refusal(data, policy, rules) == ("HATP-PXY-38", "WRONG_KEY_ROLE")
    passing = load_policy({**POLICY, "tools": {"make": {"policy": "pass"}}})
    assert check_participant(None, passing, resolve_tools(passing, tools)) is None  # no participant tools
    readme = starter_readme("memory", [types.Tool(name="make", input_schema={"type": "object"})], APPROVER_PLACEHOLDER)
    assert '"make": {"policy": "participant"' in readme and '"lookup"' in readme
