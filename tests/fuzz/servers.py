"""Fuzz targets that go through a real MCP server: every hatp/* method of a participant, of the gateway and of the
coordinator with hostile params, and every agent tool they offer with hostile arguments.

Each server runs in memory behind the official SDK's client (no transport of our own), held open across inputs in
a portal thread, and is started on first use. The contract: every request gets an answer; a refusal is a JSON-RPC
error whose data names a HATP-* rule and whose message says why (never -32603, never a bare code), and a refused
tool call is a tool result with isError whose text names the rule. Params that still name a transaction are signed
by a coordinator the servers trust (sometimes), so hostile values get past the proof into the protocol's own
checks.
"""

from __future__ import annotations

import atexit
import contextlib
import copy
import random
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
from anyio.from_thread import BlockingPortal, start_blocking_portal
from hypothesis import strategies as st
from mcp import Client
from mcp.server import MCPServer

from demo.trip_world import build_world, trip_plan
from hatp_mcp.conformance.exchange import Answer, exchange
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.messages import AbortRequest, PrepareRequest, StatusRequest
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.txn_auth import AUTH_METHODS
from hatp_mcp.core.participant.coordinator_auth import authorize
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.coordinator_server import COORDINATOR_METHODS, serve_coordinator
from hatp_mcp.mcp.extension import HatpSettings
from hatp_mcp.mcp.gateway_server import APPROVER_METHODS
from hatp_mcp.mcp.hatp_server import HatpServer
from hatp_mcp.mcp.participant_server import LOCK_METHODS, PARTICIPANT_METHODS
from hatp_mcp.runtime.clock import FakeClock, SystemClock
from hatp_mcp.runtime.coordinator.service import TxnService
from hatp_mcp.runtime.coordinator_trust import trust_coordinator
from servers import airline
from servers._participant import build as build_participant
from servers.gateway import DEFAULT_ORG
from servers.gateway import build as build_gateway
from tests.fuzz.strategies import hostile_json, mutated

__all__ = ["Crash", "gateway_method", "method_calls", "participant_method", "tool", "tool_calls"]

COORDINATOR = "coordinator://fuzz.example"
AIRLINE = "mcp://airline.example/hatp"
ANSWER_SECONDS = 15.0


class Crash(AssertionError):
    """A server broke its contract: no answer, an internal error, or a refusal without a rule."""


@dataclass
class _Served:
    portal: BlockingPortal
    client: Client
    tools: dict[str, dict[str, Any]]  # name -> input schema


_SCRATCH = Path(tempfile.mkdtemp(prefix="hatp-fuzz-servers-"))
_STACK = contextlib.ExitStack()
atexit.register(_STACK.close)
_SERVED: dict[str, _Served] = {}
_KEY: list[SigningKey] = []
_COORDINATOR: list[TxnService] = []


def _key() -> SigningKey:
    if not _KEY:
        _KEY.append(trust_coordinator(_SCRATCH / "coordinator", COORDINATOR, [_SCRATCH / "airline", _SCRATCH / "gw"]))
    return _KEY[0]


def _make(name: str) -> MCPServer:
    _key()
    if name == "coordinator":  # the trip world in process: its participants and a scripted approver
        world = build_world(FakeClock(datetime.now(UTC)))
        svc = TxnService(
            key=world.keys["coordinator"],
            keyring=world.keyring,
            participants=world.participants,
            approver=world.approver,
            log=world.log,
            clock=world.clock,
        )
        server = HatpServer("hatp-coordinator-fuzz", log_level="WARNING")
        settings = HatpSettings(roles=["coordinator"], keys=[world.keys["coordinator"].public_jwk()])
        serve_coordinator(server, svc, settings)
        _COORDINATOR.append(svc)
        return server
    if name == "participant":
        server, _runtime, inventory = build_participant(
            airline.SPEC, _SCRATCH / "airline", demo_tools=True, serve_locks=True
        )
        _STACK.callback(inventory.close)
        return server
    server, _gateway, _deliverer = build_gateway(_SCRATCH / "gw", DEFAULT_ORG, SystemClock())
    return server


def _served(name: str) -> _Served:
    if name not in _SERVED:
        with _random_kept():
            _SERVED[name] = _start(name)
    return _SERVED[name]


