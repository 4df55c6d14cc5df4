"""Small files that must never be seen half written: keys and trust-on-first-use pins.

A file is written beside its target under a temporary name, flushed to disk, then put in place in one step
(`os.link` for create-only, `os.replace` to overwrite), and the directory is flushed too. A process that stops
at any point leaves either the old file, the new file, or no file; never a truncated one that a restart would
read as a corrupt key.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

from hatp_mcp.core.evidence.keys import SigningKey

__all__ = ["create_file", "load_or_create_key", "replace_file"]


def _written(path: Path, text: str, mode: int) -> Path:
    """A flushed temporary file holding `text`, in `path`'s directory (so the final step stays one filesystem)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    return Path(name)


def _sync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create_file(path: Path, text: str, mode: int = 0o600) -> bool:
    """Create `path` holding `text` unless it exists. True when this call created it, False when a file was
    already there (it is left untouched: the first writer wins). Raises OSError for IO failures."""
    tmp = _written(path, text, mode)
    try:
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        tmp.unlink(missing_ok=True)
    _sync_dir(path.parent)
    return True


def replace_file(path: Path, text: str, mode: int = 0o644) -> None:
    """Write `path` (creating or replacing it) in one step. Raises OSError for IO failures."""
    tmp = _written(path, text, mode)
    try:
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _sync_dir(path.parent)


def load_or_create_key(data: Path, roles: Iterable[str]) -> SigningKey:
    """A server's signing key `DATA/key.jwk.json`, created (mode 0600) on first use, and its public half written
    to `DATA/public.jwk.json` (HATP-MCP-8). Raises ValueError for a key file that is not a private Ed25519 JWK,
    OSError for IO."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / "key.jwk.json"
    if not path.exists():
        new = SigningKey.generate(roles)
        create_file(path, json.dumps(new.private_jwk()), 0o600)  # never half written; a racing start wins alike
    key = SigningKey.from_jwk(json.loads(path.read_text()))
    replace_file(data / "public.jwk.json", json.dumps(key.public_jwk()))
    return key
