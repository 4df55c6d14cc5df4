"""The proxy's policy file as a wire model: strict shape, expressions compiled when it is read (spec/proxy.md)."""

from __future__ import annotations

from typing import Any

import pytest

from hatp_mcp.core.model.proxy_policy import EnvFromEnv, EnvFromFile, HttpUpstream, StdioUpstream, load_policy
from hatp_mcp.errors import HatpError

MEMORY: dict[str, Any] = {
    "upstream": {
        "command": "node",
        "args": ["server-memory/dist/index.js"],
        "env": {"MEMORY_FILE_PATH": "/srv/m.jsonl", "TOKEN": {"env": "HATP_TOKEN"}, "KEY": {"file": "/srv/key"}},
    },
    "default": "deny",
    "tools": {
        "read_graph": {"policy": "pass", "readOnly": True},
        "create_entities": {
            "policy": "journal",
            "undo": {"tool": "delete_entities", "arguments": {"entityNames": "result.entities[*].name"}},
        },
        "write": {"policy": "irreversible"},
    },
}


def refused(doc: Any) -> HatpError:
    with pytest.raises(HatpError) as err:
        load_policy(doc)
    return err.value


def test_a_policy_file_reads_with_its_env_kinds_and_round_trips_on_the_wire() -> None:
    policy = load_policy(MEMORY)
    assert isinstance(policy.upstream, StdioUpstream)
    env = policy.upstream.env
    assert env["MEMORY_FILE_PATH"] == "/srv/m.jsonl"
    assert env["TOKEN"] == EnvFromEnv(env="HATP_TOKEN") and env["KEY"] == EnvFromFile(file="/srv/key")
    assert policy.tools["read_graph"].read_only is True
    assert load_policy(policy.wire()) == policy
    assert load_policy({"upstream": {"url": "https://tools.example/mcp"}}).default == "deny"  # fail closed
    assert isinstance(load_policy({"upstream": {"url": "http://127.0.0.1:1/mcp"}}).upstream, HttpUpstream)


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ({**MEMORY, "shadow": "yes"}, "shadow"),
        ({**MEMORY, "watch": True}, "watch"),
        ({"upstream": {"command": "node", "shell": "rm -rf /"}}, "upstream.shell"),
        ({"upstream": {"command": "node", "env": {"A": {"envx": "B"}}}}, "upstream.env.A.env"),
        ({"upstream": {"command": "node", "env": {"A": 1}}}, "upstream.env.A"),
        ({"upstream": {"command": "node"}, "tools": {"t": {"policy": "approve"}}}, "tools.t.policy"),
        ({"upstream": {"command": "node"}, "default": "journal"}, "default"),
        ({"upstream": {"command": "node"}, "tools": {"t": {"policy": "journal"}}}, "tools.t.undo"),
        (
            {"upstream": {"command": "node"}, "tools": {"t": {"policy": "pass", "undo": {"tool": "u"}}}},
            "tools.t.undo",
        ),
    ],
)
def test_HATP_PXY_1_a_file_not_of_the_schema_is_refused_with_its_path(doc: Any, path: str) -> None:
    err = refused(doc)
    assert (err.rule, err.code, err.path) == ("HATP-PXY-1", "BAD_POLICY", path)
    assert err.fix


@pytest.mark.parametrize(
    "expression", ["args.[", "result.entities[*.name", "`unterminated", "", "!" * 998 + "a", "a" * 1001]
)
def test_HATP_PXY_3_an_expression_that_does_not_parse_is_refused_with_its_path_and_the_fix(expression: str) -> None:
    doc = {
        "upstream": {"command": "node"},
        "tools": {"t": {"policy": "journal", "undo": {"tool": "u", "arguments": {"names": expression}}}},
    }
    err = refused(doc)
    assert (err.rule, err.code, err.path) == ("HATP-PXY-3", "BAD_EXPRESSION", "tools.t.undo.arguments.names")
    assert "JMESPath" in err.fix


def test_HATP_PXY_3_a_lookup_expression_is_compiled_too() -> None:
    doc = {
        "upstream": {"command": "node"},
        "tools": {
            "t": {
                "policy": "journal",
                "undo": {"tool": "u", "arguments": {"x": "args.x"}},
                "lookup": {"tool": "l", "arguments": {"x": "args.x"}, "happened": "result.found =="},
            }
        },
    }
    err = refused(doc)
    assert (err.rule, err.path) == ("HATP-PXY-3", "tools.t.lookup.happened")


GATED: dict[str, Any] = {
    "upstream": {"command": "node"},
    "tools": {
        "pay": {
            "policy": "gate",
            "gate": {
                "address": "human://acme.com/bob",
                "action": "travel.spend",
                "amount": "args.a",
                "currency": "USD",
                "max": "1000",
            },
        }
    },
    "budgets": [{"currency": "USD", "limit": "30", "windowSeconds": 86400}],
}


def test_a_gated_tool_and_budgets_read_and_round_trip() -> None:
    policy = load_policy(GATED)
    gate = policy.tools["pay"].gate
    assert gate is not None and (gate.amount, gate.currency, gate.max) == ("args.a", "USD", "1000")
    assert policy.budgets[0].window_seconds == 86400
    assert load_policy(policy.wire()) == policy


