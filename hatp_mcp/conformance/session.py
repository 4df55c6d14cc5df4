"""One conformance run's session: the MCP client, the runner's coordinator identity, the report being written,
and the plumbing every check uses (record a result, sign a request as the runner, send it, read evidence)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

from mcp import Client

from hatp_mcp.conformance.exchange import Answer, exchange
from hatp_mcp.conformance.report import CheckResult, Report
from hatp_mcp.conformance.target import Identity
from hatp_mcp.core.participant.coordinator_auth import authorize
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry, SignatureError, SigningKey
from hatp_mcp.core.signing.models import verify_raw
from hatp_mcp.errors import HatpError

__all__ = ["Clock", "Session"]

Clock = Callable[[], datetime]


class Session:
    def __init__(self, client: Client, identity: Identity, report: Report, now: Clock, answer_seconds: float) -> None:
        self.client = client
        self.identity = identity
        self.report = report
        self.now = now
        self.answer_seconds = answer_seconds
        self.run_id = uuid.uuid4().hex[:10]
        self.serial = 0
        self.keyring = Keyring()  # the keys the server advertised (HATP-MCP-1)

    def next_txn_id(self) -> str:
        self.serial += 1
        return f"conf-{self.run_id}-{self.serial}"

    def check(self, rule: str, name: str, sent: str, expected: str, got: str, passed: bool) -> bool:
        self.report.add(CheckResult(rule, name, sent, expected, got, "pass" if passed else "fail"))
        return passed

    def skip(self, rule: str, name: str, why: str) -> None:
        self.report.add(CheckResult(rule, name, "nothing", "-", why, "skipped"))

    def sign(
        self, method: str, params: dict[str, Any], *, key: SigningKey | None = None, at: datetime | None = None
    ) -> dict[str, Any]:
        """`params` with the runner's auth for `method` (or one signed by `key`, or issued `at`)."""
        return authorize(method, params, key or self.identity.key, self.identity.coordinator, at or self.now())

    async def send(self, method: str, params: dict[str, Any]) -> Answer:
        return await exchange(self.client, method, params, self.answer_seconds)

    def learn_keys(self, advertised: object) -> list[str]:
        """Add the advertised JWKs to the keyring; the problems found (none advertised, one not a JWK)."""
        problems = []
        for jwk in advertised if isinstance(advertised, list) else []:
            try:
                self.keyring.add(PublicKeyEntry.from_jwk(dict(jwk)))
            except (ValueError, TypeError, HatpError) as exc:
                problems.append(f"an advertised key is not an Ed25519 JWK: {exc}")
        if len(self.keyring) == 0:
            problems.append("no keys advertised")
        return problems

    def signature_problem(self, obj: object, role: str, path: str) -> str | None:
        """Why `obj` is not signed by an advertised key allowed to sign as `role`, or None."""
        if not isinstance(obj, dict):
            return f"no object at {path}"
        try:
            verify_raw(obj, self.keyring, role, path)
        except SignatureError as exc:
            return f"{path} signature: {exc.rule}: {exc.reason}"
        return None
