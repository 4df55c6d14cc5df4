"""Small files that must never be seen half written: keys and trust-on-first-use pins; and reading a JSON file
the way every other input is read (`read_json_file`: the wire limits of core/model/wire.py load_json).

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
from typing import Any

from hatp_mcp.core.model.wire import load_json
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import HatpError

__all__ = ["create_file", "load_or_create_key", "read_json_file", "replace_file"]


def read_json_file(path: Path) -> Any:
    """The JSON value in `path`, read by the one loader (HATP-OBJ-1/2/4: size, depth, duplicates, numbers), so a
    hostile file is refused with its rule like any other input, never a RecursionError. Raises ValueError naming
    the rule and the file, OSError for IO."""
    try:
        return load_json(path.read_bytes(), str(path))
    except HatpError as exc:
        raise ValueError(f"{exc.rule}: {exc.reason}") from exc


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
    to `DATA/public.jwk.json` when that is absent (HATP-MCP-8). A key is made once and kept: neither file is ever
    rewritten (HATP-MCP-34), so a copy an operator pinned stays what the server signs with.

    Raises ValueError for a key file that is not a private Ed25519 JWK, or a `public.jwk.json` that is not its
    public half (HATP-MCP-34: someone replaced one of the two); OSError for IO."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / "key.jwk.json"
    if not path.exists():
        new = SigningKey.generate(roles)
        create_file(path, json.dumps(new.private_jwk()), 0o600)  # never half written; a racing start wins alike
    key = SigningKey.from_jwk(read_json_file(path))
    public = data / "public.jwk.json"
    if create_file(public, json.dumps(key.public_jwk()), 0o644):
        return key
    try:
        kept: object = read_json_file(public)
    except ValueError:
        kept = None
    if not isinstance(kept, dict) or (kept.get("kid"), kept.get("x")) != (key.kid, key.public_jwk()["x"]):
        raise ValueError(
            f"HATP-MCP-34: {public} is not the public half of {path} (key {key.kid}); a server's key is made once "
            "and kept, so one of the two was replaced: restore the pair, or move both away to make a new key "
            "(and pin the new public key again)"
        )
    return key
