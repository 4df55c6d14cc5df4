"""The record head a participant signs into its answer (spec/hatp.md HATP-REC-19), so that a party other than the
coordinator holds proof of the record it saw: a commit answers at the `decision` event it carries (HATP-TRUST-7),
whose sequence number and digest the participant computes itself from the event; the other requests name the
coordinator's head (`recordHead`), which the answer repeats. Pure: no IO.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from hatp_mcp.core.evidence.canonical import CanonicalError, digest
from hatp_mcp.core.model.evidence import RecordHead

__all__ = ["head_of"]

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
