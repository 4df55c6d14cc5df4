"""A saga's journal record: its entries as signed, hash-chained events, and verifying one offline (HATP-JRN-12).

Each event names the saga, its sequence number, the digest of the previous event (signature included), the entry
name, its author and time, and the entry's body, and is signed by the journal's key (role `journal`). The record
ends with the signed `saga.closed`, stating the status and how many events precede it. Verification checks the
chain like a Transaction Record's and then replays the entries through the saga machine, so a record whose
entries the machine would never have written (a completed step not undone, an undo twice, an in-doubt step
guessed) fails even when every signature holds. Pure: no IO, no clock (callers pass times).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from hatp_mcp.core.journal.events import ENTRIES
from hatp_mcp.core.journal.machine import SagaMachine
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.signing.canonical import CanonicalError, digest
from hatp_mcp.core.signing.keys import Keyring, SignatureError, SigningKey, sign_object, verify_object
from hatp_mcp.errors import HatpError

__all__ = ["CLOSE", "EVENT_TYPE", "RECORD_TYPE", "JournalChain", "Problem", "is_journal_record", "verify_journal"]

RECORD_TYPE = "hatp.journal"
EVENT_TYPE = "hatp.journal.event"
BEGIN = "saga.begin"
CLOSE = "saga.closed"
RULE = "HATP-JRN-12"


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with a journal record: the event index (-1 for the record itself), the rule and why."""

    index: int
    rule: str
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "rule": self.rule, "reason": self.reason}


class JournalChain:
    """Appends journal-signed events to one saga's chain. Holds wire dicts, never re-serializes."""

    def __init__(self, saga_id: str, key: SigningKey, author: str, events: Sequence[Mapping[str, Any]] = ()) -> None:
        self.saga_id = saga_id
        self._key = key
        self._author = author
        self._events: list[dict[str, Any]] = [dict(e) for e in events]
        self._head: str | None = digest(self._events[-1]) if self._events else None

    @property
    def events(self) -> list[dict[str, Any]]:
        return list(self._events)

    @property
    def closed(self) -> bool:
        return bool(self._events) and self._events[-1].get("event") == CLOSE

    def sign(
        self, event: str, at: str, body: Mapping[str, Any], after: Sequence[Mapping[str, Any]] = ()
    ) -> dict[str, Any]:
        """The next signed event, not yet appended (the driver makes it durable, then calls `appended`); `after`:
        events signed already and not yet appended, which this one follows. Raises ValueError after close or for
        an unknown entry; CanonicalError for a body that is not JSON."""
        count = len(self._events) + len(after)
        last = after[-1] if after else (self._events[-1] if self._events else None)
        if last is not None and last.get("event") == CLOSE:
            raise ValueError("the journal record is closed; nothing may follow saga.closed")
        if event not in ENTRIES:
            raise ValueError(f"{event!r} is not a journal entry")
        if (count == 0) != (event == BEGIN):
            raise ValueError(f"the first event, and only the first, is {BEGIN!r}")
        parse_ts(at)
        payload = dict(body)
        if event == CLOSE:
            payload["eventCount"] = count
        raw: dict[str, Any] = {
            "type": EVENT_TYPE,
            "sagaId": self.saga_id,
            "seq": count,
            "event": event,
            "author": self._author,
            "at": at,
            "body": payload,
        }
        head = digest(after[-1]) if after else self._head
        if head is not None:
            raw["prev"] = head
        return sign_object(raw, self._key)

    def appended(self, signed: Mapping[str, Any]) -> None:
        """Take `signed` (from `sign`) as the new head, once it is durable. Raises ValueError if it is not next."""
        if signed.get("seq") != len(self._events) or signed.get("prev") != self._head:
            raise ValueError("that event is not the next one of this chain")
        self._events.append(dict(signed))
        self._head = digest(signed)

    def record(self, name: str) -> dict[str, Any]:
        return {"type": RECORD_TYPE, "sagaId": self.saga_id, "name": name, "events": self.events}


def is_journal_record(doc: Mapping[str, Any]) -> bool:
    return doc.get("type") == RECORD_TYPE


