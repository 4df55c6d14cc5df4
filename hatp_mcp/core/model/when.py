"""Times as a person reads them (HATP-GW-88, 94, 97): "2026-11-29 14:00 UTC", with "(in 59 min)" or "(3 min ago)"
from a clock when the words are read at once. Pure: `now` is an argument.

Here, below every part of the core that writes words for people (the gateway, the transaction, the participant's
checks, the validator), so each says a time the same way.
"""

from __future__ import annotations

from datetime import UTC, datetime

from hatp_mcp.core.model.base import parse_ts

__all__ = ["in_words", "when_words"]


def in_words(delta_seconds: float) -> str:
    """How far a time is from now, as a person says it: "in 59 min", "in 4 h 0 min", "3 min ago", "now". To the
    nearest minute, a half minute up (HATP-GW-94): the inbox's script (web/pages.py INBOX_JS, `inWords`) counts by
    the same rule, so its first tick, a few milliseconds after the page, says what the gateway wrote."""
    minutes = int(abs(delta_seconds) // 60)
    if abs(delta_seconds) % 60 >= 30:  # HATP-GW-94: to the nearest minute, as the script rounds
        minutes += 1
    if minutes == 0:  # under half a minute either way: not "in 0 min"
        return "now"
    text = f"{minutes // 60} h {minutes % 60} min" if minutes >= 120 else f"{minutes} min"
    return f"in {text}" if delta_seconds >= 0 else f"{text} ago"


def when_words(ts: str | datetime, now: datetime | None = None) -> str:
    """A time, a wire timestamp or an aware datetime, as a person reads it (HATP-GW-88): "2026-11-29 14:00 UTC",
    with "(in N min)" from `now`. Without `now` in words kept in a record or signed (HATP-GW-97): a countdown would
    be wrong when read later."""
    at = ts.astimezone(UTC) if isinstance(ts, datetime) else parse_ts(ts)
    text = at.strftime("%Y-%m-%d %H:%M UTC")
    return f"{text} ({in_words((at - now).total_seconds())})" if now is not None else text
