"""The static plan checker: every rule of spec/validation.md over a HATP plan, or over a saga artifact. Pure.

`validate(plan, now)` runs the HATP-VAL checks over a parsed Plan and returns every violation (never the first
only); the coordinator calls it at begin. `validate_document(value, now)` takes an untrusted JSON value, detects
whether it is a HATP plan or an apology-protocol saga artifact, and reports schema violations only when it does
not match its schema. Money rules live in money_rules.py, the clock arithmetic in clockfit.py, saga artifacts in
saga.py (their rules in saga_rules.py; all in this package). This module must not read the clock or do IO: `now`
is an argument.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from pydantic import ValidationError

from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.plan import Plan, has_canonical_form
from hatp_mcp.core.model.when import when_words
from hatp_mcp.core.model.wire import error_path
from hatp_mcp.core.signing.canonical import CanonicalError
from hatp_mcp.core.validate.clockfit import ClockFit, call_bound, clock_fit, seconds_text
from hatp_mcp.core.validate.money_rules import (
    check_amounts,
    check_approval_amounts,
    check_mandate_spend,
    check_settles,
)
from hatp_mcp.core.validate.saga import validate_saga
from hatp_mcp.core.validate.violation import Check, Violation, schema_violations

__all__ = ["HATP_CHECKS", "Kind", "Report", "detect_kind", "plan_violations", "validate", "validate_document"]

Kind = Literal["hatp", "saga"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Report:
    """What `validate_document` found: the input's kind and every violation (empty: valid)."""

    kind: Kind
    violations: list[Violation]

    @property
    def ok(self) -> bool:
        return not self.violations

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "kind": self.kind, "violations": [v.to_dict() for v in self.violations]}


def _v(rule: str, path: str, message: str) -> Violation:
    return Violation(rule=rule, path=path, message=message)


def check_ids(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-2: branch ids and approval requirement ids are unique."""
    out: list[Violation] = []
    for what, ids in (
        ("branches", [b.branch_id for b in plan.branches]),
        ("approvals", [a.id for a in plan.approvals]),
    ):
        seen: dict[str, int] = {}
        field = "branchId" if what == "branches" else "id"
        for i, ident in enumerate(ids):
            if ident in seen:
                out.append(
                    _v(
                        "HATP-VAL-2",
                        f"{what}[{i}].{field}",
                        f'{what}[{i}] reuses the id "{ident}" of {what}[{seen[ident]}]: votes, receipts and `settles` '
                        f"name it, so it must be unique. Give {what}[{i}] its own {field}.",
                    )
                )
            else:
                seen[ident] = i
    return out


def check_one_final(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-3: at most one final branch (the last-resource commit)."""
    finals = [i for i, b in enumerate(plan.branches) if b.tier == "final"]
    if len(finals) <= 1:
        return []
    names = ", ".join(f'"{plan.branches[i].branch_id}" (branches[{i}])' for i in finals)
    return [
        _v(
            "HATP-VAL-3",
            f"branches[{i}].tier",
            f"{len(finals)} branches are final ({names}): only one irreversible commit can be the last resource; "
            f"if the second one fails after the first committed, nothing can undo the first. Make "
            f'"{plan.branches[i].branch_id}" a hold or compensate branch, or split the plan into two transactions.',
        )
        for i in finals[1:]
    ]


_TIER_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    # (python attribute, wire name) a tier requires
    "hold": (("lease_seconds", "leaseSeconds"),),
    "compensate": (("compensation", "compensation"), ("undo_window_seconds", "undoWindowSeconds")),
    "final": (),
}
_TIER_FORBIDS: dict[str, tuple[tuple[str, str], ...]] = {
    "hold": (("compensation", "compensation"), ("undo_window_seconds", "undoWindowSeconds")),
    "compensate": (("lease_seconds", "leaseSeconds"), ("hold_horizon_seconds", "holdHorizonSeconds")),
    "final": (
        ("compensation", "compensation"),
        ("undo_window_seconds", "undoWindowSeconds"),
        ("lease_seconds", "leaseSeconds"),
        ("hold_horizon_seconds", "holdHorizonSeconds"),
    ),
}
_TIER_WHY = {
    "hold": "a hold is released by abort, never undone, and the coordinator must know how long it lasts",
    "compensate": "a compensate branch is undone after commit, so it must say how and for how long",
    "final": "a final branch is irreversible: it has no undo and holds nothing",
}


