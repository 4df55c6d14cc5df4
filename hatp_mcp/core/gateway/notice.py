"""What the gateway tells a person, and when: the notices a delivery channel carries (spec/gateway.md, HATP-GW-60..62).
Pure: no IO, no clock (`now` is an argument).

A notice carries what the person needs to act and nothing an agent could abuse (HATP-GW-60):
- words rendered from the structure only: the action, who asks, the operations (operation, participant, tier),
  the amounts with the tolerance ceiling the person really signs for ("up to"), the deadline and how many must
  approve, and a link to the ask in the inbox;
- no agent-written text at all (the plan's summary, free-text arguments, a question's wording): a channel cannot
  show a label the way the inbox does, so the notice says that the inbox shows it, labelled;
- no argument values of a plan branch or gated call, private or not (the rule chosen for "private fields"): the
  only values taken from arguments are the amounts the requirement names, shown as the ceiling; everything else is
  seen in the inbox by the signed-in person only;
- no contact detail of anyone, and no other person's name: only who asked (the plan's requester) and the ask;
- no identifier the agent chose (HATP-GW-84): not the txnId, not a question's askId, not an operation's name or its
  participant's id. Each can be written as a link (`https://...`, a bare domain) and a mail or chat client makes it
  one; the ask is named by the link the gateway makes (the askId one percent-encoded segment of the inbox's URL)
  and an operation by its tier and amounts.

`due_notices` says which notices an ask owes now (HATP-GW-62): `ask` to everyone asked, `reminder` once an asked
person's SLA is `remind_before` from running out, and `closed` to everyone who was told of the ask and did not close
it themselves (withdrawn, decided by someone else, expired, or handed to another person when their time ran out).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Literal
from urllib.parse import quote

from hatp_mcp.core.gateway.screen import final_words
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.core.model.when import when_words

__all__ = [
    "NOTICE_KINDS",
    "Notice",
    "NoticeKind",
    "due_notices",
    "next_reminder",
    "notice_key",
    "render_notice",
]

# "dead-letter": the journal's alert that an undo needs a person (hatp_mcp/core/journal/alert.py); never an ask's
NoticeKind = Literal["ask", "reminder", "closed", "dead-letter"]
NOTICE_KINDS: tuple[NoticeKind, ...] = ("ask", "reminder", "closed", "dead-letter")


@dataclass(frozen=True)
class Notice:
    """One message for one person. `key` is the idempotency key (HATP-GW-63): one per ask, person and kind."""

    key: str
    ask_id: str
    human: str
    kind: NoticeKind
    subject: str
    text: str
    link: str

    def wire(self) -> dict[str, str]:
        return {
            "key": self.key,
            "askId": self.ask_id,
            "human": self.human,
            "kind": self.kind,
            "subject": self.subject,
            "text": self.text,
            "link": self.link,
        }

    @classmethod
    def from_wire(cls, raw: dict[str, str]) -> Notice:
        kind = raw["kind"]
        if kind not in NOTICE_KINDS:
            raise ValueError(f"unknown notice kind {kind!r}")
        return cls(
            raw["key"],
            raw["askId"],
            raw["human"],
            kind,
            raw["subject"],
            raw["text"],
            raw["link"],
        )


def notice_key(ask_id: str, human: str, kind: NoticeKind) -> str:
    return f"{ask_id}|{human}|{kind}"


def ask_link(inbox_url: str, ask_id: str) -> str:
    """The inbox's page of the ask: the askId is one percent-encoded path segment, so no askId makes another URL."""
    return f"{inbox_url.rstrip('/')}/asks/{quote(ask_id, safe='')}"


_CLOSED_WORDS = {
    "approved": "was approved",
    "rejected": "was rejected",
    "answered": "was answered",
    "expired": "expired: no decision by its deadline",
    "exhausted": "closed: no one eligible was left to ask",
    "withdrawn": "was withdrawn: the transaction was aborted",
}


# An operation in a notice is its tier, never its name or participant (HATP-GW-84).
_TIER_WORDS = {"hold": "a hold", "compensate": "a step that can be undone", "final": "a final step"}


