"""Scripted people of the TEST-ONLY acme.com organisation (spec/fixtures/org/): each signs their own decision with
their own key, exactly as a person's client would, and hands the proof to the Human Gateway's `decide` tool.

For demos and tests only: the private keys are in the repository (their seeds are in generate.py). This module
never decides for anyone without their key, and it never names a person to the gateway except inside a signed
proof (spec/gateway.md, HATP-GW-19..26).
"""

from __future__ import annotations

import json
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from mcp import Client

from hatp_mcp.core.gateway.proof import sign_decision
from hatp_mcp.core.signing.keys import SigningKey

__all__ = ["ORG", "GatewayRefused", "decide_as", "human_key", "inbox_key_args", "key_file"]

ORG = Path(__file__).resolve().parents[1] / "spec" / "fixtures" / "org"


def _name(human: str) -> str:
    return human.rsplit("/", 1)[-1]


def key_file(human: str, org: Path = ORG) -> Path:
    """The TEST-ONLY private JWK of `human` (an address like human://acme.com/bob, or just bob)."""
    return org / "test-only-keys" / "humans" / f"{_name(human)}.private.jwk.json"


def human_key(human: str, org: Path = ORG) -> SigningKey:
    """The TEST-ONLY decision key of `human` (the ed25519 key on their card). Raises OSError or ValueError."""
    return SigningKey.from_jwk(json.loads(key_file(human, org).read_text()))


def inbox_key_args(human: str, org: Path = ORG) -> list[str]:
    """`--as HUMAN --key FILE` for `hatp inbox approve|reject|decline|answer`."""
    address = human if "://" in human else f"human://acme.com/{human}"
    return ["--as", address, "--key", str(key_file(human, org))]


class GatewayRefused(RuntimeError):
    """The gateway's tool refused (a tool result with isError): `refusal` is its {rule, code, reason, ...}."""

    def __init__(self, text: str, refusal: dict[str, Any]) -> None:
        super().__init__(f"the gateway refused: {text}")
        self.refusal = refusal


def _json(result: Any) -> Any:
    if result.is_error:
        refusal = (result.structured_content or {}).get("refusal", {})
        raise GatewayRefused(result.content[0].text, refusal if isinstance(refusal, dict) else {})
    return json.loads(result.content[0].text)


async def decide_as(
    gateway: Client,
    ask_id: str,
    human: str,
    action: str,
    *,
    value: Any = None,
    now: datetime | None = None,
    org: Path = ORG,
) -> dict[str, Any]:
    """`human` approves, rejects, declines or answers `ask_id` through the gateway's tools: show the ask, sign
    its `subjectDigest` with their own key (dated `now`, default the system clock: pass the gateway's pinned time
    when it runs on a fake clock), and call `decide` with the proof. Returns the tool's result (the ask's view).

    Raises GatewayRefused with the gateway's refusal (it names the rule)."""
    shown = _json(await gateway.call_tool("show_ask", {"ask_id": ask_id}))
    address = human if "://" in human else f"human://acme.com/{human}"
    proof = sign_decision(
        human_key(human, org),
        ask_id,
        shown["subjectDigest"],
        address,
        action,
        now or datetime.now(UTC),
        nonce=secrets.token_urlsafe(18),
        value=value,
        terms=shown.get("terms"),
    )
    result: dict[str, Any] = _json(await gateway.call_tool("decide", {"ask_id": ask_id, "proof": proof.wire()}))
    return result
