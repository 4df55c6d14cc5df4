"""Asks beyond approve: choose (pick an option), form (fields checked against a JSON Schema) and text.

They are routed like approvals (same Directory, same separation of duties) and the first fitting answer closes
the ask. An answer that does not fit the question is refused here, before anything could sign it. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from hatp_mcp.core.gateway.ask_ids import check_question_id
from hatp_mcp.core.gateway.directory import Criteria, Directory
from hatp_mcp.core.gateway.machine import (
    AskState,
    Event,
    asked_seat,
    open_routed,
    refuse_if_closed,
    route_seats,
    state_of,
    transition,
)
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.evidence import Checked, HumanDecisionProof, PasskeyAssertion
from hatp_mcp.core.model.gateway import AgentText, Ask, AskRecord, Option
from hatp_mcp.core.signing.canonical import CanonicalError, canonical, digest
from hatp_mcp.core.signing.keys import unsigned
from hatp_mcp.errors import BrokenInvariant, HatpError

__all__ = ["answer", "ask_digest", "check_fits", "open_question"]


def _json_schema() -> tuple[Any, Any]:
    """jsonschema's Draft 2020-12 validator and its SchemaError, imported at the first form question: only those
    need it, and every check of a record imports this module (a record's approvals name their asks)."""
    from jsonschema import Draft202012Validator  # type: ignore[import-untyped]
    from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]

    return Draft202012Validator, SchemaError


def ask_digest(ask: Ask) -> str:
    """The digest an Answer names: the Ask's wire form without its signature."""
    return digest(unsigned(ask.wire()))


def open_question(
    *,
    ask_id: str,
    kind: str,
    address: str,
    question: str,
    directory: Directory,
    gateway: str,
    now: datetime,
    decide_by: datetime | None = None,
    options: list[Option] | None = None,
    form_schema: dict[str, Any] | None = None,
    max_length: int | None = None,
    requester: str | None = None,
    txn_id: str | None = None,
    plan_digest: str | None = None,
    default_window: timedelta = timedelta(hours=24),
    open_asks: Mapping[str, int] | None = None,
) -> AskRecord:
    """Route a choose / form / text ask. The question is agent-written and labelled so. `open_asks`: the asks the
    gateway has open for each person now, counted toward capacity and load (HATP-GW-9).

    Raises HatpError HATP-ASK-1 (a malformed question: unknown kind, choose without options, form without a
    valid JSON Schema), HATP-ASK-7 (an id in the approvals' namespaces) and HATP-ADDR-1..4 (address).
    """
    check_question_id(ask_id)
    if kind not in ("choose", "form", "text"):
        raise HatpError("HATP-ASK-1", f"ask kind {kind!r} is not choose, form or text", path="$.kind")
    if kind == "choose" and len(options or []) < 1:
        raise HatpError("HATP-ASK-1", "a choose ask needs at least one option", path="$.options", fix="list options")
    if kind == "choose" and len({o.id for o in options or []}) != len(options or []):
        raise HatpError("HATP-ASK-1", "option ids must be distinct", path="$.options")
    if kind == "form":
        if form_schema is None:
            raise HatpError("HATP-ASK-1", "a form ask needs a JSON Schema", path="$.formSchema")
        validator, schema_error = _json_schema()
        try:
            validator.check_schema(form_schema)
        except schema_error as exc:
            raise HatpError(
                "HATP-ASK-1", f"formSchema is not a JSON Schema: {exc.message}", path="$.formSchema"
            ) from exc
    deadline = decide_by or now + default_window
    criteria = Criteria(requester=requester, decide_by=deadline, open_asks=dict(open_asks or {}))
    seats, quorum = route_seats(directory, address, criteria, now, "$.address")
    ask = Ask(
        ask_id=ask_id,
        kind=kind,  # type: ignore[arg-type]
        txn_id=txn_id,
        plan_digest=plan_digest,
        address=address,
        requester=requester,
        question=AgentText(text=question),
        options=options or [],
        form_schema=form_schema,
        max_length=max_length,
        decide_by=format_ts(deadline),
        gateway=gateway,
        issued_at=format_ts(now),
    )
    # One answer closes a question: quorum 1 of however many the address asked for.
    return open_routed(ask, seats, (1, quorum[1]), Checked(status="absent"), now, directory.names())


