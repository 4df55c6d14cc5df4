"""The proxy's decision per upstream tool, checked against the upstream's tools at start, and the undo arguments
its expressions build (hatp_mcp/core/journal/proxy_tools.py, spec/proxy.md)."""

from __future__ import annotations

from typing import Any

import pytest

from hatp_mcp.core.journal.proxy_tools import (
    UpstreamTool,
    build_arguments,
    call_document,
    expression_shape,
    resolve_tools,
)
from hatp_mcp.core.model.proxy_policy import load_policy
from hatp_mcp.errors import HatpError

# server-memory's schemas, as its tools/list gives them
_STR_LIST = {"type": "array", "items": {"type": "string"}}
DELETIONS = {
    "type": "object",
    "properties": {
        "deletions": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"entityName": {"type": "string"}, "observations": _STR_LIST},
                "required": ["entityName", "observations"],
            },
        }
    },
    "required": ["deletions"],
}
UPSTREAM = [
    UpstreamTool("create_entities", {"type": "object", "properties": {"entities": {"type": "array"}}}),
    UpstreamTool(
        "delete_entities", {"type": "object", "properties": {"entityNames": _STR_LIST}, "required": ["entityNames"]}
    ),
    UpstreamTool("add_observations", {"type": "object", "properties": {"observations": {"type": "array"}}}),
    UpstreamTool("delete_observations", DELETIONS),
    UpstreamTool("read_graph", {"type": "object", "properties": {}}, read_only_hint=True),
    UpstreamTool("strict", {"type": "object", "properties": {"a": {}}, "additionalProperties": False}),
]
ADD_UNDO = {
    "tool": "delete_observations",
    "arguments": {"deletions": "args.observations[*].{entityName: entityName, observations: contents}"},
}


def policy(tools: dict[str, Any], default: str = "deny") -> Any:
    return load_policy({"upstream": {"command": "node"}, "default": default, "tools": tools})


def refused(tools: dict[str, Any], default: str = "deny") -> HatpError:
    with pytest.raises(HatpError) as err:
        resolve_tools(policy(tools, default), UPSTREAM)
    return err.value


def test_each_upstream_tool_gets_its_policy_or_the_default() -> None:
    rules = resolve_tools(
        policy(
            {
                "create_entities": {
                    "policy": "journal",
                    "undo": {"tool": "delete_entities", "arguments": {"entityNames": "result.entities[*].name"}},
                },
                "add_observations": {"policy": "journal", "undo": ADD_UNDO},
                "strict": {"policy": "hide"},
            }
        ),
        UPSTREAM,
    )
    assert {n: r.action for n, r in rules.items()} == {
        "create_entities": "journal",
        "delete_entities": "deny",
        "add_observations": "journal",
        "delete_observations": "deny",
        "read_graph": "deny",
        "strict": "hide",
    }
    assert rules["create_entities"].undo is not None and rules["create_entities"].undo.tool == "delete_entities"


def test_HATP_PXY_4_a_tool_or_an_undo_tool_the_upstream_lacks_is_refused_at_start() -> None:
    err = refused({"create_entity": {"policy": "pass"}})
    assert (err.rule, err.code, err.path) == ("HATP-PXY-4", "UNKNOWN_TOOL", "tools.create_entity")
    assert "create_entities" in err.reason  # it says what the upstream has
    err = refused({"create_entities": {"policy": "journal", "undo": {"tool": "remove_entities"}}})
    assert (err.rule, err.path) == ("HATP-PXY-4", "tools.create_entities.undo.tool")
    err = refused(
        {
            "create_entities": {
                "policy": "journal",
                "undo": {"tool": "delete_entities", "arguments": {"entityNames": "args.entities[*].name"}},
                "lookup": {"tool": "find", "happened": "result"},
            }
        }
    )
    assert (err.rule, err.path) == ("HATP-PXY-4", "tools.create_entities.lookup.tool")


