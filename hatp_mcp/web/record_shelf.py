"""Finished Transaction Records the inbox can draw as timelines (spec/gateway.md HATP-GW-81): one file per
transaction, `DIR/<txnId>.record.json` (the record `hatp verify` reads, as the coordinator closed it; the operator
or the demo puts it there), and the keyring file (JWKS of the coordinator, the servers and the gateway) it is
checked with, read on every view (a key added later counts; an unreadable keyring shows nothing, never an unchecked
record). The shelf only reads: who may see which record is the inbox's decision, and what the checks found is
`verify_record`'s (the same checks `hatp verify` makes), done on every view, never cached as a pass.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.errors import HatpError

__all__ = ["RecordShelf"]

_TXN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$")  # a file name, never a path
MAX_BYTES = 8 * 1024 * 1024


class RecordShelf:
    def __init__(self, directory: Path, keys: Path) -> None:
        self.directory = directory
        self.keys = keys

    def keyring(self) -> Keyring | None:
        """The keyring the records are checked with, as the file holds it now; None when it cannot be read."""
        try:
            doc = json.loads(self.keys.read_text(encoding="utf-8"))
            return Keyring.from_jwks(doc) if isinstance(doc, dict) else None
        except (OSError, ValueError, HatpError):
            return None

    def get(self, txn_id: str) -> dict[str, Any] | None:
        """The record of `txn_id`, or None when there is none (or the file is unreadable, too large, not a JSON
        object, or names another transaction: never shown as this one)."""
        if not _TXN_ID.fullmatch(txn_id) or ".." in txn_id:
            return None
        path = self.directory / f"{txn_id}.record.json"
        try:
            if path.stat().st_size > MAX_BYTES:
                return None
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(record, dict) or record.get("txnId") != txn_id:
            return None
        return record

    def has(self, txn_id: str) -> bool:
        """A record file is there (cheap, for the list; `get` still checks it when it is opened)."""
        return (
            bool(_TXN_ID.fullmatch(txn_id))
            and ".." not in txn_id
            and (self.directory / f"{txn_id}.record.json").is_file()
        )
