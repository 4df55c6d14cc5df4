"""Record anchoring: checking a record against the heads other parties signed (spec/hatp.md HATP-REC-19..22).

A coordinator (or anyone holding its key) can cut a record and sign a shorter chain again; nothing inside that copy
shows it. What it cannot write is another party's signature. Every vote and receipt a participant signs names the
record head it answered at (`recordHead`: an event's seq and digest; a commit's is the `decision` event it carried
out), and a head pins the whole chain up to it. So a verifier holding the parties' own copies of their answers
(exported from their stores) sees a record that was cut or rewritten: a head past its end, a head whose event is
another, an answer the record leaves out.

`check_anchors` runs the head checks on the evidence inside the record (HATP-REC-20) and, given outside evidence,
checks each piece (signature, party, transaction, plan) against the record (HATP-REC-21); `Anchoring` says what
was actually checked, so a summary never calls a record anchored on nothing (HATP-REC-22). Pure: no IO.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from hatp_mcp.core.model.evidence import DIGEST_PATTERN
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.canonical import CanonicalError, digest
from hatp_mcp.core.signing.keys import Keyring, SignatureError, check_party, verify_object
from hatp_mcp.core.txn.problem import Problem
from hatp_mcp.errors import BrokenInvariant

__all__ = ["EXPORT_TYPE", "AnchorStatus", "Anchoring", "check_anchors", "event_digest", "off_record"]

EXPORT_TYPE = "hatp.evidence"  # the document `hatp evidence` writes: one party's own answers, outside evidence

# Which outside evidence can anchor: the kinds a participant signs, and the member naming the party it speaks for.
_KINDS = {"hatp.vote": ("voter", frozenset({"participant", "gateway"})), "hatp.receipt": ("participant", None)}
_RECEIPT_ROLES = frozenset({"participant"})
_MAX_SEQ = 1_000_000  # RecordEvent.seq's bound
_DIGEST = re.compile(DIGEST_PATTERN)
# The answers that report an effect made or refused: a closed record must hold every one a party exports.
_EFFECTS = frozenset({"commit", "compensate"})


class AnchorStatus(Enum):
    """What anchoring covered (HATP-REC-22). `NONE`: no party signed a head this record could be checked against;
    `INTERNAL`: heads inside the record agree with it, but no outside copy was given, so a shortened, re-signed
    record would still pass; `CHECKED`: outside evidence was given and checked against the record."""

    NONE = "none"
    INTERNAL = "internal"
    CHECKED = "checked"


@dataclass(frozen=True, slots=True)
class Anchoring:
    """What `check_anchors` found. `inside_heads`: heads carried by evidence in the record and checked;
    `outside`: outside pieces checked against the record; `outside_heads`: those that carry a head;
    `pinned_to`: the highest event index a head that holds pins (with outside evidence: one of the outside
    answers' heads, the parties' own word; None: no such head holds); `beyond`: outside pieces an
    open copy cannot settle (their head or their answer lies past its end); `unrecorded`: votes and receipts other
    than commit and compensate ones that the record does not hold, their heads holding (an answer can honestly be
    lost: a timed-out prepare); `parties`: who signed the outside ones."""

    problems: tuple[Problem, ...]
    inside_heads: int
    outside: int
    outside_heads: int
    pinned_to: int | None
    beyond: int
    parties: tuple[str, ...]
    unrecorded: int = 0

    @property
    def status(self) -> AnchorStatus:
        if self.outside > 0:
            return AnchorStatus.CHECKED
        return AnchorStatus.INTERNAL if self.inside_heads > 0 else AnchorStatus.NONE

    def summary(self) -> str:
        """One honest line: what the anchoring checked, and what it could not."""
        if self.status is AnchorStatus.NONE:
            return (
                "not anchored: no party signed a head of this record, so a shortened record signed again with the "
                "coordinator's key would pass (pass --evidence with the parties' own receipts to check)"
            )
        if self.status is AnchorStatus.INTERNAL:
            return (
                f"{self.inside_heads} head(s) the parties signed inside the record agree with it; not checked "
                "against the parties' own copies, so a shortened, re-signed record would pass (pass --evidence)"
            )
        pinned = (
            f"their heads pin events 0..{self.pinned_to}"
            if self.pinned_to is not None
            else "none of them carries a head, so only their presence was checked"
        )
        line = (
            f"{self.outside} outside answer(s) from {', '.join(self.parties)} checked against the record "
            f"({self.outside_heads} with a head): {pinned}"
        )
        if self.unrecorded:
            line += (
                f"; {self.unrecorded} vote(s) or receipt(s) are not in the record (lost or dropped answers that "
                "report no effect; their heads hold)"
            )
        if self.beyond:
            line += f"; {self.beyond} lie past the end of this open copy and were not settled"
        return line


def _head(evidence: Mapping[str, Any]) -> tuple[int, str] | None:
    """The (seq, digest) an evidence object's `recordHead` names; None without one. Call `_bad_head` first."""
    head = evidence.get("recordHead")
    if not isinstance(head, Mapping):
        return None
    return int(head["seq"]), str(head["digest"])