@contextlib.contextmanager
def _random_kept() -> Iterator[None]:
    """Starting a server (key generation, ids) must not move the random state Hypothesis draws with: the first
    input is drawn while the servers start."""
    state = random.getstate()
    try:
        yield
    finally:
        random.setstate(state)


def _start(name: str) -> _Served:
    portal = _STACK.enter_context(start_blocking_portal())
    server = _make(name)
    for svc in _COORDINATOR:  # the coordinator's service runs while its server does
        _STACK.enter_context(portal.wrap_async_context_manager(svc.running()))
    _COORDINATOR.clear()
    client = _STACK.enter_context(portal.wrap_async_context_manager(Client(server)))
    listed = portal.call(client.list_tools)
    return _Served(portal, client, {t.name: dict(t.input_schema) for t in listed.tools})


def _plan(txn_id: str) -> Plan:
    now = datetime.now(UTC).replace(microsecond=0)
    return Plan.model_validate(
        {
            "hatp": "1",
            "txnId": txn_id,
            "createdAt": format_ts(now),
            "requester": {"principal": "human://acme.com/dana", "agent": "agent://acme.com/travel-bot"},
            "summary": "fuzz",
            "deadlines": {"decideBy": format_ts(now + timedelta(hours=1))},
            "approvals": [
                {
                    "id": "finance",
                    "address": "human://acme.com/role/finance-approver",
                    "action": "approve-spend",
                    "maxAmount": {"value": "1000.00", "currency": "USD"},
                }
            ],
            "branches": [
                {
                    "branchId": "flight",
                    "participant": AIRLINE,
                    "operation": "seat.hold",
                    "tier": "hold",
                    "args": {"resource": "LH123/2026-12-10/14C"},
                    "amount": {"value": "412.50", "currency": "USD"},
                    "maxDurationSeconds": 30,
                    "leaseSeconds": 120,
                    "holdHorizonSeconds": 600,
                }
            ],
        }
    )


def _bases(methods: tuple[str, ...], branch: str) -> dict[str, dict[str, Any]]:
    """A well-formed params object for each method (the hostile ones are edits of these)."""
    plan = _plan("txn-fuzz-base-01")
    prepare = PrepareRequest(
        txn_id=plan.txn_id, branch_id=branch, plan_digest=plan.digest(), plan=plan, coordinator=COORDINATOR
    ).wire()
    ident = {"txnId": plan.txn_id, "branchId": branch, "planDigest": plan.digest()}
    abort = AbortRequest(txn_id=plan.txn_id, branch_id=branch, plan_digest=plan.digest(), reason="fuzz").wire()
    status = StatusRequest(txn_id=plan.txn_id, branch_id=branch).wire()
    known = {
        "prepare": prepare,
        "quote": {**prepare, "quoteOnly": True},
        "abort": abort,
        "status": status,
        "voted": {**status, "waitSeconds": 0},
        "commit": {**ident, "preconditions": {}, "voteDigest": "sha256:" + "0" * 64, "decision": {}},
        "compensate": {**ident, "undoToken": "tok", "reason": "fuzz"},
        "renew": {**ident, "leaseSeconds": 60},
        "estimate": {"txnId": plan.txn_id, "requirementId": branch, "planDigest": plan.digest(), "plan": plan.wire()},
        "tighten": {
            "txnId": plan.txn_id,
            "requirementId": branch,
            "planDigest": plan.digest(),
            "decideBy": format_ts(datetime.now(UTC) + timedelta(minutes=30)),
        },
        "acquire": {"resource": "LH123/2026-12-10/1A", "owner": "fuzz", "leaseSeconds": 60},
    }
    return {m: known.get(m.rsplit("/", 1)[-1], ident) for m in methods}


