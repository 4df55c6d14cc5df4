"""The record head a participant signs into its answer (spec/hatp.md HATP-REC-19), so that a party other than the
coordinator holds proof of the record it saw: a commit answers at the `decision` event it carries (HATP-TRUST-7),
whose sequence number and digest the participant computes itself from the event; the other requests name the
coordinator's head (`recordHead`), which the answer repeats. `check_commit_head` is the one order a participant
can check itself (HATP-REC-23). Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hatp_mcp.core.model.evidence import RecordHead
from hatp_mcp.core.signing.canonical import CanonicalError, digest
from hatp_mcp.errors import HatpError

__all__ = ["check_commit_head", "head_of"]

_MAX_SEQ = 1_000_000  # RecordEvent.seq's bound


def head_of(event: object) -> RecordHead | None:
    """The head at `event` (a record event as received): its `seq` and the digest of its canonical form.

    None when it is no event a head can name (not an object, no valid `seq`, no canonical form): an answer then
    signs no head, and a verifier reports it as not anchored rather than anchored somewhere."""
    if not isinstance(event, Mapping):
        return None
    seq: Any = event.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= _MAX_SEQ:
        return None
    try:
        return RecordHead(seq=seq, event_digest=digest(event))
    except CanonicalError:
        return None


def check_commit_head(decision: RecordHead | None, vote: Mapping[str, Any] | None) -> None:
    """HATP-REC-23: the commit decision comes after the head the branch's own yes vote was signed at. A decision
    at or before that head cannot rest on the vote: the coordinator's chain was reordered or forked.
    `decision` None (no decision event carried: an in-process caller) or a vote without a head: nothing to compare.

    Raises HatpError HATP-REC-23 (code HEAD_REORDERED)."""
    head = vote.get("recordHead") if vote is not None else None
    seq = head.get("seq") if isinstance(head, Mapping) else None
    if decision is None or not isinstance(seq, int) or decision.seq > seq:
        return
    raise HatpError(
        "HATP-REC-23",
        f"the commit decision is event {decision.seq}, but this branch's yes vote answered at head {seq}: a "
        "decision cannot come before the vote it rests on (the record was reordered or forked)",
        path="$.decision.seq",
        code="HEAD_REORDERED",
        fix="commit on the decision the coordinator recorded after this branch's vote",
    )
