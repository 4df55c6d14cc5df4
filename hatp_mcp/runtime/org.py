"""Reading an organisation dir: `.well-known/human-card.json` and `cards/*.json`, the Directory-signed cards.

Everyone who checks people reads it the same way (the gateway, the coordinator, `hatp verify --org`, a gated
tool server), with the wire limits of `hatp_mcp.core.wire.load_json`. The gateway's private `contacts.json` is
read only by the gateway (`hatp_mcp.runtime.gateway.driver.load_org`), never here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from hatp_mcp.core.gateway.agents import AgentKeys
from hatp_mcp.core.gateway.directory import Directory, IgnoredCard
from hatp_mcp.core.gateway.passkey import RelyingParty
from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.model.wire import load_json
from hatp_mcp.errors import HatpError

__all__ = ["load_agents", "load_directory", "load_human_keys", "load_relying_party"]


def _object(path: Path) -> dict[str, Any]:
    value = load_json(path.read_bytes(), str(path))
    if not isinstance(value, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return value


def load_directory(org_dir: str | Path) -> tuple[Directory, list[IgnoredCard]]:
    """The organisation's Directory of verified cards, and the cards it ignored (each with its refusal).

    Raises OSError (a file cannot be read), ValueError (a document is not a JSON object) or HatpError (not JSON,
    over the wire limits, or HATP-CARD-3: an unusable well-known document)."""
    root = Path(org_dir)
    well_known = _object(root / ".well-known" / "human-card.json")
    cards = [_object(p) for p in sorted((root / "cards").glob("*.json"))]
    return Directory.load(well_known, cards)


def load_relying_party(org_dir: str | Path) -> RelyingParty | None:
    """The web inbox's WebAuthn relying party, `passkey: {"rpId", "origins"}` in the organisation's
    `gateway.json` (HATP-GW-68): what passkey decisions are checked against, by the gateway and offline alike.
    None when the organisation configures none (then no passkey decision can be checked, so none counts).
    Raises OSError, ValueError or HatpError (HATP-GW-65: a malformed `passkey` member)."""
    path = Path(org_dir) / "gateway.json"
    if not path.exists():
        return None
    raw = _object(path).get("passkey")
    if raw is None:
        return None
    rp_id, origins = (raw.get("rpId"), raw.get("origins")) if isinstance(raw, dict) else (None, None)
    if (
        not isinstance(rp_id, str)
        or not rp_id
        or not isinstance(origins, list)
        or not origins
        or not all(isinstance(o, str) and o.startswith(("https://", "http://localhost")) for o in origins)
    ):
        raise HatpError(
            "HATP-GW-65",
            "passkey is {rpId, origins}: the inbox's rpId and its exact origins (https, or http://localhost)",
            path="$.passkey",
            code="BAD_SETTINGS",
            fix='e.g. {"rpId": "approvals.acme.example", "origins": ["https://approvals.acme.example"]}',
        )
    return RelyingParty(rp_id, tuple(origins))


def load_human_keys(org_dir: str | Path) -> HumanKeys:
    """The decision keys on the organisation's Directory-signed cards (a card that does not verify is ignored).

    Raises like load_directory."""
    directory, _ignored = load_directory(org_dir)
    return HumanKeys.from_cards(directory.cards(), load_relying_party(org_dir))


def load_agents(org_dir: str | Path) -> tuple[AgentKeys, list[IgnoredCard]]:
    """The organisation's Directory-signed agent cards (`agents/*.json`; none when the dir has no `agents/`), and
    the cards it ignored (HATP-CARD-4). Raises like load_directory."""
    root = Path(org_dir)
    well_known = _object(root / ".well-known" / "human-card.json")
    cards = [_object(p) for p in sorted((root / "agents").glob("*.json"))]
    return AgentKeys.load(well_known, cards)
