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
        ({**MEMORY, "shadow": True}, "shadow"),
        ({"upstream": {"command": "node", "shell": "rm -rf /"}}, "upstream.shell"),
        ({"upstream": {"command": "node", "env": {"A": {"envx": "B"}}}}, "upstream.env.A.env"),
        ({"upstream": {"command": "node", "env": {"A": 1}}}, "upstream.env.A"),
        ({"upstream": {"command": "node"}, "tools": {"t": {"policy": "gate"}}}, "tools.t.policy"),
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
