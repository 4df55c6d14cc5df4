"""check_anchors as it was before verify_record handed it the chain's digests (session 11): it digests every event
itself, and every piece of evidence whether or not an outside answer is given. Kept verbatim as the oracle the
current path is compared with (tests/core/txn/test_record_digests_once.py). Test code, no IO."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import CanonicalError, digest
from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn import anchors
from hatp_mcp.core.txn.anchors import Anchoring
from hatp_mcp.core.txn.problem import Problem

_EFFECTS = frozenset({"commit", "compensate"})


def _safe_digest(obj: Mapping[str, Any]) -> str | None:
    try:
        return digest(obj)
    except CanonicalError:
        return None


def old_check_anchors(
    events: Sequence[Any],
    plan: Plan,
    plan_digest: str,
    keyring: Keyring,
    outside: Sequence[Any] = (),
    *,
    closed: bool,
) -> Anchoring:
    _bad_head, _head, _inside, _describe = anchors._bad_head, anchors._head, anchors._inside, anchors._describe
    _outside_evidence = anchors._outside_evidence
    digests = [_safe_digest(e) if isinstance(e, Mapping) else None for e in events]
    problems: list[Problem] = []
    pinned: int | None = None  # by any head that holds
    inside = 0
    recorded: dict[str, int | None] = {}  # evidence digest -> the seq its head pins (None: no head, or it fails)
    for k, raw in enumerate(events):
        evidence = raw.get("evidence") if isinstance(raw, Mapping) else None
        if not isinstance(evidence, Mapping):
            continue
        found = _safe_digest(evidence)
        malformed = _bad_head(evidence)
        if malformed is not None:
            problems.append(Problem(k, "HATP-REC-20", f"{_describe(evidence)}: {malformed}"))
            continue
        head = _head(evidence)
        holds: int | None = None
        if head is not None:
            inside += 1
            problem = _inside(k, evidence, head, events, digests)
            if problem is not None:
                problems.append(problem)
            else:
                holds = head[0]
                pinned = max(pinned if pinned is not None else -1, holds)
        if found is not None and found not in recorded:
            recorded[found] = holds
    count = heads = beyond = unrecorded = 0
    outside_pinned: int | None = None  # by the heads of the outside answers alone
    parties: list[str] = []
    for j, item in enumerate(outside):
        where = f"outside[{j}]"
        if not isinstance(item, Mapping):
            problems.append(Problem(-1, "HATP-REC-21", f"{where} is not a signed vote or receipt"))
            continue
        refused = _outside_evidence(where, item, keyring, plan, plan_digest)
        if refused is not None:
            problems.append(refused)
            continue
        count += 1
        party = str(item.get("participant", item.get("voter")))
        if party not in parties:
            parties.append(party)
        head = _head(item)
        heads += head is not None
        own = _safe_digest(item)
        if own is not None and own in recorded:  # the record holds this very answer; its head was checked there
            held = recorded[own]
            if held is not None:
                outside_pinned = max(outside_pinned if outside_pinned is not None else -1, held)
            continue
        if head is not None:
            seq, value = head
            if seq >= len(events):
                if not closed:
                    beyond += 1
                    continue
                problems.append(
                    Problem(
                        -1,
                        "HATP-REC-21",
                        f"{where}: {_describe(item)} was signed at head {seq}, but this record ends at event "
                        f"{len(events) - 1}: the record was cut after the party answered",
                    )
                )
                continue
            if digests[seq] != value:
                problems.append(
                    Problem(
                        seq,
                        "HATP-REC-21",
                        f"{where}: {_describe(item)} was signed at head {seq} = {value}, but this record's event {seq} "
                        f"is {digests[seq]}: the chain was rewritten at or before it (a fork)",
                    )
                )
                continue
            outside_pinned = max(outside_pinned if outside_pinned is not None else -1, seq)
        if not closed:
            beyond += 1
            continue
        if not (item.get("type") == "hatp.receipt" and item.get("phase") in _EFFECTS):
            unrecorded += 1
            continue
        problems.append(
            Problem(
                -1,
                "HATP-REC-21",
                f"{where}: the record leaves out {_describe(item)}, signed at {item.get('issuedAt')}: the record was "
                "cut or dropped it, or the answer never reached the coordinator; either way it does not show what "
                "this party did",
            )
        )
    pinned_to = outside_pinned if count else pinned
    return Anchoring(tuple(problems), inside, count, heads, pinned_to, beyond, tuple(parties), unrecorded)