def _bad_head(evidence: Mapping[str, Any]) -> str | None:
    """Why the `recordHead` an evidence object carries is no head (a RecordHead's shape), or None. A head that
    cannot be checked is never taken for no head at all (fail closed)."""
    if "recordHead" not in evidence or evidence["recordHead"] is None:
        return None
    head = evidence["recordHead"]
    seq = head.get("seq") if isinstance(head, Mapping) else None
    value = head.get("digest") if isinstance(head, Mapping) else None
    if (
        not isinstance(head, Mapping)
        or set(head) != {"seq", "digest"}
        or not isinstance(seq, int)
        or isinstance(seq, bool)
        or not 0 <= seq <= _MAX_SEQ
        or not isinstance(value, str)
        or not _DIGEST.fullmatch(value)
    ):
        return f"recordHead {head!r} is not {{seq: 0..{_MAX_SEQ}, digest: sha256:<64 hex>}}"
    return None


def off_record(evidence: Mapping[str, Any], digest_at: Callable[[int], str | None]) -> str | None:
    """HATP-REC-20 as an answer arrives, before the record holds it: why the head `evidence` was signed at is not
    an event of the record whose digests `digest_at` gives (None past its end), or None when it is, or when the
    evidence names no head. A head of the wrong shape is refused, never taken for no head."""
    bad = _bad_head(evidence)
    if bad is not None:
        return f"HATP-REC-20: {bad}"
    head = _head(evidence)
    if head is None or digest_at(head[0]) == head[1]:
        return None
    return f"HATP-REC-20: {_describe(evidence)} was signed at head {head[0]} = {head[1]}, not an event of this record"


def _describe(evidence: Mapping[str, Any]) -> str:
    who = evidence.get("participant", evidence.get("voter"))
    if evidence.get("type") == "hatp.receipt":
        return f"{who}'s {evidence.get('phase')} receipt ({evidence.get('outcome')}) for {evidence.get('branchId')}"
    return f"{who}'s vote ({evidence.get('decision')}) for {evidence.get('branchId')}"


def _safe_digest(obj: Mapping[str, Any]) -> str | None:
    try:
        return digest(obj)
    except CanonicalError:
        return None


def event_digest(event: object) -> str | None:
    """What the head checks take for an event's digest: its digest, or None when it is no JSON object or has no
    canonical form (no head can name it then)."""
    return _safe_digest(event) if isinstance(event, Mapping) else None


