"""The one failure every store backend shares: the database cannot be reached (an OSError, so a server's start-up
handles it with its other IO failures). A refusal of the store's contents or settings is a HatpError instead
(HATP-STORE-1, HATP-STORE-3)."""

from __future__ import annotations

__all__ = ["StoreUnreachable"]


class StoreUnreachable(OSError):
    """The store's database did not answer (not started, wrong address, refused credentials, timed out)."""
