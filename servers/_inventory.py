"""A tool server's small inventory on SQLite: resources that are free, held or taken, each with a version.

Any change made outside a transaction (a sale on another channel, a price change) bumps the version, which is
what a HATP precondition compares at commit. Holds made by a transaction do not bump it. A transaction's effect
(a booking, a capture, an undo) is written with its idempotency key in the same SQLite transaction as the change
it makes, to the `effects` ledger: the same key again changes nothing and answers what the first time did
(HATP-PART-10). The inventory may live in the participant store's own database (a shared `StateDb`): then a
write made inside the store's transaction is kept with the answer that reports it, by one fsync (HATP-PART-13).
The operations for the participant wrapper (hold, compensate, final) live in servers/_operations.py; this module
only stores.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from hatp_mcp.store.participant_state import StateDb

__all__ = ["Effect", "Inventory", "Item"]

# A transaction's own change of a resource's state and holder, its version kept (1 for a resource never seen): one
# statement, so a hold or a commit does not read the row first
_SET_STATE = (
    "INSERT INTO items (resource, version, state, holder) VALUES (?, 1, ?, ?) ON CONFLICT (resource)"
    " DO UPDATE SET state = excluded.state, holder = excluded.holder RETURNING version"
)


@dataclass(frozen=True)
class Item:
    resource: str
    version: int
    state: str  # free | held | taken | gone
    holder: str | None


@dataclass(frozen=True)
class Effect:
    """One effect in the ledger: `kind` (e.g. commit, undo) of the branch keyed `key` on `resource`."""

    key: str
    kind: str
    resource: str
    undo_token: str | None


class Inventory:
    """On its own database (`path`) or on a `StateDb` shared with the participant store (HATP-PART-13)."""

    def __init__(self, path: Path | str | StateDb) -> None:
        self.database = path if isinstance(path, StateDb) else StateDb(path)
        self._db = self.database.conn
        self._mutex = self.database.lock
        with self._mutex:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS items (resource TEXT PRIMARY KEY, version INTEGER NOT NULL,"
                " state TEXT NOT NULL, holder TEXT)"
            )
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS effects (seq INTEGER PRIMARY KEY AUTOINCREMENT, key TEXT NOT NULL,"
                " kind TEXT NOT NULL, resource TEXT NOT NULL, undo_token TEXT, UNIQUE (key, kind))"
            )

    def get(self, resource: str) -> Item:
        """The item (a resource never seen before is free at version 1)."""
        with self._mutex:
            row = self._db.execute(
                "SELECT version, state, holder FROM items WHERE resource = ?", (resource,)
            ).fetchone()
        return Item(resource, row[0], row[1], row[2]) if row else Item(resource, 1, "free", None)

    def _put(self, item: Item) -> None:
        self.database.write(
            "INSERT OR REPLACE INTO items (resource, version, state, holder) VALUES (?, ?, ?, ?)",
            (item.resource, item.version, item.state, item.holder),
        )

    def set_state(self, resource: str, state: str, holder: str | None) -> Item:
        """A transaction's own change (hold, release, take): the version stays (a new resource starts at 1).
        One statement reads and writes (no read of its own first)."""
        with self._mutex:
            row = self._db.execute(_SET_STATE, (resource, state, holder)).fetchall()[0]  # stepped to its end
        return Item(resource, row[0], state, holder)

    def outside_change(self, resource: str, state: str | None = None, holder: str | None = None) -> Item:
        """A change from outside any transaction: bumps the version (and may take the resource)."""
        with self._mutex:
            item = self.get(resource)
            new = Item(resource, item.version + 1, state or item.state, holder if state else item.holder)
            self._put(new)
        return new

    def apply_effect(
        self, key: str, kind: str, resource: str, state: str | None, holder: str | None, undo_token: str | None = None
    ) -> Effect:
        """Make a transaction's effect once per (key, kind): set the resource's `state` (and holder; None leaves
        it as it is) and write the effect, in one SQLite transaction (or in the open one it joins). When the ledger
        already has (key, kind), nothing changes and the first effect is returned."""
        with self.database.transaction() as db:
            row = db.execute(
                "SELECT resource, undo_token FROM effects WHERE key = ? AND kind = ?", (key, kind)
            ).fetchone()
            if row is not None:
                return Effect(key, kind, row[0], row[1])
            if state is not None:
                db.execute(_SET_STATE, (resource, state, holder)).fetchall()  # stepped to its end
            db.execute(
                "INSERT INTO effects (key, kind, resource, undo_token) VALUES (?, ?, ?, ?)",
                (key, kind, resource, undo_token),
            )
        return Effect(key, kind, resource, undo_token)

    def effect(self, key: str, kind: str) -> Effect | None:
        """The effect the ledger holds for (key, kind), if it happened."""
        with self._mutex:
            row = self._db.execute(
                "SELECT resource, undo_token FROM effects WHERE key = ? AND kind = ?", (key, kind)
            ).fetchone()
        return Effect(key, kind, row[0], row[1]) if row else None

    def effects(self, resource: str | None = None) -> list[Effect]:
        """Every effect in the ledger, oldest first (only those on `resource` when given)."""
        sql, args = "SELECT key, kind, resource, undo_token FROM effects", tuple[str, ...]()
        if resource is not None:
            sql, args = sql + " WHERE resource = ?", (resource,)
        with self._mutex:
            rows = self._db.execute(sql + " ORDER BY seq", args).fetchall()
        return [Effect(*r) for r in rows]

    def all(self) -> list[Item]:
        with self._mutex:
            rows = self._db.execute("SELECT resource, version, state, holder FROM items ORDER BY resource").fetchall()
        return [Item(*r) for r in rows]

    def close(self) -> None:
        self.database.close()