def _gate(**over: Any) -> dict[str, Any]:
    """GATED with its tool's members changed (None: left out)."""
    tool = {k: v for k, v in {**GATED["tools"]["pay"], **over}.items() if v is not None}
    return {**GATED, "tools": {"pay": tool}}


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        (_gate(policy="pass"), "tools.pay.gate"),
        (_gate(gate=None), "tools.pay.gate"),
        (_gate(gate={"address": "human://acme.com/bob", "action": "a", "amount": "args.a"}), "tools.pay.gate"),
        (_gate(gate={"address": "human://acme.com/bob", "action": "a", "max": "10"}), "tools.pay.gate.max"),
    ],
)
def test_HATP_PXY_20_a_gate_on_another_policy_or_an_amount_without_its_currency_is_refused(
    doc: dict[str, Any], path: str
) -> None:
    err = refused(doc)
    assert (err.rule, err.path, err.code) == ("HATP-PXY-20", path, "BAD_POLICY")


@pytest.mark.parametrize(
    ("gate", "path"),
    [
        ({"address": "mailto:bob@acme.com", "action": "a"}, "tools.pay.gate.address"),
        (
            {"address": "human://acme.com/bob", "action": "a", "amount": "args.[", "currency": "USD"},
            "tools.pay.gate.amount",
        ),
        (
            {"address": "human://acme.com/bob", "action": "a", "amount": "args.a", "currency": "usd"},
            "tools.pay.gate.currency",
        ),
        ({"address": "human://acme.com/bob", "action": "a", "who": "me"}, "tools.pay.gate.who"),
    ],
)
def test_HATP_PXY_20_a_gate_of_the_wrong_shape_is_refused_with_its_path(gate: dict[str, Any], path: str) -> None:
    err = refused(_gate(gate=gate))
    assert err.rule in ("HATP-PXY-1", "HATP-PXY-3") and err.path == path


_UNDO = {"tool": "delete_entities", "arguments": {"entityNames": "args.entities[*].name"}}
_HOLD = {"tool": "confirm", "arguments": {}}


def _participant(entry: dict[str, Any], identity: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = {**MEMORY, "tools": {"create_entities": entry, "open": {"policy": "pass"}}}
    doc["participant"] = identity if identity is not None else {"uri": "mcp://memory.example/hatp"}
    return doc


def test_a_participant_entry_of_each_tier_reads_and_round_trips() -> None:
    for spec in (
        {"tier": "compensate", "undo": _UNDO, "precondition": {"tool": "open_nodes", "version": "result"}},
        {"tier": "final", "operation": "memory.note"},
        {"tier": "hold", "confirm": _HOLD, "release": _HOLD},
    ):
        doc = _participant({"policy": "participant", "participant": spec})
        policy = load_policy(doc)
        assert load_policy(policy.wire()) == policy
        assert policy.participant is not None and policy.participant.max_call_seconds == 30


@pytest.mark.parametrize(
    ("entry", "path"),
    [
        ({"policy": "participant"}, "tools.create_entities.participant"),
        ({"policy": "pass", "participant": {"tier": "final"}}, "tools.create_entities.participant"),
        ({"policy": "participant", "participant": {"tier": "compensate"}}, "tools.create_entities.participant.undo"),
        (
            {"policy": "participant", "participant": {"tier": "final", "undo": _UNDO}},
            "tools.create_entities.participant.undo",
        ),
        (
            {"policy": "participant", "participant": {"tier": "hold", "confirm": _HOLD}},
            "tools.create_entities.participant.release",
        ),
        (
            {"policy": "participant", "participant": {"tier": "compensate", "undo": _UNDO, "confirm": _HOLD}},
            "tools.create_entities.participant.confirm",
        ),
        (
            {
                "policy": "participant",
                "participant": {"tier": "hold", "confirm": _HOLD, "release": _HOLD, "precondition": {"tool": "x"}},
            },
            "tools.create_entities.participant.precondition",
        ),
    ],
)
def test_HATP_PXY_30_a_participant_entry_that_does_not_fit_its_tier_is_refused_with_its_path(
    entry: dict[str, Any], path: str
) -> None:
    err = refused(_participant(entry))
    assert (err.rule, err.code, err.path) == ("HATP-PXY-30", "BAD_POLICY", path)
    assert err.fix


def test_HATP_PXY_30_participant_tools_need_the_proxys_uri_and_operation_names_of_their_own() -> None:
    entry = {"policy": "participant", "participant": {"tier": "final", "operation": "note"}}
    doc = _participant(entry)
    del doc["participant"]
    err = refused(doc)
    assert (err.rule, err.path) == ("HATP-PXY-30", "participant")
    twice = _participant(entry)
    twice["tools"]["open"] = entry
    err = refused(twice)
    assert (err.rule, err.path) == ("HATP-PXY-30", "tools.open.participant.operation")
    bad_uri = refused(_participant(entry, {"uri": "not a uri"}))
    assert (bad_uri.rule, bad_uri.path) == ("HATP-PXY-1", "participant.uri")
