"""Durable state behind small interfaces: SQLite by default (WAL, synchronous=FULL)."""