@pytest.mark.parametrize(
    ("arguments", "path", "why"),
    [
        ({}, "tools.add_observations.undo.arguments", "lacks required 'deletions'"),
        ({"deletions": "args.observations[*].{entityName: entityName, contents: contents}"}, "", "'observations'"),
        ({"deletions": "args.observations[0].{entityName: entityName, observations: contents}"}, "", "object"),
        ({"deletions": '`"all"`'}, "", "string"),
    ],
)
def test_HATP_PXY_5_undo_arguments_that_cannot_fit_the_undo_tools_schema_are_refused_at_start(
    arguments: dict[str, str], path: str, why: str
) -> None:
    err = refused(
        {"add_observations": {"policy": "journal", "undo": {"tool": "delete_observations", "arguments": arguments}}}
    )
    assert (err.rule, err.code) == ("HATP-PXY-5", "UNDO_ARGUMENTS_UNFIT")
    assert err.path.startswith(path or "tools.add_observations.undo.arguments.deletions") and why in err.reason


def test_HATP_PXY_5_an_argument_the_schema_forbids_is_refused_and_a_fitting_one_passes() -> None:
    err = refused({"create_entities": {"policy": "journal", "undo": {"tool": "strict", "arguments": {"b": "args.b"}}}})
    assert (err.rule, err.path) == ("HATP-PXY-5", "tools.create_entities.undo.arguments.b")
    resolve_tools(policy({"add_observations": {"policy": "journal", "undo": ADD_UNDO}}), UPSTREAM)  # no raise


@pytest.mark.parametrize("kind", ["journal", "irreversible"])
def test_HATP_PXY_6_a_read_only_tool_is_never_journaled(kind: str) -> None:
    entry: dict[str, Any] = {"policy": kind}
    if kind == "journal":
        entry["undo"] = {"tool": "delete_entities", "arguments": {"entityNames": "`[]`"}}
    err = refused({"read_graph": entry})
    assert (err.rule, err.code, err.path) == ("HATP-PXY-6", "READ_ONLY_JOURNALED", "tools.read_graph.policy")
    err = refused({"create_entities": {**entry, "readOnly": True}})  # the file's own mark counts too
    assert err.rule == "HATP-PXY-6"
    rules = resolve_tools(policy({}, default="irreversible"), UPSTREAM)
    assert rules["read_graph"].action == "pass" and rules["create_entities"].action == "irreversible"


def test_HATP_PXY_7_an_expression_that_finds_nothing_refuses_the_undo_rather_than_send_it_short() -> None:
    doc = call_document({"observations": [{"entityName": "a", "contents": ["x"]}]}, {"results": []})
    built = build_arguments(ADD_UNDO["arguments"], doc, what="undo", path="p")
    assert built == {"deletions": [{"entityName": "a", "observations": ["x"]}]}  # the renamed field
    with pytest.raises(HatpError) as err:
        build_arguments({"entityNames": "result.entities[*].name"}, doc, what="undo of create_entities", path="p")
    assert (err.value.rule, err.value.code, err.value.path) == ("HATP-PXY-7", "ARGUMENT_NOT_FOUND", "p.entityNames")


def test_an_expressions_shape_is_read_from_its_syntax() -> None:
    assert expression_shape("result.entities[*].name") == ("array", None)
    assert expression_shape("args.x") is None
    assert expression_shape("args.o[*].{a: b}") == ("array", ("object", {"a": None}))
    assert expression_shape("`3`") == "integer"


def _participant(spec: dict[str, Any]) -> Any:
    return load_policy(
        {
            "upstream": {"command": "node"},
            "participant": {"uri": "mcp://memory.example/hatp"},
            "tools": {"create_entities": {"policy": "participant", "participant": spec}},
        }
    )


_NAMES = {"entityNames": "args.entities[*].name"}


@pytest.mark.parametrize(
    ("spec", "path", "code"),
    [
        (
            {"tier": "compensate", "undo": {"tool": "remove_entities", "arguments": _NAMES}},
            "tools.create_entities.participant.undo.tool",
            "UNKNOWN_TOOL",
        ),
        (
            {"tier": "compensate", "undo": {"tool": "delete_entities", "arguments": {"names": "args.x"}}},
            "tools.create_entities.participant.undo.arguments",
            "UNDO_ARGUMENTS_UNFIT",
        ),
        (
            {"tier": "final", "precondition": {"tool": "open_nodes", "arguments": {}}},
            "tools.create_entities.participant.precondition.tool",
            "UNKNOWN_TOOL",
        ),
        (
            {"tier": "final", "precondition": {"tool": "strict", "arguments": {"b": "args.b"}}},
            "tools.create_entities.participant.precondition.arguments.b",
            "UNDO_ARGUMENTS_UNFIT",
        ),
        (
            {"tier": "hold", "confirm": {"tool": "delete_entities", "arguments": _NAMES}, "release": {"tool": "x"}},
            "tools.create_entities.participant.release.tool",
            "UNKNOWN_TOOL",
        ),
    ],
)
def test_HATP_PXY_31_a_participant_call_the_upstream_lacks_or_whose_arguments_cannot_fit_is_refused_at_start(
    spec: dict[str, Any], path: str, code: str
) -> None:
    with pytest.raises(HatpError) as err:
        resolve_tools(_participant(spec), UPSTREAM)
    assert (err.value.rule, err.value.path, err.value.code) == ("HATP-PXY-31", path, code)


