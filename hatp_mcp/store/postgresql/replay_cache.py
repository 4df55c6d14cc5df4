"""A gated tool server's replay cache on PostgreSQL: the `ReplayCache` of hatp_mcp.store.replay_cache.

Spending a nonce is one committed ``INSERT ... ON CONFLICT DO NOTHING``: of two servers sharing the database that
spend the same approval at once, exactly one is told it spent it (HATP-GATE-18); `consume_all` spends several
keys (the approval's and its people's proof nonces) in one transaction, all or none. A definition change is recorded
under a row lock per (server, tool), so concurrent notes agree on when the current definition took effect.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from psycopg import Connection
from psycopg_pool import ConnectionPool

from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.store.postgresql.pools import open_pool, run
from hatp_mcp.store.schema import Schema

__all__ = ["SCHEMA", "PostgresReplayCache"]

SCHEMA = Schema(
    "replay",
    (
        (
            "CREATE TABLE used_nonce (server TEXT NOT NULL, nonce TEXT NOT NULL, approval_id TEXT NOT NULL,"
            " expires_at TIMESTAMPTZ NOT NULL, used_at TIMESTAMPTZ NOT NULL, PRIMARY KEY (server, nonce))",
            "CREATE INDEX used_nonce_by_expiry ON used_nonce (expires_at)",
            "CREATE TABLE tool_definition (server TEXT NOT NULL, tool TEXT NOT NULL, digest TEXT NOT NULL,"
            " since TEXT NOT NULL, PRIMARY KEY (server, tool))",
        ),
    ),
)

Row = tuple[object, ...]


class _Replayed(Exception):
    """A key of `consume_all` was spent before: the transaction is rolled back."""


class PostgresReplayCache:
    """Raises psycopg errors (OperationalError when the server is unreachable); `close()` it."""

    def __init__(self, url: str) -> None:
        self._pool: ConnectionPool[Connection[Row]] = open_pool(url, SCHEMA)

    def close(self) -> None:
        self._pool.close()

    def seen(self, server: str, nonce: str) -> bool:
        row = run(
            self._pool,
            lambda conn: conn.execute(
                "SELECT 1 FROM used_nonce WHERE server = %s AND nonce = %s", (server, nonce)
            ).fetchone(),
            idempotent=True,
        )
        return row is not None

    def consume(self, server: str, nonce: str, *, approval_id: str, expires_at: str, now: datetime) -> bool:
        expires = parse_ts(expires_at)
        return run(
            self._pool,
            lambda conn: (
                conn.execute(
                    "INSERT INTO used_nonce (server, nonce, approval_id, expires_at, used_at)"
                    " VALUES (%s, %s, %s, %s, %s)"
                    " ON CONFLICT (server, nonce) DO NOTHING",
                    (server, nonce, approval_id, expires, now),
                ).rowcount
                == 1
            ),
            idempotent=False,
        )

    def seen_any(self, server: str, keys: list[str]) -> bool:
        row = run(
            self._pool,
            lambda conn: conn.execute(
                "SELECT 1 FROM used_nonce WHERE server = %s AND nonce = ANY(%s) LIMIT 1", (server, list(keys))
            ).fetchone(),
            idempotent=True,
        )
        return row is not None

    def consume_all(self, server: str, keys: list[str], *, approval_id: str, expires_at: str, now: datetime) -> bool:
        unique = list(dict.fromkeys(keys))
        expires = parse_ts(expires_at)

        def spend(conn: Connection[Row]) -> bool:
            spent = conn.execute(
                "INSERT INTO used_nonce (server, nonce, approval_id, expires_at, used_at)"
                " SELECT %s, k, %s, %s, %s FROM unnest(%s::text[]) AS k ON CONFLICT (server, nonce) DO NOTHING",
                (server, approval_id, expires, now, unique),
            ).rowcount
            if spent != len(unique):  # one was spent before: a replay; spend none of them
                raise _Replayed
            return True

        try:
            return run(self._pool, spend, idempotent=False)
        except _Replayed:  # raised inside the transaction: rolled back, nothing spent
            return False

    def purge(self, now: datetime, *, margin: timedelta = timedelta(days=1)) -> int:
        cutoff = now - margin
        return run(
            self._pool,
            lambda conn: conn.execute("DELETE FROM used_nonce WHERE expires_at < %s", (cutoff,)).rowcount,
            idempotent=False,
        )

    def note_definition(self, server: str, tool: str, digest: str, now: datetime) -> datetime:
        return run(self._pool, lambda conn: self._note(conn, server, tool, digest, now), idempotent=False)

    @staticmethod
    def _note(conn: Connection[Row], server: str, tool: str, digest: str, now: datetime) -> datetime:
        conn.execute(
            "INSERT INTO tool_definition (server, tool, digest, since) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (server, tool) DO NOTHING",
            (server, tool, digest, format_ts(now)),
        )
        row = conn.execute(
            "SELECT digest, since FROM tool_definition WHERE server = %s AND tool = %s FOR UPDATE", (server, tool)
        ).fetchone()
        if row is None:  # inserted above or already there: rows are never deleted
            raise RuntimeError(f"tool_definition lost its row for {server} {tool}")
        if row[0] == digest:
            return parse_ts(str(row[1]))
        conn.execute(
            "UPDATE tool_definition SET digest = %s, since = %s WHERE server = %s AND tool = %s",
            (digest, format_ts(now), server, tool),
        )
        return parse_ts(format_ts(now))