def _no_waits(value: Any) -> Any:
    """Every wait in a hostile value set to 0: a long poll answers at its deadline, which is not a finding."""
    if isinstance(value, dict):
        return {k: 0 if "wait" in k.lower() else _no_waits(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_waits(v) for v in value]
    return value


def method_calls(
    methods: tuple[str, ...], branch: str, bases: dict[str, dict[str, Any]] | None = None
) -> st.SearchStrategy[tuple[str, Any, bool]]:
    """(method, params, sign?) where params are a well-formed object (`bases`, else made here), an edit of it,
    or hostile JSON."""

    def of(method: str) -> st.SearchStrategy[tuple[str, Any, bool]]:
        base = (bases or _bases(methods, branch))[method]
        params = st.just(base) | mutated(base) | st.dictionaries(st.text(max_size=10), hostile_json, max_size=4)
        return st.tuples(st.just(method), params, st.booleans())

    return st.sampled_from(methods).flatmap(of)


def _answered(method: str, params: Any, sign: bool, served: _Served) -> str:
    body = _no_waits(params if isinstance(params, dict) else {"params": params})
    if sign and method.rsplit("/", 1)[-1] in AUTH_METHODS:
        with contextlib.suppress(ValueError, HatpError):  # params that name no transaction go unsigned
            body = authorize(method.rsplit("/", 1)[-1], body, _key(), COORDINATOR, datetime.now(UTC))
    got: Answer = served.portal.call(exchange, served.client, method, copy.deepcopy(body), ANSWER_SECONDS)
    if got.lost is not None:
        raise Crash(f"{method}: {got.describe()}")
    if got.result is not None:
        return "accepted"
    rule = got.error_data.get("rule")
    if got.code == -32603 or not (isinstance(rule, str) and rule.startswith("HATP-")):
        raise Crash(f"{method}: unlabelled refusal {got.describe()}")
    if not got.message or " " not in got.message:
        raise Crash(f"{method}: the message is only a code: {got.describe()}")
    return "refused"


def participant_method(call: tuple[str, Any, bool]) -> str:
    return _answered(*call, _served("participant"))


def gateway_method(call: tuple[str, Any, bool]) -> str:
    return _answered(*call, _served("gateway"))


def coordinator_method(call: tuple[str, Any, bool]) -> str:
    return _answered(*call, _served("coordinator"))


@st.composite
def _tool_call(draw: st.DrawFn) -> tuple[str, str, dict[str, Any]]:
    server = draw(st.sampled_from(["participant", "gateway", "coordinator"]))
    tools = _served(server).tools
    name = draw(st.sampled_from(sorted(tools)))
    props = list((tools[name].get("properties") or {}).keys())
    keys = st.sampled_from(props) | st.text(max_size=8) if props else st.text(max_size=8)
    args = draw(st.dictionaries(keys, hostile_json, max_size=len(props) + 1))
    return server, name, args


def tool_calls() -> st.SearchStrategy[tuple[str, str, dict[str, Any]]]:
    """(server, tool, arguments): the tool's own parameter names (and others) holding hostile JSON."""
    return st.deferred(_tool_call)  # the servers start when the first input is drawn, not at import


async def _call_tool(client: Client, name: str, args: dict[str, Any]) -> Any:
    with anyio.fail_after(ANSWER_SECONDS):
        return await client.call_tool(name, args)


def tool(call: tuple[str, str, dict[str, Any]]) -> str:
    server, name, args = call
    served = _served(server)
    try:
        result = served.portal.call(_call_tool, served.client, name, _no_waits(args))
    except TimeoutError as exc:
        raise Crash(f"{server} tool {name}: no answer in {ANSWER_SECONDS}s") from exc
    if not result.is_error:
        return "accepted"
    text = " ".join(getattr(c, "text", "") for c in result.content)
    if "Traceback" in text or "HATP-" not in text:
        raise Crash(f"{server} tool {name}: a refusal without a rule: {text[:300]!r}")
    return "refused"


PARTICIPANT_CALLS = method_calls((*PARTICIPANT_METHODS, "hatp/txn/estimate", *LOCK_METHODS), "flight")
GATEWAY_CALLS = method_calls(APPROVER_METHODS, "finance")
COORDINATOR_CALLS = method_calls(
    COORDINATOR_METHODS,
    "",
    {
        "hatp/txn/begin": trip_plan(datetime.now(UTC), "txn-fuzz-begin-01").wire(),
        "hatp/txn/status": {"txnId": "txn-fuzz-begin-01", "waitSeconds": 0},
        "hatp/txn/abort": {"txnId": "txn-fuzz-begin-01", "reason": "fuzz"},
    },
)