def check_anchors(
    events: Sequence[Any],
    plan: Plan,
    plan_digest: str,
    keyring: Keyring,
    outside: Sequence[Any] = (),
    *,
    closed: bool,
    digests: Sequence[str | None] | None = None,
) -> Anchoring:
    """Check the heads signed inside the record (HATP-REC-20) and the outside evidence (HATP-REC-21).

    `events`: the record's events as received; `outside`: votes and receipts the parties kept, as they signed
    them; `closed`: the record ends in record.closed (an open copy may simply be older than an outside answer);
    `digests`: `event_digest` of each event, when the caller computed them already (verify_record's chain check
    does), else computed here. Raises ValueError when `digests` does not have one per event."""
    if digests is None:
        digests = [event_digest(e) for e in events]
    elif len(digests) != len(events):
        raise ValueError(f"{len(digests)} digests for {len(events)} events")
    problems: list[Problem] = []
    pinned: int | None = None  # by any head that holds
    inside = 0
    recorded: dict[str, int | None] = {}  # evidence digest -> the seq its head pins (None: no head, or it fails)
    for k, raw in enumerate(events):
        evidence = raw.get("evidence") if isinstance(raw, Mapping) else None
        if not isinstance(evidence, Mapping):
            continue
        # its digest only matters to match an outside answer against it: with none given, it is never looked at
        found = _safe_digest(evidence) if outside else None
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


def _inside(
    k: int, evidence: Mapping[str, Any], head: tuple[int, str], events: Sequence[Any], digests: Sequence[str | None]
) -> Problem | None:
    """HATP-REC-20 for the evidence at event `k`: its head lies before it and is this record's event."""
    seq, value = head
    what = _describe(evidence)
    if seq >= k:
        return Problem(
            k,
            "HATP-REC-20",
            f"{what} was signed at head {seq}, but the record puts it at event {k}, before that head: "
            "events were reordered",
        )
    if digests[seq] != value:
        return Problem(
            k,
            "HATP-REC-20",
            f"{what} was signed at head {seq} = {value}, but this record's event {seq} is {digests[seq]}: "
            "the chain was rewritten before the party answered (a fork)",
        )
    if evidence.get("type") == "hatp.receipt" and evidence.get("phase") == "commit":
        event = events[seq]
        body = event.get("body") if isinstance(event, Mapping) else None
        if not (
            isinstance(event, Mapping)
            and event.get("event") == "decision"
            and isinstance(body, Mapping)
            and body.get("decision") == "commit"
        ):
            return Problem(
                k,
                "HATP-REC-20",
                f"{what} is anchored at event {seq}, which is not the commit decision a commit carries out",
            )
    return None


def _outside_evidence(
    where: str, item: Mapping[str, Any], keyring: Keyring, plan: Plan, plan_digest: str
) -> Problem | None:
    """HATP-REC-21: an outside piece counts only as a party's own signed vote or receipt about this plan."""
    kind = item.get("type")
    if kind not in _KINDS:
        return Problem(-1, "HATP-REC-21", f"{where} is a {kind!r}, not a party's signed vote or receipt")
    field, roles = _KINDS[str(kind)]
    party = item.get(field)
    bad = _bad_head(item)
    if bad is not None:
        return Problem(-1, "HATP-REC-21", f"{where}: {bad}")
    try:
        kid = verify_object(item, keyring, None, where)
        entry = keyring.get(kid)
        if entry is None:
            raise BrokenInvariant(f"verify_object found key {kid} and the keyring no longer has it")
        allowed = roles if roles is not None else _RECEIPT_ROLES
        if not allowed.intersection(entry.roles):
            raise SignatureError("HATP-SIG-5", f"key {kid!r} may sign as {list(entry.roles)}, not a {kind}", path=where)
        check_party(entry, party, f"{where}.{field}", required=True)
    except SignatureError as exc:
        return Problem(-1, "HATP-REC-21", f"{where}: {exc.rule}: {exc.reason}")
    if item.get("txnId") != plan.txn_id:
        return Problem(
            -1, "HATP-REC-21", f"{where} is about transaction {item.get('txnId')!r}, not this record's {plan.txn_id!r}"
        )
    if item.get("planDigest") != plan_digest:
        return Problem(
            -1,
            "HATP-REC-21",
            f"{where}: {_describe(item)} names plan {item.get('planDigest')}, not this record's {plan_digest}: "
            "the party was shown another record for this transaction (a fork)",
        )
    if party not in {b.participant for b in plan.branches} and kind == "hatp.receipt":
        return Problem(-1, "HATP-REC-21", f"{where}: {party!r} is no participant of this plan")
    return None
