"""A server's signing key under its --data directory: loaded if present, created (mode 0600) on first start.

`DIR/key.jwk.json` holds the private JWK; `DIR/public.jwk.json` its public half, for whoever builds a keyring
(the demo, tests, `hatp mcp-config`). No protocol logic here.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from hatp_mcp.core.keys import SigningKey

__all__ = ["load_or_create_key", "public_jwk"]


def load_or_create_key(data: Path, roles: Iterable[str]) -> SigningKey:
    """HATP-MCP-8. Raises ValueError for a key file that is not a private Ed25519 JWK, OSError for IO."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / "key.jwk.json"
    if path.exists():
        key = SigningKey.from_jwk(json.loads(path.read_text()))
    else:
        key = SigningKey.generate(roles)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            json.dump(key.private_jwk(), f)
    (data / "public.jwk.json").write_text(json.dumps(key.public_jwk()))
    return key


def public_jwk(data: Path) -> dict[str, Any]:
    """The public key a server at `data` signs with (written on its first start)."""
    value: dict[str, Any] = json.loads((data / "public.jwk.json").read_text())
    return value
