"""A running gateway sees the organisation's cards as they are now (spec/gateway.md HATP-GW-82): when the operator
re-signs a card (`hatp enrol approve` adds a passkey), the gateway uses it at once instead of at its next start.

`CardWatch.refresh()` fingerprints the organisation's well-known document and cards (SHA-256 over each file's name
and bytes); when that changed, it loads the Directory again exactly as a start would (runtime/org.py
load_directory: every card verified against the well-known document's Directory key; a card signed by any other
key, altered or unreadable is ignored with its rule, so its passkeys never count) and hands it to `use`: the
gateway's `use_directory`, or a coordinator's `HumanKeys.use_cards` (servers/coordinator.py). A load that fails as
a whole (an unusable well-known document) changes nothing and is reported; the previous, verified cards stay.
The inbox calls `refresh` before it signs anyone in or checks a passkey, a coordinator before it hands on each
answer of the gateway (FreshCardsApprover), and both processes every few seconds, so a new card is never more
than one request away.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path

from hatp_mcp.core.gateway.directory import Directory, IgnoredCard
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.org import load_directory

__all__ = ["CardWatch"]


class CardWatch:
    def __init__(
        self,
        org_dir: Path,
        use: Callable[[Directory], None],
        *,
        on_ignored: Callable[[IgnoredCard], None] | None = None,
        on_error: Callable[[str], None] | None = None,
    ) -> None:
        self.org_dir = org_dir
        self.use = use
        self.on_ignored = on_ignored or (lambda _card: None)
        self.on_error = on_error or (lambda _why: None)
        self._seen = self._fingerprint()  # made right after the caller loaded these files

    def _fingerprint(self) -> str:
        h = hashlib.sha256()
        paths = [self.org_dir / ".well-known" / "human-card.json", *sorted((self.org_dir / "cards").glob("*.json"))]
        for path in paths:
            h.update(path.name.encode() + b"\0")
            try:
                h.update(path.read_bytes())
            except OSError:
                h.update(b"<unreadable>")
            h.update(b"\0")
        return h.hexdigest()

    def refresh(self) -> bool:
        """Load the cards again if their files changed; True when `use` was given a new Directory."""
        now = self._fingerprint()
        if now == self._seen:
            return False
        try:
            directory, ignored = load_directory(self.org_dir)
        except (OSError, ValueError, HatpError) as exc:
            self.on_error(f"cards changed but cannot be loaded, the previous ones stay: {exc}")
            return False  # tried again at the next refresh (the fingerprint is not taken)
        self._seen = now
        for card in ignored:
            self.on_ignored(card)
        self.use(directory)
        return True