def check_tiers(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-4: a hold declares its lease, a compensate branch its compensation and undo window, a final none."""
    out: list[Violation] = []
    for i, b in enumerate(plan.branches):
        why = _TIER_WHY[b.tier]
        for attr, wire in _TIER_FIELDS[b.tier]:
            if getattr(b, attr) is None:
                out.append(
                    _v(
                        "HATP-VAL-4",
                        f"branches[{i}].{wire}",
                        f'Branch "{b.branch_id}" is tier {b.tier} but declares no {wire}: {why}. Declare {wire} on '
                        f'"{b.branch_id}", or change its tier.',
                    )
                )
        for attr, wire in _TIER_FORBIDS[b.tier]:
            if getattr(b, attr) is not None:
                out.append(
                    _v(
                        "HATP-VAL-4",
                        f"branches[{i}].{wire}",
                        f'Branch "{b.branch_id}" is tier {b.tier} yet declares {wire}: {why}, so one of the two is '
                        f'wrong. Remove {wire} from "{b.branch_id}", or change its tier.',
                    )
                )
        lease, horizon = b.lease_seconds, b.hold_horizon_seconds
        if b.tier == "hold" and lease is not None and horizon is not None and lease > horizon:
            out.append(
                _v(
                    "HATP-VAL-4",
                    f"branches[{i}].holdHorizonSeconds",
                    f'Hold "{b.branch_id}" asks for a {lease}s lease but can be held at most {horizon}s '
                    f"(holdHorizonSeconds): the lease cannot outlive the horizon. Ask for leaseSeconds <= {horizon}.",
                )
            )
    return out


def _gap(later: datetime, earlier: datetime) -> str:
    """How far apart two times are, in words: two times in one minute read the same (`when_words`), their gap not."""
    seconds = int((later - earlier).total_seconds())
    for unit, size in (("days", 86400), ("h", 3600), ("min", 60)):
        if seconds >= 2 * size:
            return f"{seconds // size} {unit}"
    return f"{seconds}s"


def check_time(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-9: no expired mandate, no deadline already past, deadlines in a coherent order. Times in words
    (HATP-GW-97), "(N min ago)" from `now` where the violation is about now; a fix names the value to write as the
    plan's field takes it."""
    out: list[Violation] = []
    m = plan.mandate
    expires = m.expires_at if m is not None else None
    expires_t = parse_ts(expires) if expires is not None else None
    if expires_t is not None and expires_t <= now:
        out.append(
            _v(
                "HATP-VAL-9",
                "mandate.expiresAt",
                f"The mandate expired at {when_words(expires_t, now)}: the agent no longer has authority to "
                f"spend. Ask the principal for a new mandate.",
            )
        )
    # every deadline, in report order: deadlines.decideBy, deadlines.commitBy, then each approval's decideBy
    decide_by, commit_by = plan.deadlines.decide_by, plan.deadlines.commit_by
    commit_t = parse_ts(commit_by) if commit_by is not None else None
    stamps: list[tuple[str, str, datetime]] = []
    if decide_by is not None:
        stamps.append(("deadlines.decideBy", decide_by, parse_ts(decide_by)))
    if commit_by is not None and commit_t is not None:
        stamps.append(("deadlines.commitBy", commit_by, commit_t))
    stamps.extend(
        (f"approvals[{i}].decideBy", a.decide_by, parse_ts(a.decide_by))
        for i, a in enumerate(plan.approvals)
        if a.decide_by is not None
    )
    for path, ts, t in stamps:
        if t <= now:
            out.append(
                _v(
                    "HATP-VAL-9",
                    path,
                    f"{path} is {when_words(ts, now)}, already past: the transaction would abort before it "
                    f"began. Set a deadline in the future.",
                )
            )
    if commit_t is None:
        return out
    for path, ts, t in stamps:
        if path != "deadlines.commitBy" and t > commit_t:
            out.append(
                _v(
                    "HATP-VAL-9",
                    path,
                    f"{path} is {when_words(ts)}, {_gap(t, commit_t)} after deadlines.commitBy"
                    f" ({when_words(commit_t)}): a decision arriving then can no longer be committed. Move {path}"
                    f" before {commit_by}.",
                )
            )
    if expires_t is not None and commit_t > expires_t:
        out.append(
            _v(
                "HATP-VAL-9",
                "deadlines.commitBy",
                f"deadlines.commitBy is {when_words(commit_t)}, {_gap(commit_t, expires_t)} after the mandate"
                f" expires ({when_words(expires_t)}): the commit could run without authority. Set commitBy no later"
                f" than {expires}, or renew the mandate.",
            )
        )
    return out


def _approver_addresses(plan: Plan) -> list[tuple[int, int, str]]:
    """Every approver address of the plan, in order: (requirement index, chain index or -1 for its own address,
    address). Paths are written only for what a rule reports (`_approver_path`)."""
    out: list[tuple[int, int, str]] = []
    for i, a in enumerate(plan.approvals):
        out.append((i, -1, a.address))
        out.extend((i, j, c.address) for j, c in enumerate(a.chain))
    return out


def _approver_path(i: int, j: int) -> str:
    return f"approvals[{i}].address" if j < 0 else f"approvals[{i}].chain[{j}].address"


def check_requester(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-10: the requester's principal is never an approver of its own plan."""
    who = plan.requester.principal
    out: list[Violation] = []
    for i, j, address in _approver_addresses(plan):
        if address == who:
            path = _approver_path(i, j)
            out.append(
                _v(
                    "HATP-VAL-10",
                    path,
                    f'Approval "{plan.approvals[i].id}" routes to {who}, the principal the agent acts for: nobody '
                    f"approves their own request. Route {path} to someone else (a manager, a finance role).",
                )
            )
    return out


def check_approvers_are_humans(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-13: an approval requirement's address and every link of its chain is a human:// address."""
    out: list[Violation] = []
    for i, j, address in _approver_addresses(plan):
        if not address.startswith("human://"):
            path = _approver_path(i, j)
            out.append(
                _v(
                    "HATP-VAL-13",
                    path,
                    f'Approval "{plan.approvals[i].id}" routes to {address}, which is not a human:// address: only '
                    f"humans approve (an agent cannot approve, least of all its own plan). Route {path} to a "
                    "person, role or pool (human://ORG/NAME, human://ORG/role/NAME, human://ORG/pool/NAME).",
                )
            )
    return out


def _fit_advice(fit: ClockFit, mode: str) -> str:
    others = [m for m in fit.fits if m != mode]
    if others:
        return f"Mode {' or '.join(others)} would fit: set mode to {others[0]} (or auto)."
    return "No mode fits: " + _no_fit_fix(fit)


def _no_fit_fix(fit: ClockFit) -> str:
    missing = list(fit.prepare.missing) + [m for m in fit.human.missing if m not in fit.prepare.missing]
    if missing:
        return f"declare {', '.join(missing[:4])}{' and more' if len(missing) > 4 else ''}."
    return "shorten the calls or the approval chain, or ask for longer holds."


def _numbers(fit: ClockFit, mode: str) -> str:
    p, c, h = (seconds_text(x.seconds) for x in (fit.prepare, fit.commit, fit.human))
    formula = {
        "parallel": f"max(prepare {p}, human {h}) + commit {c}",
        "holds-first": f"prepare {p} + human {h} + commit {c}",
        "approval-first": f"prepare {p} + commit {c}",
    }[mode]
    return f"{formula} = {seconds_text(fit.worst[mode])}"


def _tightest(fit: ClockFit) -> str:
    return f'the shortest hold horizon, {fit.horizon}s on "{fit.tightest}"'


def check_clock_fit(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-11: the worst case before commit fits inside the shortest hold horizon, in the plan's mode."""
    fit = clock_fit(plan, now)
    if fit.horizon is None:
        return []
    if plan.mode == "auto":
        if fit.fits:
            return []
        idx = next(i for i, b in enumerate(plan.branches) if b.branch_id == fit.tightest)
        where = _tightest(fit)
        return [
            _v(
                "HATP-VAL-11",
                f"branches[{idx}].holdHorizonSeconds",
                f"No mode fits {where}: approval-first needs {_numbers(fit, 'approval-first')}, parallel needs "
                f"{_numbers(fit, 'parallel')}. The holds could expire before commit. {_no_fit_fix(fit)[0].upper()}"
                f"{_no_fit_fix(fit)[1:]}",
            )
        ]
    if plan.mode in fit.fits:
        return []
    return [
        _v(
            "HATP-VAL-11",
            "mode",
            f"Mode {plan.mode} does not fit {_tightest(fit)}: its worst case before commit is "
            f"{_numbers(fit, plan.mode)}. {_fit_advice(fit, plan.mode)}",
        )
    ]


def check_undo_windows(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-VAL-12: every compensate branch's undo window outlasts the whole commit phase."""
    commit = call_bound(plan)
    c = commit.seconds
    out: list[Violation] = []
    for i, b in enumerate(plan.branches):
        w = b.undo_window_seconds
        if b.tier != "compensate" or w is None:  # a missing window is HATP-VAL-4's
            continue
        if c is None:
            out.append(
                _v(
                    "HATP-VAL-12",
                    f"branches[{i}].undoWindowSeconds",
                    f'The undo of "{b.branch_id}" works for {w}s after its commit, but the commit phase is unbounded '
                    f"({', '.join(commit.missing)} absent): a later commit could fail after the undo expired. "
                    f"Declare maxDurationSeconds on every branch.",
                )
            )
        elif c > w:
            out.append(
                _v(
                    "HATP-VAL-12",
                    f"branches[{i}].undoWindowSeconds",
                    f'The undo of "{b.branch_id}" works for {w}s after its commit, but the commit phase can take '
                    f"{c}s (the sum of every branch's maxDurationSeconds): a later commit could fail after the undo "
                    f"expired. Ask for an undo window of at least {c}s, or shorten the calls.",
                )
            )
    return out


def check_canonical(plan: Plan, now: datetime) -> list[Violation]:
    """HATP-CANON-2: the plan has a canonical form, so it has a digest every party can compute and sign. A value
    the schema lets through in free-form `args` (a float, an integer beyond 2**53 - 1, a lone surrogate) would
    make begin fail and no vote could name the plan."""
    try:
        has_canonical_form(plan)
    except CanonicalError as exc:
        where = exc.path[2:] if exc.path.startswith("$.") else exc.path.lstrip("$") or "$"
        fix = exc.fix or "remove it"
        return [
            _v("HATP-CANON-2", where, f"{where}: {exc.reason}, so the plan has no digest. {fix[0].upper()}{fix[1:]}.")
        ]
    return []


# The HATP-VAL checks in the order they report. Schema (HATP-VAL-1) runs before these, in validate_document.
HATP_CHECKS: tuple[tuple[str, Check], ...] = (
    ("HATP-CANON-2", check_canonical),
    ("HATP-VAL-2", check_ids),
    ("HATP-VAL-3", check_one_final),
    ("HATP-VAL-4", check_tiers),
    ("HATP-VAL-5", check_amounts),
    ("HATP-VAL-6", check_settles),
    ("HATP-VAL-7", check_approval_amounts),
    ("HATP-VAL-8", check_mandate_spend),
    ("HATP-VAL-9", check_time),
    ("HATP-VAL-10", check_requester),
    ("HATP-VAL-11", check_clock_fit),
    ("HATP-VAL-12", check_undo_windows),
    ("HATP-VAL-13", check_approvers_are_humans),
)


def validate(plan: Plan, now: datetime) -> list[Violation]:
    """Every violation of the HATP-VAL rules by `plan` at `now` (empty: valid). Raises nothing."""
    out: list[Violation] = []
    for _rule, check in HATP_CHECKS:
        out.extend(check(plan, now))
    return out


def _member_of(doc: Any, loc: tuple[int | str, ...]) -> tuple[dict[str, Any], str, int] | None:
    """The object, member name and depth in `loc` of the deepest member of `loc` that `doc` has, when that is an
    object's member (never a list item: removing one would move the paths of the items after it)."""
    node: Any = doc
    found: tuple[dict[str, Any], str, int] | None = None
    for i, part in enumerate(loc):
        if isinstance(node, dict) and isinstance(part, str) and part in node:
            found = (node, part, i + 1)
            node = node[part]
        elif isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
            found = None
            node = node[part]
        else:
            break
    return found


def _covers(removed: str, path: str) -> bool:
    """Whether a violation at `path` is about the member at `removed` (at, inside or holding it), not the whole."""
    if path == "$":
        return False
    return any(a == b or a.startswith(b + ".") or a.startswith(b + "[") for a, b in ((path, removed), (removed, path)))


def plan_violations(value: Any, now: datetime, rounds: int = 4) -> list[Violation]:
    """HATP-VAL-14: every schema error and, where the plan parses far enough, every rule violation, in one round.

    A plan that fits its schema gets the rules (`validate`). One that does not is read again without the members
    the schema refuses, as long as each is an optional member of an object (a required one missing, or a bad list
    item, and the plan does not parse far enough: its schema errors alone); the rules then run on what is left,
    and their violations about a removed member (at, inside or around it) are left out: the schema error already
    names it. Raises nothing."""
    plan, errors = schema_violations(Plan, value)
    if isinstance(plan, Plan):
        return validate(plan, now)
    doc = copy.deepcopy(value)
    removed: list[str] = []
    for _ in range(rounds):
        try:
            plan = Plan.model_validate(doc)
            break
        except ValidationError as exc:
            for err in exc.errors(include_url=False):
                loc = tuple(err["loc"])
                member = _member_of(doc, loc) if err["type"] != "missing" else None
                if member is None:
                    return errors  # does not parse far enough for the rules to mean anything
                obj, name, depth = member
                obj.pop(name, None)
                removed.append(error_path(loc[:depth]))
        except (TypeError, ValueError):
            return errors
    if not isinstance(plan, Plan):
        return errors
    rules = [v for v in validate(plan, now) if not any(_covers(r, v.path) for r in removed)]
    return errors + rules


def detect_kind(value: Any) -> Kind | None:
    """`hatp` for a HATP plan, `saga` for an apology-protocol artifact, None when it is neither."""
    if not isinstance(value, dict):
        return None
    if "hatp" in value or "branches" in value or "txnId" in value:
        return "hatp"
    if "sagaId" in value or "steps" in value or "pivotIndex" in value:
        return "saga"
    return None


def validate_document(value: Any, now: datetime) -> Report:
    """Validate an untrusted JSON value of either kind. Raises ValueError when it is neither kind."""
    kind = detect_kind(value)
    if kind is None:
        raise ValueError(
            "neither a HATP plan (no hatp, txnId or branches member) nor a saga artifact (no sagaId, steps or "
            "pivotIndex member)"
        )
    if kind == "saga":
        return Report(kind="saga", violations=validate_saga(value, now))
    return Report(kind="hatp", violations=plan_violations(value, now))
