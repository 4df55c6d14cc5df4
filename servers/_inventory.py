"""A tool server's small inventory on SQLite: resources that are free, held or taken, each with a version.

Any change made outside a transaction (a sale on another channel, a price change) bumps the version, which is
what a HATP precondition compares at commit. Holds made by a transaction do not bump it. The operations for the
participant wrapper (hold, compensate, final) live in servers/_operations.py; this module only stores.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from hatp_mcp.store.sqlite import open_db

__all__ = ["Inventory", "Item"]


@dataclass(frozen=True)
class Item:
    resource: str
    version: int
    state: str  # free | held | taken | gone
    holder: str | None


class Inventory:
    def __init__(self, path: Path | str) -> None:
        self._db = open_db(path)
        self._mutex = threading.Lock()
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS items (resource TEXT PRIMARY KEY, version INTEGER NOT NULL,"
            " state TEXT NOT NULL, holder TEXT)"
        )

    def get(self, resource: str) -> Item:
        """The item (a resource never seen before is free at version 1)."""
        with self._mutex:
            row = self._db.execute(
                "SELECT version, state, holder FROM items WHERE resource = ?", (resource,)
            ).fetchone()
        return Item(resource, row[0], row[1], row[2]) if row else Item(resource, 1, "free", None)

    def _put(self, item: Item) -> None:
        with self._mutex:
            self._db.execute(
                "INSERT OR REPLACE INTO items (resource, version, state, holder) VALUES (?, ?, ?, ?)",
                (item.resource, item.version, item.state, item.holder),
            )

    def set_state(self, resource: str, state: str, holder: str | None) -> Item:
        """A transaction's own change (hold, release, take): the version stays."""
        item = self.get(resource)
        new = Item(resource, item.version, state, holder)
        self._put(new)
        return new

    def outside_change(self, resource: str, state: str | None = None, holder: str | None = None) -> Item:
        """A change from outside any transaction: bumps the version (and may take the resource)."""
        item = self.get(resource)
        new = Item(resource, item.version + 1, state or item.state, holder if state else item.holder)
        self._put(new)
        return new

    def all(self) -> list[Item]:
        with self._mutex:
            rows = self._db.execute("SELECT resource, version, state, holder FROM items ORDER BY resource").fetchall()
        return [Item(*r) for r in rows]

    def close(self) -> None:
        self._db.close()