def check_fits(ask: Ask, value: Any) -> None:
    """Refuse an answer that does not fit the question ask (before anything signs it: the inbox calls this before
    it issues a passkey challenge, HATP-GW-80). Raises HatpError HATP-ASK-2/3/4/8 (code ANSWER_DOES_NOT_FIT)."""
    try:  # HATP-ASK-8: JSON Schema counts 1.0 and 2**64 as integers; the signature's canonical form holds neither
        canonical(value)
    except CanonicalError as exc:
        raise HatpError(
            "HATP-ASK-8",
            f"the answer has no canonical JSON form to sign: {exc.reason}",
            path="$.value" + exc.path.removeprefix("$"),
            fix=exc.fix or "answer with integers within +-(2**53 - 1) and text; never a float",
            code="ANSWER_DOES_NOT_FIT",
        ) from exc
    if ask.kind == "choose":
        ids = [o.id for o in ask.options]
        if not isinstance(value, str) or value not in ids:
            raise HatpError(
                "HATP-ASK-2",
                f"{value!r} is not one of the options {ids}",
                path="$.value",
                fix="answer with an option id",
                code="ANSWER_DOES_NOT_FIT",
            )
    elif ask.kind == "form":
        if not isinstance(value, dict):
            raise HatpError(
                "HATP-ASK-3", "a form answer is a JSON object of fields", path="$.value", code="ANSWER_DOES_NOT_FIT"
            )
        validator, _ = _json_schema()
        errors = sorted(validator(ask.form_schema or {}).iter_errors(value), key=lambda e: list(e.path))
        if errors:
            first = errors[0]
            where = "$.value" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.path)
            raise HatpError(
                "HATP-ASK-3",
                f"the form does not fit its schema: {first.message}",
                path=where,
                fix="fill the fields as the schema says",
                code="ANSWER_DOES_NOT_FIT",
            )
    else:
        limit = ask.max_length or 10_000
        if not isinstance(value, str) or not value.strip() or len(value) > limit:
            raise HatpError(
                "HATP-ASK-4",
                f"a text answer is a non-empty string of at most {limit} characters",
                path="$.value",
                code="ANSWER_DOES_NOT_FIT",
            )


def answer(
    rec: AskRecord,
    human: str,
    value: Any,
    now: datetime,
    via: str = "inbox",
    proof: HumanDecisionProof | None = None,
    passkey: PasskeyAssertion | None = None,
    names: Mapping[str, str] | None = None,
) -> AskRecord:
    """Record an asked person's answer to a question ask (`proof` or `passkey`: their verified signed decision or
    passkey assertion, kept for the Answer; `names`: display names for the refusals' words, HATP-GW-97). Raises
    HatpError: HATP-ASK-6 (an approval ask), HATP-ASK-2/3/4 (the answer does not fit), HATP-GW-12 (after the
    deadline), HATP-GW-5/6/14 (who)."""
    if rec.ask.kind == "approve":
        raise HatpError("HATP-ASK-6", f"ask {rec.ask.ask_id} is an approval; approve or reject it", path="$.kind")
    refuse_if_closed(rec, now, human, names)
    state = transition(state_of(rec), Event.ANSWER)
    i, seat = asked_seat(rec, human, names)
    check_fits(rec.ask, value)
    seats = list(rec.seats)
    seats[i] = seat.model_copy(
        update={"status": "decided", "decision": "answer", "decided_at": format_ts(now), "via": via}
    )
    if state is not AskState.ANSWERED:
        raise BrokenInvariant(f"an answer moved ask {rec.ask.ask_id} to {state.value}, not answered")
    return rec.model_copy(
        update={
            "state": state.value,
            "seats": seats,
            "answer_value": value,
            "answered_by": human,
            "answer_proof": proof,
            "answer_passkey": passkey,
            "closed_at": format_ts(now),
        }
    )