def test_a_participant_tool_whose_calls_fit_gets_its_rule() -> None:
    look = {"tool": "read_graph", "arguments": {}, "happened": "result.entities[?name == 'a'] != `[]`"}
    spec = {"tier": "compensate", "undo": {"tool": "delete_entities", "arguments": _NAMES}, "lookup": look}
    rule = resolve_tools(_participant(spec), UPSTREAM)["create_entities"]
    assert rule.action == "participant" and rule.participant is not None and rule.participant.tier == "compensate"


def _with_ref_schema(schema: dict[str, Any]) -> HatpError | None:
    """The refusal (or None) for add_observations undone by a tool whose inputSchema is `schema`."""
    tools = [*UPSTREAM, UpstreamTool("delete_by_ref", schema)]
    undo = {**ADD_UNDO, "tool": "delete_by_ref"}
    try:
        resolve_tools(policy({"add_observations": {"policy": "journal", "undo": undo}}), tools)
    except HatpError as exc:
        return exc
    return None


_DELETION = DELETIONS["properties"]["deletions"]["items"]  # type: ignore[index]


@pytest.mark.parametrize("defs", ["$defs", "definitions"])
def test_HATP_PXY_45_the_shape_check_follows_local_refs_to_defs_and_definitions(defs: str) -> None:
    strict = {**_DELETION, "required": ["entityName", "observations", "reason"]}  # a member the undo never builds
    schema = {
        "type": "object",
        "properties": {"deletions": {"$ref": f"#/{defs}/Deletions"}},
        "required": ["deletions"],
        defs: {"Deletions": {"type": "array", "items": {"$ref": f"#/{defs}/Deletion"}}, "Deletion": strict},
    }
    err = _with_ref_schema(schema)
    assert err is not None and (err.rule, err.code) == ("HATP-PXY-5", "UNDO_ARGUMENTS_UNFIT")
    assert "'reason'" in err.reason and err.path == "tools.add_observations.undo.arguments.deletions[*]"
    fitting = {**schema, defs: {**schema[defs], "Deletion": _DELETION}}  # type: ignore[dict-item]
    assert _with_ref_schema(fitting) is None


def test_HATP_PXY_45_a_recursive_schema_is_followed_only_as_deep_as_the_built_shape() -> None:
    node = {
        "type": "object",
        "properties": {"entityName": {"type": "string"}, "observations": _STR_LIST, "children": {"$ref": "#"}},
    }
    schema = {"type": "object", "properties": {"deletions": {"type": "array", "items": {"$ref": "#/$defs/N"}}}}
    assert _with_ref_schema({**schema, "$defs": {"N": node}}) is None


@pytest.mark.parametrize(
    ("ref", "defs", "why"),
    [
        ("https://example.com/deletions.json", {}, "never fetched"),
        ("other.json#/$defs/D", {}, "never fetched"),
        ("#/$defs/Missing", {}, "points at nothing"),
        ("#/$defs/A", {"A": {"$ref": "#/$defs/B"}, "B": {"$ref": "#/$defs/A"}}, "lead only to each other"),
    ],
)
def test_HATP_PXY_45_a_remote_missing_or_looping_ref_is_refused_at_start_naming_it(
    ref: str, defs: dict[str, Any], why: str
) -> None:
    schema = {"type": "object", "properties": {"deletions": {"$ref": ref}}, "$defs": defs}
    err = _with_ref_schema(schema)
    assert err is not None and (err.rule, err.code) == ("HATP-PXY-45", "SCHEMA_REF_UNFOLLOWED")
    assert why in err.reason and err.path == "tools.add_observations.undo.arguments.deletions"
