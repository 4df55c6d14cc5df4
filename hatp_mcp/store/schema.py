"""Versioned, forward-only store schemas, checked at start (HATP-STORE-1).

Each store (a *component*: the coordinator's log, a participant's state, the gateway's asks, a gate's replay
cache) has a list of steps per backend; step i brings its tables from version i to version i + 1, and a database
remembers each component's version in the `hatp_schema` table. Opening a store applies the steps it lacks, in one
transaction with the version row (a failed step leaves the old schema and version). A database whose version is
newer than the code's refuses to open: code that does not know a table's newer shape must not write to it. Steps
are never edited once released, only appended. This module runs SQLite's steps; hatp_mcp.store.postgresql.pools
runs PostgreSQL's with the same check.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from hatp_mcp.errors import HatpError

__all__ = ["VERSION_TABLE", "Schema", "migrate_sqlite", "schema_too_new"]

VERSION_TABLE = "hatp_schema"


def schema_too_new(component: str, found: int, known: int, where: str) -> HatpError:
    return HatpError(
        "HATP-STORE-1",
        f"{where} holds the {component!r} schema at version {found}, newer than this code's {known}:"
        " refusing to read or write it",
        path=f"{VERSION_TABLE}.{component}",
        code="SCHEMA_TOO_NEW",
        fix="run the hatp-mcp release that wrote it (or a newer one); schemas only move forward",
    )


@dataclass(frozen=True, slots=True)
class Schema:
    """One component's steps on one backend: `steps[i]` (statements run in order) takes version i to i + 1."""

    component: str
    steps: tuple[tuple[str, ...], ...]

    @property
    def version(self) -> int:
        return len(self.steps)

    def pending(self, found: int, where: str) -> tuple[tuple[str, ...], ...]:
        """The steps a database at version `found` lacks. Raises HatpError HATP-STORE-1 (SCHEMA_TOO_NEW) when
        `found` is newer than this code."""
        if found > self.version:
            raise schema_too_new(self.component, found, self.version, where)
        return self.steps[found:]


def migrate_sqlite(conn: sqlite3.Connection, schema: Schema, where: str) -> int:
    """Bring `schema` up to date on `conn` (autocommit mode, as hatp_mcp.store.sqlite.open_db opens it), in one
    ``BEGIN IMMEDIATE`` transaction so two processes opening one file migrate it once. Returns the version found.
    Raises HatpError HATP-STORE-1 when the file's schema is newer than this code."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        conn.execute(
            f"CREATE TABLE IF NOT EXISTS {VERSION_TABLE} (component TEXT PRIMARY KEY, version INTEGER NOT NULL)"
        )
        row = conn.execute(f"SELECT version FROM {VERSION_TABLE} WHERE component = ?", (schema.component,)).fetchone()
        found = int(row[0]) if row else 0
        for step in schema.pending(found, where):
            for statement in step:
                conn.execute(statement)
        if found != schema.version:
            conn.execute(
                f"INSERT OR REPLACE INTO {VERSION_TABLE} (component, version) VALUES (?, ?)",
                (schema.component, schema.version),
            )
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    return found
