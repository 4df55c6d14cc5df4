"""The hash-chained Transaction Record: appending events, and verifying a record offline.

Each event names its sequence number, the digest of the previous event (signature included), the transaction,
the plan digest, its author and the time, and is signed by the coordinator that chains it. Evidence from other
parties (votes, receipts, approvals) rides inside events exactly as received, with its own signature.

A record is closed by a coordinator-signed `record.closed` event stating the outcome and the event count: that
event anchors the head. What offline verification can and cannot detect is written in spec/hatp.md (HATP-REC-6).
Pure: no IO, no clock (callers pass times).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import Any

from pydantic import ValidationError

from hatp_mcp.core.gateway.proof import HumanKeys, check_decision_proofs
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.evidence import DIGEST_PATTERN, Approval, RecordHead
from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.model.record import CLOSE_EVENT, RecordEvent, TransactionRecord
from hatp_mcp.core.model.wire import error_path
from hatp_mcp.core.signing.canonical import CanonicalError, canonical, digest, digest_bytes
from hatp_mcp.core.signing.keys import (
    ALG,
    Keyring,
    PublicKeyEntry,
    SignatureError,
    SigningKey,
    b64u_decode,
    check_party,
    signing_bytes,
    verify_object,
)
from hatp_mcp.core.txn.anchors import Anchoring, check_anchors, event_digest
from hatp_mcp.core.txn.outcome import justify
from hatp_mcp.core.txn.problem import Problem
from hatp_mcp.errors import HatpError

__all__ = [
    "BEGIN_EVENT",
    "EVIDENCE_ROLES",
    "Problem",
    "RecordChain",
    "Verified",
    "check_record",
    "signatures_ahead",
    "verify_record",
]

BEGIN_EVENT = "txn.begin"
_DIGEST = re.compile(DIGEST_PATTERN)
_B64U = re.compile(r"[A-Za-z0-9_-]*")
_MAX_HEAD_SEQ = 1_000_000  # RecordHead.seq's upper bound (core/model/evidence.py)
# Which keyring roles may sign each kind of evidence carried in an event.
EVIDENCE_ROLES: dict[str, frozenset[str]] = {
    "hatp.vote": frozenset({"participant", "gateway"}),
    "hatp.receipt": frozenset({"participant"}),
    "hatp.approval": frozenset({"gateway"}),
}
# The member naming the party each kind of evidence speaks for (HATP-SIG-6: a bound key signs only as its party).
_SPEAKS_FOR = {"hatp.vote": "voter", "hatp.receipt": "participant", "hatp.approval": "gateway"}


class RecordChain:
    """Appends coordinator-signed events to one transaction's chain. Holds wire dicts, never re-serializes."""

    def __init__(
        self,
        plan: Plan,
        key: SigningKey,
        author: str,
        events: Sequence[Mapping[str, Any]] = (),
        plan_digest: str | None = None,
    ) -> None:
        """`plan_digest`: the plan's digest when the caller already has it (the coordinator does), else computed.
        Raises ValueError when it is not a digest; a wrong one is the caller's bug and fails verify_record."""
        if plan_digest is not None and not _DIGEST.fullmatch(plan_digest):
            raise ValueError(f"plan_digest {plan_digest!r} is not a sha256:<64 hex> digest")
        self.plan = plan
        self.plan_digest = plan_digest if plan_digest is not None else plan.digest()
        self._key = key
        self._author = author
        self._events: list[dict[str, Any]] = [dict(e) for e in events]
        self._head: str | None = digest(self._events[-1]) if self._events else None
        self._head_at: RecordHead | None = None  # head_at, built once per head
        # An event's members after "signature" in RFC 8785's order are txnId and type, both strings this chain
        # fixes: they close every event's canonical form, so the signed form is the unsigned one with the
        # signature member put in before them (see _signed_bytes).
        self._tail = b',"txnId":' + canonical(plan.txn_id) + b',"type":"hatp.event"}'
        self._sig_prefix = b'{"alg":"' + ALG.encode() + b'","kid":' + canonical(key.kid) + b',"sig":"'
        self._at: str | None = None  # the last `at` append checked (a batch of events shares one)

    @property
    def events(self) -> list[dict[str, Any]]:
        return list(self._events)

    @property
    def head(self) -> str | None:
        return self._head

    def digest_at(self, seq: int) -> str | None:
        """The digest of event `seq`, as the event after it chains it (HATP-REC-2); None when there is none."""
        if not 0 <= seq < len(self._events):
            return None
        if seq == len(self._events) - 1:
            return self._head
        prev: str | None = self._events[seq + 1].get("prev")
        return prev

    @property
    def head_at(self) -> RecordHead | None:
        """The head as a party signs it (HATP-REC-19): the last event's seq and digest; None before the first."""
        if self._head is None:
            return None
        seq = len(self._events) - 1
        if self._head_at is None or self._head_at.seq != seq:  # frozen: one per head serves every send
            self._head_at = _head(seq, self._head)
        return self._head_at

    @property
    def closed(self) -> bool:
        return bool(self._events) and self._events[-1].get("event") == CLOSE_EVENT

    def append(
        self,
        event: str,
        at: str,
        body: Mapping[str, Any] | None = None,
        evidence: Mapping[str, Any] | None = None,
        author: str | None = None,
    ) -> dict[str, Any]:
        """Append and return the signed event. Raises ValueError after close or on a bad event.

        Everything else in the event is built here from the plan and the chain itself, so only what the caller
        passes is checked (what RecordEvent would refuse): the event name, the author, the timestamp, and body and
        evidence being JSON objects; a value that is not JSON fails canonicalization when signed (CanonicalError)."""
        if self.closed:
            raise ValueError("the record is closed; nothing may follow record.closed")
        if not self._events and event != BEGIN_EVENT:
            raise ValueError(f"the first event must be {BEGIN_EVENT!r}")
        who = author or self._author
        _check_append(event, who, at if at != self._at else None, body, evidence)
        self._at = at
        raw: dict[str, Any] = {
            "type": "hatp.event",
            "txnId": self.plan.txn_id,
            "seq": len(self._events),
            "planDigest": self.plan_digest,
            "event": event,
            "author": who,
            "at": at,
            "body": dict(body or {}),
        }
        if self._head is not None:
            raw["prev"] = self._head
        if evidence is not None:
            raw["evidence"] = dict(evidence)
        unsigned = canonical(raw)  # what the signature covers (sign_object's bytes: raw has no signature member)
        sig = self._key.sign(unsigned)
        signed = {**raw, "signature": {"alg": ALG, "kid": self._key.kid, "sig": sig}}
        self._events.append(signed)
        self._head = digest_bytes(self._signed_bytes(unsigned, sig, signed))
        return signed

    def _signed_bytes(self, unsigned: bytes, sig: str, signed: Mapping[str, Any]) -> bytes:
        """canonical(signed), from the unsigned bytes: one canonicalization serves the signature and the chain's
        digest. Exact by construction: the canonical form ends with the txnId and type members (the tail, fixed
        per chain), and the signature member, `{"alg","kid","sig"}` with `sig` base64url (nothing to escape),
        goes right before them. Anything else is canonicalized whole (tests hold the two equal)."""
        if unsigned.endswith(self._tail) and _B64U.fullmatch(sig):
            cut = len(unsigned) - len(self._tail)
            return b"".join((unsigned[:cut], b',"signature":', self._sig_prefix, sig.encode(), b'"}', self._tail))
        return canonical(signed)

    def close(self, at: str, outcome: str, body: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Append `record.closed` stating the outcome and how many events precede it."""
        return self.append(CLOSE_EVENT, at, {**(body or {}), "outcome": outcome, "eventCount": len(self._events)})

    def record(self) -> dict[str, Any]:
        """The whole record as a JSON object (`TransactionRecord`'s wire form)."""
        return {
            "type": "hatp.record",
            "txnId": self.plan.txn_id,
            "planDigest": self.plan_digest,
            "plan": self.plan.wire(),
            "events": self.events,
        }


def _head(seq: int, event_digest: str) -> RecordHead:
    """RecordHead(seq=seq, event_digest=event_digest) without a validation where none can fail: the digest is
    the chain's own (digest_bytes or digest output, always `sha256:<64 hex>`), and a seq inside the model's
    bounds is built directly; outside them the model validates, and raises exactly as before."""
    if type(seq) is int and 0 <= seq <= _MAX_HEAD_SEQ and _DIGEST.fullmatch(event_digest):
        return RecordHead.model_construct(seq=seq, event_digest=event_digest)
    return RecordHead(seq=seq, event_digest=event_digest)


def _check_append(event: object, author: object, at: object, body: object, evidence: object) -> None:
    """What RecordEvent refuses among append's arguments, checked without building a model; `at` None: the same
    timestamp as the append before, already checked. Raises ValueError."""
    if not isinstance(event, str) or not 1 <= len(event) <= 64:
        raise ValueError(f"event name {event!r} must be a string of 1 to 64 characters")
    if not isinstance(author, str) or not 1 <= len(author) <= 500:
        raise ValueError(f"author {author!r} must be a string of 1 to 500 characters")
    if at is not None:
        if not isinstance(at, str):
            raise ValueError(f"at {at!r} must be a wire timestamp like 2026-11-29T10:00:00Z")
        parse_ts(at)  # raises ValueError naming the value
    for name, value in (("body", body), ("evidence", evidence)):
        if value is not None and not (
            (type(value) is dict or isinstance(value, Mapping)) and all(map(isinstance, value, repeat(str)))
        ):
            raise ValueError(f"{name} must be a JSON object (string keys), not {type(value).__name__}")


@dataclass(frozen=True, slots=True)
class Verified:
    """What `check_record` found: every problem, and what was actually checked (so a summary never claims a
    check that checked nothing). `outcome` is None for a record that is not closed (its outcome is not checked);
    `grounds` are the sentences that justify the outcome (HATP-REC-10..16); `human_decisions` counts the human
    decisions inside the record's approvals (their proofs are checked only with `humans`); `anchoring` what the
    head checks covered (HATP-REC-19..22; None when the record could not be read far enough to check any)."""

    problems: tuple[Problem, ...]
    outcome: str | None
    grounds: tuple[str, ...]
    human_decisions: int
    anchoring: Anchoring | None = None


def verify_record(
    record: Mapping[str, Any],
    keyring: Keyring,
    *,
    require_closed: bool = True,
    humans: HumanKeys | None = None,
    evidence: Sequence[Any] = (),
) -> list[Problem]:
    """Check a record offline; return every problem found (empty: it holds). See `check_record`."""
    found = check_record(record, keyring, require_closed=require_closed, humans=humans, evidence=evidence)
    return list(found.problems)


def check_record(
    record: Mapping[str, Any],
    keyring: Keyring,
    *,
    require_closed: bool = True,
    humans: HumanKeys | None = None,
    evidence: Sequence[Any] = (),
) -> Verified:
    """Check a record offline: every problem found, and what the checks covered.

    Checks the plan digest, each event's shape, sequence, chain link, transaction, plan digest, time order and
    coordinator signature, each piece of evidence's signature, role, digest and (for a key bound to a party) that it
    names that party (HATP-SIG-6), that the record is closed, and that the closed record's outcome is justified by
    the evidence in it (HATP-REC-10..16, hatp_mcp.core.txn.outcome).
    With `humans` (the keys on the organisation's Directory-signed cards) it also checks that every human decision
    inside an approval carries that person's own valid proof (HATP-GW-19..27); without it those are not checked.
    Every head a party signed inside the record is checked against it (HATP-REC-20), and `evidence` (votes and
    receipts the parties kept themselves) against the record too (HATP-REC-21): a record cut or rewritten before
    an answer a party signed is caught only that way.
    """
    problems: list[Problem] = []
    if record.get("type") != "hatp.record":
        problems.append(Problem(-1, "HATP-OBJ-3", "type is not 'hatp.record'"))
    try:
        plan = Plan.model_validate(record.get("plan"))
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        problems.append(Problem(-1, "HATP-OBJ-3", f"plan.{error_path(tuple(e['loc']))}: {e['msg']}"))
        return Verified(tuple(problems), None, (), 0, None)  # no plan: nothing to anchor either
    try:
        actual = plan.digest()
    except CanonicalError as exc:  # pragma: no cover - a validated plan is always canonical
        return Verified((*problems, Problem(-1, exc.rule, exc.reason)), None, (), 0, None)
    # The plan is parsed and digested once, here, for the chain's checks and the anchors' alike; so is each event.
    digests: list[str | None] = []
    outcome, grounds, decisions = _check_record(
        record, plan, actual, keyring, require_closed, humans, problems, digests
    )
    anchoring = _anchoring(record, plan, actual, keyring, evidence, digests)
    if anchoring is not None:
        problems = [*problems, *anchoring.problems]
    return Verified(tuple(problems), outcome, grounds, decisions, anchoring)


def _anchoring(
    record: Mapping[str, Any],
    plan: Plan,
    actual: str,
    keyring: Keyring,
    evidence: Sequence[Any],
    digests: Sequence[str | None],
) -> Anchoring | None:
    """HATP-REC-20/21 over a record that has events; None otherwise (nothing to anchor). `digests`: each event's
    `event_digest`, as the chain check computed them."""
    events = record.get("events")
    if not isinstance(events, list) or not events:
        return None
    last = events[-1]
    closed = isinstance(last, dict) and last.get("event") == CLOSE_EVENT
    return check_anchors(events, plan, actual, keyring, evidence, closed=closed, digests=digests)


def _check_record(
    record: Mapping[str, Any],
    plan: Plan,
    actual: str,
    keyring: Keyring,
    require_closed: bool,
    humans: HumanKeys | None,
    problems: list[Problem],
    digests: list[str | None],
) -> tuple[str | None, tuple[str, ...], int]:
    """The chain, each event and the outcome, for a record whose plan parsed (its digest `actual`); appends
    to `problems`, and to `digests` each event's `event_digest` (none when the record has no events), and returns
    the outcome, its grounds and the human decisions counted."""
    txn_id = record.get("txnId")
    plan_digest = record.get("planDigest")
    if plan_digest != actual:
        problems.append(Problem(-1, "HATP-REC-4", f"record planDigest {plan_digest} is not the plan's digest {actual}"))
    if txn_id != plan.txn_id:
        problems.append(Problem(-1, "HATP-REC-5", f"record txnId {txn_id!r} is not the plan's {plan.txn_id!r}"))
    events = record.get("events")
    if not isinstance(events, list) or not events:
        problems.append(Problem(-1, "HATP-REC-6", "the record has no events"))
        return None, (), 0

    prev: str | None = None
    last_at = None
    human_decisions = 0
    verified: dict[int, str] = {}  # event index -> the kid whose signature over its evidence verified here
    for i, raw in enumerate(events):
        if not isinstance(raw, dict):
            problems.append(Problem(i, "HATP-OBJ-3", "event is not a JSON object"))
            digests.append(event_digest(raw))  # (a Mapping that is no dict still has one for the head checks)
            prev = None
            continue
        try:  # the event's digest, computed once: what the next event must name (nothing below changes raw)
            here = digest(raw)
        except CanonicalError as exc:  # e.g. a float in a body: no digest to chain, no bytes a signature covers
            problems.append(Problem(i, "HATP-CANON-2", _no_canonical_form(exc)))
            digests.append(None)
            prev = None
            continue
        digests.append(here)  # the anchors' head checks take it too
        try:
            ev = RecordEvent.model_validate(raw)
        except ValidationError as exc:
            e = exc.errors(include_url=False)[0]
            problems.append(Problem(i, "HATP-OBJ-3", f"{error_path(tuple(e['loc']))}: {e['msg']}"))
            prev = here
            continue
        if ev.seq != i:
            problems.append(
                Problem(
                    i,
                    "HATP-REC-1",
                    f"seq is {ev.seq} at position {i}: events were removed, inserted or reordered",
                )
            )
        if i == 0 and ev.prev is not None:
            problems.append(Problem(i, "HATP-REC-2", "the first event names a previous event: the head was cut"))
        elif i > 0 and ev.prev != prev:
            problems.append(
                Problem(
                    i,
                    "HATP-REC-2",
                    f"prev {ev.prev} does not match the digest of event {i - 1} ({prev}): the chain is broken here",
                )
            )
        if ev.txn_id != plan.txn_id:
            problems.append(
                Problem(
                    i,
                    "HATP-REC-5",
                    f"event belongs to transaction {ev.txn_id!r}, not "
                    f"{plan.txn_id!r}: events were spliced in from another record",
                )
            )
        if ev.plan_digest != actual:
            problems.append(Problem(i, "HATP-REC-4", f"event names plan {ev.plan_digest}, not {actual}"))
        if i == 0 and ev.event != BEGIN_EVENT:
            problems.append(Problem(i, "HATP-REC-7", f"the first event is {ev.event!r}, not {BEGIN_EVENT!r}"))
        at = parse_ts(ev.at)
        if last_at is not None and at < last_at:
            problems.append(Problem(i, "HATP-REC-9", f"event time {ev.at} is earlier than the event before it"))
        last_at = at
        try:
            verify_object(raw, keyring, "coordinator", f"events[{i}]")
        except SignatureError as exc:
            problems.append(Problem(i, exc.rule, exc.reason))
        if ev.evidence is not None:
            refused, kid = _check_evidence(i, raw["evidence"], keyring, plan.txn_id, actual)
            problems.extend(refused)
            if kid is not None:
                verified[i] = kid
            if ev.evidence.get("type") == "hatp.approval":
                decisions = ev.evidence.get("decisions")
                human_decisions += len(decisions) if isinstance(decisions, list) else 0
                if humans is not None:
                    problems.extend(_check_human_proofs(i, ev.evidence, humans))
        if ev.event == CLOSE_EVENT:
            if i != len(events) - 1:
                problems.append(Problem(i, "HATP-REC-6", f"{len(events) - 1 - i} event(s) follow record.closed"))
            if ev.body.get("eventCount") != i:
                problems.append(
                    Problem(
                        i,
                        "HATP-REC-6",
                        f"record.closed counts {ev.body.get('eventCount')} events before it, but {i} precede it",
                    )
                )
        prev = here
    last = events[-1]
    if require_closed and not (isinstance(last, dict) and last.get("event") == CLOSE_EVENT):
        problems.append(
            Problem(
                len(events) - 1,
                "HATP-REC-6",
                "the record does not end in record.closed: its tail "
                "was cut, or the transaction is still open (verify with --open to accept that)",
            )
        )
    if not (isinstance(last, dict) and last.get("event") == CLOSE_EVENT and isinstance(last.get("body"), dict)):
        return None, (), human_decisions  # open: there is no outcome to justify yet
    outcome = last["body"].get("outcome")
    found = justify(plan, actual, events[:-1], outcome, keyring, humans, close_index=len(events) - 1, verified=verified)
    problems.extend(found.problems)
    return str(outcome), found.grounds, human_decisions


def _no_canonical_form(exc: CanonicalError) -> str:
    return f"the event has no canonical form ({exc.reason} at {exc.path}), so it cannot be chained or signed"


def _check_evidence(
    i: int, evidence: Mapping[str, Any], keyring: Keyring, txn_id: str, plan_digest: str
) -> tuple[list[Problem], str | None]:
    """The problems of event `i`'s evidence, and the kid whose signature over it verified (None: it did not)."""
    out: list[Problem] = []
    kind = evidence.get("type")
    roles = EVIDENCE_ROLES.get(kind) if isinstance(kind, str) else None
    if roles is None:
        return [Problem(i, "HATP-REC-8", f"evidence of unknown type {kind!r}")], None
    if evidence.get("planDigest") != plan_digest:
        out.append(
            Problem(
                i,
                "HATP-REC-4",
                f"{kind} names plan {evidence.get('planDigest')}, not {plan_digest}: a party signed a different plan",
            )
        )
    if evidence.get("txnId", txn_id) != txn_id:
        out.append(Problem(i, "HATP-REC-5", f"{kind} belongs to transaction {evidence.get('txnId')!r}"))
    try:
        kid = verify_object(evidence, keyring, None, f"events[{i}].evidence")
    except SignatureError as exc:
        return [*out, Problem(i, exc.rule, f"evidence: {exc.reason}")], None
    entry = keyring.get(kid)
    if entry is not None and not roles.intersection(entry.roles):
        out.append(
            Problem(
                i,
                "HATP-SIG-5",
                f"evidence: key {kid!r} may sign as {list(entry.roles)}, not a {kind} (needs one of {sorted(roles)})",
            )
        )
    if entry is not None:
        field = _SPEAKS_FOR[str(kind)]
        try:
            check_party(entry, evidence.get(field), f"events[{i}].evidence.{field}")
        except SignatureError as exc:
            out.append(
                Problem(i, exc.rule, f"evidence: the {kind} names {field} {evidence.get(field)!r}: {exc.reason}")
            )
    return out, kid


def _check_human_proofs(i: int, evidence: Mapping[str, Any], humans: HumanKeys) -> list[Problem]:
    try:
        approval = Approval.model_validate(evidence)
        check_decision_proofs(approval, humans, f"events[{i}].evidence")
    except ValidationError as exc:
        e = exc.errors(include_url=False)[0]
        return [Problem(i, "HATP-OBJ-3", f"approval: {error_path(tuple(e['loc']))}: {e['msg']}")]
    except HatpError as exc:
        return [Problem(i, exc.rule, f"approval: {exc.reason}")]
    return []


def signatures_ahead(record: Mapping[str, Any], keyring: Keyring) -> list[tuple[PublicKeyEntry, bytes, bytes]]:
    """The signatures `check_record` will verify on its events and their evidence, in its order, as (key entry,
    signature, signed bytes): for threads to verify ahead of it into `keyring`'s memo (Keyring.verify_ahead).
    Nothing is decided from them: check_record verifies every signature itself, finding those that verified
    ahead in the memo (the exact key, signature and bytes) and refusing the rest with its own problems. Only a
    signature whose shape, algorithm, kid, signed bytes and encoding check_record would get as far as verifying
    is listed; at most `keyring.remembers` (more would push the first out of the memo before they are met)."""
    out: list[tuple[PublicKeyEntry, bytes, bytes]] = []
    events = record.get("events")
    for raw in events if isinstance(events, list) else ():
        if not isinstance(raw, dict):
            continue
        for obj in (raw, raw.get("evidence")):
            if len(out) < keyring.remembers and isinstance(obj, Mapping):
                triple = _signature_ahead(obj, keyring)
                if triple is not None:
                    out.append(triple)
    return out


def _signature_ahead(obj: Mapping[str, Any], keyring: Keyring) -> tuple[PublicKeyEntry, bytes, bytes] | None:
    sig = obj.get("signature")
    if not (isinstance(sig, Mapping) and sig.get("alg") == ALG and isinstance(sig.get("sig"), str)):
        return None
    kid = sig.get("kid")
    entry = keyring.get(kid) if isinstance(kid, str) else None
    if entry is None:
        return None
    try:
        return entry, b64u_decode(sig["sig"]), signing_bytes(obj)
    except (ValueError, CanonicalError):  # (CanonicalError is a HatpError, not a ValueError)
        return None


def parse_record(record: Mapping[str, Any]) -> TransactionRecord:
    """Validate a record as a model (raises pydantic.ValidationError)."""
    return TransactionRecord.model_validate(record)
