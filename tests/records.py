"""Helpers for record tests: re-chain a record's events as a coordinator with its key would (a forger holding the
coordinator's key), and pick events. Test data, no IO."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hatp_mcp.core.model.plan import Plan
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.core.txn.record import RecordChain


def rechain(record: dict[str, Any], events: Sequence[dict[str, Any]], key: SigningKey) -> dict[str, Any]:
    """A record of `events` (bodies and evidence as given), chained and signed again with `key`: every sequence
    number, link and coordinator signature is valid, so only the outcome rules can tell what is missing."""
    plan = Plan.model_validate(record["plan"])
    chain = RecordChain(plan, key, str(record["events"][0]["author"]))
    for e in events:
        if e["event"] == "record.closed":
            extra = {k: v for k, v in e["body"].items() if k not in ("outcome", "eventCount")}
            chain.close(e["at"], e["body"]["outcome"], extra)
        else:
            chain.append(e["event"], e["at"], e["body"], e.get("evidence"), e["author"])
    return chain.record()


def keep(record: dict[str, Any], wanted: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
    return [e for e in record["events"] if wanted(e)]


def about(e: dict[str, Any]) -> Any:
    """The branch or requirement an event is about."""
    return e["body"].get("branchId", e["body"].get("requirementId"))


def index(record: dict[str, Any], event: str, subject: str | None = None) -> int:
    """The index of the first `event` (about `subject`)."""
    for i, e in enumerate(record["events"]):
        if e["event"] == event and (subject is None or about(e) == subject):
            return i
    raise KeyError((event, subject))