def verify_journal(record: Mapping[str, Any], keyring: Keyring, *, require_closed: bool = True) -> list[Problem]:
    """Check a journal record offline; return every problem found (empty: it holds). HATP-JRN-12.

    Checks the record's type and saga id, each event's shape, sequence, chain link, saga id, entry name, time order
    and journal signature, that it begins with saga.begin and (unless `require_closed` is False) ends with a
    saga.closed that counts the events before it; then replays the entries through the saga machine
    (HATP-JRN-1/3/4/6/9: what the machine would refuse, the record may not say happened)."""
    problems: list[Problem] = []
    if record.get("type") != RECORD_TYPE:
        problems.append(Problem(-1, RULE, f"type is not {RECORD_TYPE!r}"))
    saga_id = record.get("sagaId")
    if not isinstance(saga_id, str) or not saga_id:
        return [*problems, Problem(-1, RULE, "the record names no sagaId")]
    events = record.get("events")
    if not isinstance(events, list) or not events:
        return [*problems, Problem(-1, RULE, "the record has no events")]
    prev: str | None = None
    last_at = None
    entries: list[tuple[str, Mapping[str, Any]]] = []
    for i, raw in enumerate(events):
        shape = _shape(raw)
        if shape is not None:
            problems.append(Problem(i, RULE, shape))
            prev = digest(raw) if isinstance(raw, dict) and _canonicalizable(raw) else None
            continue
        if raw["seq"] != i:
            problems.append(Problem(i, RULE, f"seq is {raw['seq']} at position {i}: events were removed or reordered"))
        if i == 0 and "prev" in raw:
            problems.append(Problem(i, RULE, "the first event names a previous event: the head was cut"))
        elif i > 0 and raw.get("prev") != prev:
            problems.append(Problem(i, RULE, f"prev does not match the digest of event {i - 1}: the chain is broken"))
        if raw["sagaId"] != saga_id:
            problems.append(Problem(i, RULE, f"event belongs to saga {raw['sagaId']!r}, not {saga_id!r}"))
        if (i == 0) != (raw["event"] == BEGIN):
            problems.append(Problem(i, RULE, f"{BEGIN!r} must be the first event and only the first"))
        at = parse_ts(raw["at"])
        if last_at is not None and at < last_at:
            problems.append(Problem(i, RULE, f"event time {raw['at']} is earlier than the event before it"))
        last_at = at
        try:
            verify_object(raw, keyring, "journal", f"events[{i}]")
        except SignatureError as exc:
            problems.append(Problem(i, exc.rule, exc.reason))
        if raw["event"] == CLOSE:
            if i != len(events) - 1:
                problems.append(Problem(i, RULE, f"{len(events) - 1 - i} event(s) follow saga.closed"))
            if raw["body"].get("eventCount") != i:
                problems.append(Problem(i, RULE, f"saga.closed counts {raw['body'].get('eventCount')}, not {i}"))
        entries.append((raw["event"], raw["body"]))
        prev = digest(raw)
    if require_closed and not (isinstance(events[-1], dict) and events[-1].get("event") == CLOSE):
        problems.append(
            Problem(
                len(events) - 1,
                RULE,
                "the record does not end in saga.closed: its tail was cut, or the saga is still running "
                "(verify with --open to accept that)",
            )
        )
    if len(entries) == len(events):  # every event readable: replay what they say
        try:
            SagaMachine.replay(saga_id, entries)
        except HatpError as exc:
            problems.append(Problem(int(str(exc.data.get("index", -1))), exc.rule, f"replay: {exc.reason}"))
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(Problem(-1, "HATP-JRN-1", f"replay: an entry the machine cannot read ({exc})"))
    return problems


def _shape(raw: object) -> str | None:
    """What is wrong with an event's shape, or None."""
    if not isinstance(raw, dict):
        return "event is not a JSON object"
    if raw.get("type") != EVENT_TYPE:
        return f"event type is not {EVENT_TYPE!r}"
    for name, kind in (("sagaId", str), ("event", str), ("author", str), ("at", str), ("body", dict)):
        if not isinstance(raw.get(name), kind):
            return f"{name} is missing or not a {kind.__name__}"
    if not isinstance(raw.get("seq"), int) or isinstance(raw.get("seq"), bool):
        return "seq is missing or not an integer"
    if raw["event"] not in ENTRIES:
        return f"{raw['event']!r} is not a journal entry"
    if "prev" in raw and not isinstance(raw["prev"], str):
        return "prev is not a digest"
    try:
        parse_ts(raw["at"])
    except ValueError as exc:
        return str(exc)
    return None


def _canonicalizable(raw: Mapping[str, Any]) -> bool:
    try:
        digest(raw)
    except CanonicalError:
        return False
    return True
