"""A server's signing key under its --data directory: loaded if present, created (mode 0600) on first start.

`DIR/key.jwk.json` holds the private JWK; `DIR/public.jwk.json` its public half, for whoever builds a keyring
(the demo, tests, `hatp mcp-config`). No protocol logic here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hatp_mcp.core.evidence.keys import SigningKey
from hatp_mcp.store.files import create_file, replace_file

__all__ = ["load_or_create_key", "public_jwk"]


def load_or_create_key(data: Path, roles: Iterable[str]) -> SigningKey:
    """HATP-MCP-8. Raises ValueError for a key file that is not a private Ed25519 JWK, OSError for IO."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / "key.jwk.json"
    if not path.exists():
        new = SigningKey.generate(roles)
        create_file(path, json.dumps(new.private_jwk()), 0o600)  # never half written; a racing start wins alike
    key = SigningKey.from_jwk(json.loads(path.read_text()))
    replace_file(data / "public.jwk.json", json.dumps(key.public_jwk()))
    return key


def public_jwk(data: Path) -> dict[str, Any]:
    """The public key a server at `data` signs with (written on its first start)."""
    value: dict[str, Any] = json.loads((data / "public.jwk.json").read_text())
    return value
