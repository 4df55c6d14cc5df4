"""The gateway's delivery queue on PostgreSQL: the `DeliveryQueue` of hatp_mcp.store.deliveries, in the gateway's
database, so gateway processes on any machine share one queue and one claim per attempt (spec/gateway.md
HATP-GW-78/79).

A due delivery is claimed in one statement, ``UPDATE ... FROM (SELECT ... FOR UPDATE SKIP LOCKED)``: processes
claiming at once each take rows nobody else is taking, never both one row, and never wait for each other. Leases run
on the server's clock (`clock_timestamp()`). Every call is one database transaction committed before it returns
(hatp_mcp.store.postgresql.pools.run tries a call again whole when the connection was lost before its commit).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, TypeVar

from psycopg import Connection
from psycopg_pool import ConnectionPool

from hatp_mcp.core.gateway.notice import Notice, NoticeKind
from hatp_mcp.store.deliveries import COLUMNS, Claim, Delivery, claim_lost, delivery_row
from hatp_mcp.store.postgresql.pools import open_pool, run
from hatp_mcp.store.schema import Schema
from hatp_mcp.store.sqlite import json_text

__all__ = ["SCHEMA", "PostgresDeliveryQueue"]

SCHEMA = Schema(
    "gateway.deliveries",
    (
        (
            "CREATE TABLE deliveries (key TEXT PRIMARY KEY, ask_id TEXT NOT NULL, human TEXT NOT NULL,"
            " kind TEXT NOT NULL, notice TEXT NOT NULL, state TEXT NOT NULL, channel INTEGER NOT NULL DEFAULT 0,"
            " attempt INTEGER NOT NULL DEFAULT 0, next_at TEXT NOT NULL, sent_via TEXT,"
            " failures TEXT NOT NULL DEFAULT '[]', seq BIGINT GENERATED ALWAYS AS IDENTITY,"
            " claim_owner TEXT, claim_epoch BIGINT NOT NULL DEFAULT 0, claim_until TIMESTAMPTZ)",
            "CREATE INDEX deliveries_by_state ON deliveries (state, next_at)",
            "CREATE INDEX deliveries_by_ask ON deliveries (ask_id)",
        ),
    ),
)

Row = tuple[Any, ...]
T = TypeVar("T")
_SELECT = f"SELECT {COLUMNS} FROM deliveries"


class PostgresDeliveryQueue:
    """Raises psycopg errors (OperationalError when the server is unreachable); `close()` it."""

    def __init__(self, url: str) -> None:
        self._pool: ConnectionPool[Connection[Row]] = open_pool(url, SCHEMA)

    def close(self) -> None:
        self._pool.close()

    def _write(self, work: Callable[[Connection[Row]], T]) -> T:
        return run(self._pool, work, idempotent=False)

    def _read(self, work: Callable[[Connection[Row]], T]) -> T:
        return run(self._pool, work, idempotent=True)

    def enqueue(self, notice: Notice, at: str, state: str = "queued") -> bool:
        args = (notice.key, notice.ask_id, notice.human, notice.kind, json_text(notice.wire()), state, at)
        row = self._write(
            lambda conn: conn.execute(
                "INSERT INTO deliveries (key, ask_id, human, kind, notice, state, next_at)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING RETURNING key",
                args,
            ).fetchone()
        )
        return row is not None

    def get(self, key: str) -> Delivery | None:
        row = self._read(lambda conn: conn.execute(_SELECT + " WHERE key = %s", (key,)).fetchone())
        return delivery_row(row) if row else None

    def due(self, now: str) -> list[Delivery]:
        rows = self._read(
            lambda conn: conn.execute(
                _SELECT + " WHERE state = 'queued' AND next_at <= %s ORDER BY next_at, key", (now,)
            ).fetchall()
        )
        return [delivery_row(r) for r in rows]

    def claim_due(self, now: str, owner: str, lease_seconds: float, limit: int = 64) -> list[Claim]:
        """See DeliveryQueue.claim_due: one UPDATE over the rows a `FOR UPDATE SKIP LOCKED` select found free."""
        if lease_seconds < 0:
            raise ValueError(f"lease_seconds must be >= 0, not {lease_seconds}")
        returned = ", ".join(f"d.{c.strip()}" for c in COLUMNS.split(","))
        rows = self._write(
            lambda conn: conn.execute(
                "UPDATE deliveries d SET claim_owner = %s, claim_epoch = d.claim_epoch + 1,"
                " claim_until = clock_timestamp() + make_interval(secs => %s)"
                " FROM (SELECT key FROM deliveries WHERE state = 'queued' AND next_at <= %s"
                " AND (claim_owner IS NULL OR claim_until <= clock_timestamp())"
                " ORDER BY next_at, key LIMIT %s FOR UPDATE SKIP LOCKED) AS free"
                f" WHERE d.key = free.key RETURNING {returned}, d.claim_epoch",
                (owner, lease_seconds, now, limit),
            ).fetchall()
        )
        claims = [Claim(delivery_row(tuple(r[:-1])), owner, int(r[-1])) for r in rows]
        return sorted(claims, key=lambda c: (c.delivery.next_at, c.key))

    def next_due(self) -> str | None:
        row = self._read(
            lambda conn: conn.execute("SELECT MIN(next_at) FROM deliveries WHERE state = 'queued'").fetchone()
        )
        return str(row[0]) if row and row[0] is not None else None

    def kinds_for(self, ask_id: str) -> set[tuple[str, NoticeKind]]:
        rows = self._read(
            lambda conn: conn.execute("SELECT human, kind FROM deliveries WHERE ask_id = %s", (ask_id,)).fetchall()
        )
        return {(str(r[0]), r[1]) for r in rows}

    def open_asks(self) -> list[str]:
        rows = self._read(
            lambda conn: conn.execute(
                "SELECT DISTINCT ask_id FROM deliveries d WHERE kind = 'ask' AND NOT EXISTS"
                " (SELECT 1 FROM deliveries c WHERE c.ask_id = d.ask_id AND c.human = d.human AND c.kind = 'closed')"
                " ORDER BY ask_id"
            ).fetchall()
        )
        return [str(r[0]) for r in rows]

    def settle(
        self,
        claim: Claim,
        *,
        state: str,
        channel: int,
        attempt: int,
        next_at: str,
        sent_via: str | None = None,
        failures: list[str] | None = None,
    ) -> None:
        """See DeliveryQueue.settle. Raises HatpError HATP-GW-79 (CLAIM_LOST)."""
        args = (state, channel, attempt, next_at, sent_via, json.dumps(failures or []), claim.key, claim.owner)

        def work(conn: Connection[Row]) -> None:
            done = conn.execute(
                "UPDATE deliveries SET state = %s, channel = %s, attempt = %s, next_at = %s, sent_via = %s,"
                " failures = %s, claim_owner = NULL, claim_until = NULL"
                " WHERE key = %s AND claim_owner = %s AND claim_epoch = %s RETURNING key",
                (*args, claim.epoch),
            ).fetchone()
            if done is None:
                row = conn.execute(
                    "SELECT claim_owner, claim_epoch FROM deliveries WHERE key = %s", (claim.key,)
                ).fetchone()
                raise claim_lost(claim, row[0] if row else None, int(row[1]) if row else None)

        self._write(work)

    def all(self) -> list[Delivery]:
        rows = self._read(lambda conn: conn.execute(_SELECT + " ORDER BY seq").fetchall())
        return [delivery_row(r) for r in rows]
