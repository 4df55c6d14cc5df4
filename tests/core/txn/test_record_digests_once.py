"""verify_record digests each event once and hands the digests to the anchors' head checks, which digest a piece
of evidence only to match an outside answer against it: the same problems in the same order, and the same
Anchoring, as the old path (check_anchors digesting every event and every piece of evidence itself, kept verbatim
in tests/core/txn/anchors_oracle.py), over real records with heads, tampered every way the record tests tamper."""

from __future__ import annotations

import copy
import functools
from types import MappingProxyType
from typing import Any
from unittest import mock

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from demo.trip_world import World, build_world, trip_plan
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import digest
from hatp_mcp.core.signing.keys import sign_object
from hatp_mcp.core.txn import record as record_module
from hatp_mcp.core.txn.anchors import check_anchors, event_digest
from hatp_mcp.core.txn.record import CLOSE_EVENT, check_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.participant.driver import kept_evidence
from tests.core.txn.anchors_oracle import old_check_anchors
from tests.records import rechain
from tests.txn_helpers import drive

TXN = "txn-digests-once-1"


@functools.cache
def _committed() -> tuple[World, dict[str, Any], list[dict[str, Any]]]:
    """The committed trip run by the coordinator runtime (its participants sign heads), once per test session."""

    async def run() -> tuple[World, dict[str, Any], list[dict[str, Any]]]:
        clock = FakeClock()
        world = build_world(clock)
        result = await drive(clock, lambda: world.coordinator().run(trip_plan(clock.now(), TXN)))
        outside = [item for p in world.participants.values() for item in kept_evidence(p.store, TXN)]
        return world, result.record, outside

    return anyio.run(run)


def _old_check_record(record: dict[str, Any], world: World, outside: list[Any], require_closed: bool) -> Any:
    """check_record on the old path: the anchors computed by the oracle, which ignores the chain's digests."""

    def old(*args: Any, digests: Any = None, **kwargs: Any) -> Any:
        return old_check_anchors(*args, **kwargs)

    with mock.patch.object(record_module, "check_anchors", old):
        return check_record(record, world.keyring, require_closed=require_closed, evidence=outside)


def _party_key(world: World, party: str) -> Any:
    return world.keys[party.split("//")[1].split(".")[0]]


_OPS = st.sampled_from(
    ["drop", "swap", "edit", "float", "junk", "proxy", "head_seq", "head_digest", "resigned_head", "cut_close"]
)


