"""Durable state behind one Protocol per store: SQLite by default (WAL, synchronous=FULL), PostgreSQL in
`postgresql/` (imported only when a postgresql:// store is opened, `url.py`). Schemas are versioned (`schema.py`).
Stores keep what the runtime decided; they decide nothing and know no transport."""