def _what(rec: AskRecord, names: Mapping[str, str]) -> tuple[str, list[str]]:
    """The subject's words and the body's lines, from the structured ask only (HATP-GW-60); the requester by the
    display name on their signed card when there is one (HATP-GW-88)."""
    ask = rec.ask
    screen = ask.screen
    lines: list[str] = []
    if screen is not None:
        who = names.get(screen.requester, screen.requester)
        what = f"{screen.action} for {who}"
        lines.append(f"Approve {screen.action} requested by {who}.")
        if screen.totals:
            lines.append(f"Amount: {'; '.join(screen.totals)}.")
        for op in screen.operations:
            money = f", {op.amount}" + (f" (up to {op.up_to})" if op.up_to else "") if op.amount else ""
            lines.append(f"- {_TIER_WORDS.get(op.tier, 'a step')}{money}")
        final = final_words(screen)
        if final:  # the irreversible step in words, as the inbox says it (HATP-GW-88)
            lines.append(final)
        if screen.quorum:
            lines.append(f"Approvals needed: {screen.quorum}.")
        lines.append(
            "The transaction's id, its operations and participants, the agent's own words and the arguments are"
            " shown, labelled, in the inbox only."
        )
    else:
        asker = names.get(ask.requester, ask.requester) if ask.requester else None
        what = f"a {ask.kind} question" + (f" for {asker}" if asker else "")
        lines.append(f"A {ask.kind} question is waiting" + (f", asked for {asker}." if asker else "."))
        if ask.question is not None:
            lines.append("Its wording was written by the agent and is shown, labelled, in the inbox only.")
    if rec.up_to and screen is None:  # a gated call: the ceiling the requirement extracts, never the arguments
        lines.append(f"Up to: {'; '.join(a.display() for a in rec.up_to)}.")
    return what, lines


def render_notice(
    rec: AskRecord,
    human: str,
    kind: NoticeKind,
    inbox_url: str,
    due_at: str | None = None,
    *,
    names: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> Notice:
    """The notice of `kind` for `human` about the ask in `rec` (HATP-GW-60): `names`, display names by address from
    the signed cards; `now`, the gateway's clock, for "in N min" (HATP-GW-88)."""
    ask = rec.ask
    link = ask_link(inbox_url, ask.ask_id)
    what, lines = _what(rec, names or {})
    if kind == "ask":
        subject = f"Approval needed: {what}" if ask.kind == "approve" else f"Question waiting: {what}"
        lines.append(f"Decide by {when_words(ask.decide_by, now)}.")
        lines.append(f"Open the ask in your inbox: {link}")
    elif kind == "reminder":
        subject = f"Reminder: {what}"
        ends = when_words(due_at or ask.decide_by, now)
        lines.insert(0, f"Your time on this ask ends at {ends}; after that it goes to someone else.")
        lines.append(f"Open the ask in your inbox: {link}")
    else:
        state = rec.state
        if state == "pending":  # still open, but no longer theirs (their SLA ran out, or they declined)
            words = "was handed to someone else"
        else:
            words = _CLOSED_WORDS.get(state, "was closed")
        subject = f"No longer waiting for you: {what}"
        lines = [f"This ask {words}. Nothing more is needed from you.", f"It stays visible at {link}"]
    return Notice(notice_key(ask.ask_id, human, kind), ask.ask_id, human, kind, subject, "\n".join(lines), link)


def due_notices(
    rec: AskRecord, sent: set[tuple[str, NoticeKind]], remind_before: timedelta, now: datetime
) -> list[tuple[str, NoticeKind]]:
    """(human, kind) of every notice the ask owes now and that is not in `sent` (HATP-GW-62)."""
    out: list[tuple[str, NoticeKind]] = []
    pending = rec.state == "pending"
    for seat in rec.seats:
        told = (seat.human, "ask") in sent
        if pending and seat.status == "asked":
            if not told:
                out.append((seat.human, "ask"))
            elif (
                seat.due_at is not None
                and (seat.human, "reminder") not in sent
                and now >= parse_ts(seat.due_at) - remind_before
                and now < parse_ts(seat.due_at)
            ):
                out.append((seat.human, "reminder"))
        elif told and (seat.human, "closed") not in sent and seat.decision is None and seat.rule != "HATP-GW-61":
            out.append((seat.human, "closed"))  # closed for them, and not by their own decision
    return out


def next_reminder(rec: AskRecord, sent: set[tuple[str, NoticeKind]], remind_before: timedelta) -> datetime | None:
    """When `due_notices` next owes a reminder (None: no reminder ahead)."""
    if rec.state != "pending":
        return None
    times = [
        parse_ts(s.due_at) - remind_before
        for s in rec.seats
        if s.status == "asked" and s.due_at is not None and (s.human, "reminder") not in sent
    ]
    return min(times, default=None)