@st.composite
def _tampered(draw: st.DrawFn) -> tuple[dict[str, Any], list[Any], bool]:
    world, base, kept = _committed()
    record = copy.deepcopy(base)
    events: list[Any] = record["events"]
    for op in draw(st.lists(_OPS, max_size=3)):
        n = len(events)
        if n < 2:
            break
        k = draw(st.integers(0, n - 1))
        ev = events[k]
        evidence = ev.get("evidence") if isinstance(ev, dict) else None
        if op == "drop":
            del events[k]
        elif op == "swap":
            j = draw(st.integers(0, n - 1))
            events[k], events[j] = events[j], events[k]
        elif op == "edit" and isinstance(ev, dict):
            ev["body"] = {**ev["body"], "note": draw(st.text(max_size=3))}
        elif op == "float" and isinstance(ev, dict):
            ev["body"] = {**ev["body"], "amount": 1.5}  # no canonical form: no digest
        elif op == "junk":
            events[k] = draw(st.sampled_from(["junk", [1, 2], None, 7]))
        elif op == "proxy" and isinstance(ev, dict):
            events[k] = MappingProxyType(ev)  # a Mapping that is no dict: the anchors still digest it
        elif op in ("head_seq", "head_digest") and isinstance(evidence, dict) and "recordHead" in evidence:
            head = dict(evidence["recordHead"])
            if op == "head_seq":
                head["seq"] = draw(st.integers(0, n + 2))
            else:
                other = events[draw(st.integers(0, n - 1))]
                head["digest"] = event_digest(other) or head["digest"]
            evidence["recordHead"] = head  # the party's signature now fails too
        elif op == "resigned_head" and isinstance(evidence, dict) and "recordHead" in evidence:
            seq = draw(st.integers(0, n + 2))
            party = str(evidence.get("participant", evidence.get("voter")))
            body = {a: b for a, b in evidence.items() if a != "signature"}
            head = {"seq": seq, "digest": evidence["recordHead"]["digest"]}
            ev["evidence"] = sign_object({**body, "recordHead": head}, _party_key(world, party))
        elif op == "cut_close" and isinstance(events[-1], dict) and events[-1].get("event") == CLOSE_EVENT:
            del events[-1]
    chainable = (
        events
        and all(isinstance(e, dict) and event_digest(e) is not None for e in events)
        and all(e.get("event") != CLOSE_EVENT for e in events[:-1])  # a chain takes nothing after its close
    )
    if draw(st.booleans()) and chainable and events[0].get("event") == "txn.begin":
        record = rechain(record, events, world.keys["coordinator"])  # a forger holding the coordinator's key
    outside: list[Any] = list(kept)
    mode = draw(st.sampled_from(["none", "all", "some", "bent"]))
    if mode == "none":
        outside = []
    elif mode == "some":
        outside = draw(st.lists(st.sampled_from(kept), max_size=6))
    elif mode == "bent":
        j = draw(st.integers(0, len(kept) - 1))
        item = kept[j]
        party = str(item.get("participant", item.get("voter")))
        body = {a: b for a, b in item.items() if a != "signature"}
        head = {"seq": draw(st.integers(0, 40)), "digest": digest({"n": draw(st.integers(0, 3))})}
        outside = [*kept[:j], sign_object({**body, "recordHead": head}, _party_key(world, party)), *kept[j + 1 :]]
    return record, outside, draw(st.booleans())


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tampered())
def test_check_record_finds_what_the_old_path_finds(case: tuple[dict[str, Any], list[Any], bool]) -> None:
    record, outside, require_closed = case
    world = _committed()[0]
    new = check_record(record, world.keyring, require_closed=require_closed, evidence=outside)
    old = _old_check_record(record, world, outside, require_closed)
    assert new == old  # every problem (rule, index, reason) in the same order, the same Anchoring, outcome, grounds


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_tampered())
def test_check_anchors_with_the_chains_digests_or_its_own_is_the_old_check(
    case: tuple[dict[str, Any], list[Any], bool],
) -> None:
    record, outside, _ = case
    world = _committed()[0]
    events = record["events"]
    if not events:
        return
    plan = Plan.model_validate(record["plan"])
    closed = isinstance(events[-1], dict) and events[-1].get("event") == CLOSE_EVENT
    old = old_check_anchors(events, plan, plan.digest(), world.keyring, outside, closed=closed)
    own = check_anchors(events, plan, plan.digest(), world.keyring, outside, closed=closed)
    given_digests = check_anchors(
        events, plan, plan.digest(), world.keyring, outside, closed=closed, digests=[event_digest(e) for e in events]
    )
    assert own == old and given_digests == old


def test_the_planted_tampering_is_caught_the_same_way_on_both_paths() -> None:
    """Not vacuous: the cases above include refusals of every anchoring kind (a fork inside, one outside)."""
    world, base, kept = _committed()
    record = copy.deepcopy(base)
    record["events"][3]["body"] = {**record["events"][3]["body"], "note": "rewritten"}
    forged = rechain(record, record["events"], world.keys["coordinator"])
    new = check_record(forged, world.keyring, evidence=kept)
    assert new == _old_check_record(forged, world, kept, True)
    assert "HATP-REC-20" in {p.rule for p in new.problems}  # the heads inside name the real event 3: a fork
    events = [e for e in base["events"] if e.get("evidence", {}).get("phase") != "commit"]  # commit receipts cut
    cut = rechain(base, events, world.keys["coordinator"])
    new = check_record(cut, world.keyring, evidence=kept)
    assert new == _old_check_record(cut, world, kept, True)
    assert "HATP-REC-21" in {p.rule for p in new.problems}  # the parties' own commit receipts are left out


def test_digests_that_do_not_match_the_events_are_refused() -> None:
    _, record, _ = _committed()
    plan = Plan.model_validate(record["plan"])
    with pytest.raises(ValueError, match="digests for"):
        check_anchors(record["events"], plan, plan.digest(), _committed()[0].keyring, closed=True, digests=[None])
