"""A server's signing key under its --data directory: loaded if present, created (mode 0600) on first start.

`DIR/key.jwk.json` holds the private JWK; `DIR/public.jwk.json` its public half, for whoever builds a keyring
(the demo, tests, `hatp mcp-config`). No protocol logic here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hatp_mcp.store.files import load_or_create_key

__all__ = ["load_or_create_key", "public_jwk"]


def public_jwk(data: Path) -> dict[str, Any]:
    """The public key a server at `data` signs with (written on its first start)."""
    value: dict[str, Any] = json.loads((data / "public.jwk.json").read_text())
    return value
