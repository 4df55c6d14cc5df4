"""Which strategy feeds each kind of fuzz target."""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.fuzz.servers import COORDINATOR_CALLS, GATEWAY_CALLS, PARTICIPANT_CALLS, tool_calls
from tests.fuzz.strategies import SAGA, TRIP, hostile_json, json_texts, jsonrpc_messages, plans, sagas
from tests.fuzz.targets import ORG_DOCS, RECORD

INPUTS: dict[str, st.SearchStrategy[Any]] = {
    "plan-bytes": json_texts(TRIP),
    "saga-bytes": json_texts(SAGA),
    "plan": plans | sagas,
    "json": hostile_json,
    "message": jsonrpc_messages(),
    "record-bytes": json_texts(RECORD),
    "participant-call": PARTICIPANT_CALLS,
    "gateway-call": GATEWAY_CALLS,
    "coordinator-call": COORDINATOR_CALLS,
    "tool-call": tool_calls(),
    # an organisation's files as `hatp init-org` writes them, mutated and bent (tests/fuzz/targets.py ORG_FILES)
    **{f"org:{name}": json_texts(doc) for name, doc in ORG_DOCS.items()},
}
