"""A PostgreSQL URL as a message may show it: scheme, host, port and database, never the user's password.

Pure (urllib only), so a message about a store can be written also when psycopg is not installed."""

from __future__ import annotations

from urllib.parse import urlsplit

__all__ = ["shown"]


def shown(url: str) -> str:
    """`postgresql://HOST:PORT/DATABASE` of a libpq URL (the user and password left out)."""
    parts = urlsplit(url)
    port = f":{parts.port}" if parts.port is not None else ""
    return f"{parts.scheme}://{parts.hostname or ''}{port}{parts.path}"
