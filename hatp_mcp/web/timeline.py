"""A finished transaction as a timeline (spec/gateway.md HATP-GW-75, HATP-GW-91): a sequence diagram drawn
server-side as SVG, and the same steps as a list, inside one HTML page, from the record itself and the result of
checking it (`verify_record`'s problems, the same checks `hatp verify` makes).

Lifelines: the people who decided (by the display name on their card when the caller knows it), the gateway, the
coordinator, each participant. One row per record event and one per human decision inside an approval, each with
its own time, in the order things happened (`timeline_steps`): the record's events in the chain's order, and each
person's decision where it happened, before the gateway's vote and approval that carry it, never after an event
that is later than it. Each event carries its check result: ✓, or ✗ with the rule that failed. Every value is
escaped; agent-written text is not drawn at all (the plan's summary appears once, labelled).

Two ways out: a file (`hatp timeline`: no script, no stylesheet, nothing fetched; times in UTC) and the inbox's
page (`inbox=True`: the inbox's own stylesheet and script from its own origin, which show each time in the
approver's local zone, the UTC time kept in a title). Pure: takes the record and the problems, returns a string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from html import escape
from typing import Any

from hatp_mcp.core.model.base import parse_ts

__all__ = ["Step", "render_timeline", "timeline_steps"]

_W, _ROW, _TOP, _LEFT = 170, 30, 70, 210


def _e(value: object) -> str:
    """`value` as HTML text: escaped, and a lone surrogate (not Unicode text, so no page could carry it) written
    as its escape, so any record can be drawn."""
    return escape(str(value), quote=True).encode("utf-8", "backslashreplace").decode("utf-8")


def _obj(value: object) -> Mapping[str, Any]:
    """`value` when it is a JSON object, else an empty one: the page draws any record, whatever its shape (a
    record that is not one is drawn with the problems `verify_record` found in it)."""
    return value if isinstance(value, dict) else {}


def _objs(value: object) -> list[Mapping[str, Any]]:
    """The items of a JSON array as objects (an item that is not one drawn empty, so indices stay the record's)."""
    return [_obj(item) for item in value] if isinstance(value, list) else []


def _time(value: object) -> datetime | None:
    """A wire timestamp as a time, or None for anything else (a record of any shape is drawn)."""
    try:
        return parse_ts(value) if isinstance(value, str) else None
    except ValueError:
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One row of the timeline: a record event (`index` its place in the record) or a person's decision inside
    the approval at `index` (`decision` set)."""

    index: int
    at: str | None
    author: str
    decision: Mapping[str, Any] | None = None


def _decided_at(d: Mapping[str, Any]) -> object:
    """When the person decided: the gateway's `decidedAt`, else the time their own proof or passkey states."""
    for source in (d, _obj(d.get("passkey")), _obj(d.get("proof"))):
        for key in ("decidedAt", "issuedAt"):
            if _time(source.get(key)) is not None:
                return source.get(key)
    return None


def _answers(event: Mapping[str, Any], requirement: object, gateway: str) -> bool:
    """Whether `event` follows from the people's decisions on `requirement`: the gateway's vote on it, or the
    approval itself."""
    body = _obj(event.get("body"))
    if event.get("event") == "approval":
        return body.get("requirementId") == requirement
    return event.get("event") == "vote" and event.get("author") == gateway and body.get("branchId") == requirement


def _key(when: datetime | None, n: int) -> tuple[int, datetime | None, int]:
    return (0, when, n) if when is not None else (1, None, n)


def timeline_steps(record: Mapping[str, Any]) -> list[Step]:
    """HATP-GW-91: the record's events and the people's decisions, in the order things happened. Events keep the
    chain's order (it is causal: each names the one before). A decision goes before the first event that follows
    from it (the gateway's vote on that requirement, or the approval that carries it), and before any earlier event
    whose own time is later than the decision's; the decisions of one approval in the order of their times."""
    events: Sequence[Mapping[str, Any]] = _objs(record.get("events"))
    times = [_time(e.get("at")) for e in events]
    before: dict[int, list[Step]] = {}
    for k, event in enumerate(events):
        if event.get("event") != "approval":
            continue
        requirement = _obj(event.get("body")).get("requirementId")
        gateway = str(event.get("author"))
        anchor = next(j for j in range(k + 1) if j == k or _answers(events[j], requirement, gateway))
        decisions = _objs(_obj(event.get("evidence")).get("decisions"))
        stated = [(_decided_at(d), d) for d in decisions]
        timed = sorted(range(len(stated)), key=lambda n: _key(_time(stated[n][0]), n))
        for n in timed:
            at, d = stated[n]
            when, later = _time(at), anchor
            if when is not None:  # HATP-GW-91: by its own time, before any event that is later than it
                later = next((j for j in range(anchor) if (t := times[j]) is not None and t > when), anchor)
            step = Step(index=k, at=at if isinstance(at, str) else None, author=str(d.get("approver")), decision=d)
            before.setdefault(later, []).append(step)
    out: list[Step] = []
    for i, event in enumerate(events):
        out.extend(before.get(i, []))
        at = event.get("at")
        out.append(Step(index=i, at=at if isinstance(at, str) else None, author=str(event.get("author"))))
    return out


def _short(uri: str) -> str:
    """A lifeline's name: the person, 'coordinator', 'gateway', or the participant's host."""
    scheme, _, rest = uri.partition("://")
    if scheme == "human":
        return rest.rsplit("/", 1)[-1]
    if scheme == "coordinator":
        return "coordinator"
    if rest.rstrip("/").endswith("gateway") or scheme == "gateway":
        return "gateway"
    return rest.split("/", 1)[0] if rest else uri


def _lanes(record: Mapping[str, Any]) -> list[str]:
    plan = _obj(record.get("plan"))
    participants = list(dict.fromkeys(str(b.get("participant")) for b in _objs(plan.get("branches"))))
    authors = list(dict.fromkeys(str(e.get("author")) for e in _objs(record.get("events"))))
    coordinator = next((a for a in authors if a.startswith("coordinator")), "coordinator")
    gateways = [a for a in authors if a not in participants and a != coordinator]
    people = [
        str(d.get("approver"))
        for e in _objs(record.get("events"))
        if e.get("event") == "approval"
        for d in _objs(_obj(e.get("evidence")).get("decisions"))
    ]
    return [*dict.fromkeys(people), *gateways, coordinator, *participants]


def _label(event: Mapping[str, Any]) -> str:
    body = _obj(event.get("body"))
    evidence = _obj(event.get("evidence"))
    facts = [str(event.get("event"))]
    for key in ("branchId", "requirementId"):
        if body.get(key):
            facts.append(str(body[key]))
    for key in ("decision", "outcome", "code"):
        value = evidence.get(key) if evidence.get(key) is not None else body.get(key)
        if value is not None:
            facts.append(f"{key}={value}")
    return " ".join(facts)


def _decision_words(d: Mapping[str, Any]) -> str:
    how = "passkey" if d.get("passkey") else "Ed25519 proof" if d.get("proof") else "no proof"
    return f"{d.get('decision')} ({how})"


def _utc(at: str | None, *, seconds: bool = True) -> str:
    when = _time(at)
    if when is None:
        return "no time"
    return when.strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%H:%M:%S UTC")


def render_timeline(
    record: Mapping[str, Any],
    problems: Iterable[Any],
    *,
    title: str | None = None,
    back: str | None = None,
    names: Mapping[str, str] | None = None,
    inbox: bool = False,
) -> str:
    """The HTML page. `problems`: objects with `index`, `rule`, `reason` (core/txn/record.py Problem); `back`: a
    link (the inbox's own path) shown above the diagram; `names`: display names by address (from the signed cards)
    for the people's lifelines; `inbox`: served by the inbox, so the page loads its stylesheet and script (HATP-GW-91:
    times in the approver's local zone)."""
    names = names or {}
    found: dict[int, list[str]] = {}
    for p in problems:
        found.setdefault(int(p.index), []).append(str(p.rule))
    lanes = _lanes(record)
    x = {lane: _LEFT + 50 + i * _W for i, lane in enumerate(lanes)}
    coordinator = next((lane for lane in lanes if lane.startswith("coordinator")), lanes[0] if lanes else "")
    events: Sequence[Mapping[str, Any]] = _objs(record.get("events"))

    def who(uri: str) -> str:
        return names.get(uri) or _short(uri)

    rows: list[str] = []
    items: list[str] = []
    y = _TOP
    for step in timeline_steps(record):
        event = events[step.index]
        at = _e(step.at or "")
        clock = (
            f'<text x="8" y="{y + 4}" font-size="12" fill="#333"><title>{_e(_utc(step.at))}</title>'
            f'<tspan data-local-time="{at}">{_e(_utc(step.at, seconds=False))}</tspan></text>'
        )
        stamp = f'<time datetime="{at}" data-local=seconds title="{_e(_utc(step.at))}">{_e(_utc(step.at))}</time>'
        if step.decision is not None:
            d = step.decision
            person, gateway = x.get(step.author, 0), x.get(str(event.get("author")), 0)
            words = _decision_words(d)
            rows.append(clock)
            rows.append(
                f'<line x1="{person}" y1="{y}" x2="{gateway}" y2="{y}" stroke="#555" stroke-dasharray="4 3" '
                'marker-end="url(#arrow)"/>'
            )
            rows.append(
                f'<text x="{min(person, gateway) + 8}" y="{y - 5}" font-size="12">{_e(f"{who(step.author)}: {words}")}'
                "</text>"
            )
            items.append(
                f'<li class=decision>{stamp} <span class=who title="{_e(step.author)}">{_e(who(step.author))}</span>'
                f" decided: {_e(words)}</li>"
            )
            y += _ROW
            continue
        i, author = step.index, step.author
        bad = found.get(i, [])
        check = f"✗ {' '.join(bad)}" if bad else "✓"
        colour = "#b00020" if bad else "#1b5e20"
        src, dst = x.get(author, x.get(coordinator, 0)), x.get(coordinator, 0)
        label = _e(f"{i}  {_label(event)}")
        rows.append(clock)
        if src == dst:
            rows.append(f'<circle cx="{src}" cy="{y}" r="4" fill="#333"/>')
            rows.append(f'<text x="{src + 10}" y="{y + 4}" font-size="12">{label}</text>')
        else:
            rows.append(f'<line x1="{src}" y1="{y}" x2="{dst}" y2="{y}" stroke="#333" marker-end="url(#arrow)"/>')
            rows.append(f'<text x="{min(src, dst) + 8}" y="{y - 5}" font-size="12">{label}</text>')
        rows.append(f'<text x="110" y="{y + 4}" font-size="12" fill="{colour}">{_e(check)}</text>')
        items.append(
            f"<li class=event>{stamp} <span class=check>{_e(check)}</span> "
            f'<span class=who title="{_e(author)}">{_e(who(author))}</span>: {label}</li>'
        )
        y += _ROW
    height = y + 20
    width = _LEFT + 50 + max(len(lanes), 1) * _W
    heads = "".join(
        f'<text x="{x[lane]}" y="30" font-size="13" font-weight="bold" text-anchor="middle"><title>{_e(lane)}</title>'
        f"{_e(who(lane))}</text>"
        f'<line x1="{x[lane]}" y1="40" x2="{x[lane]}" y2="{height - 10}" stroke="#bbb"/>'
        for lane in lanes
    )
    closed = _obj(events[-1].get("body")).get("outcome") if events else None
    verdict = (
        "hatp verify: the record holds" if not found else f"hatp verify: {sum(map(len, found.values()))} problem(s)"
    )
    summary = _obj(record.get("plan")).get("summary")
    agent = f"<p class=agent-written><strong>agent-written:</strong> {_e(summary)}</p>" if summary else ""
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="sequence diagram of {_e(record.get("txnId"))}"><defs><marker id="arrow" viewBox="0 0 10 10" '
        'refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>'
        f"{heads}{''.join(rows)}</svg>"
    )
    name = title or f"Transaction {record.get('txnId')}"
    nav = f'<p><a id=back href="{_e(back)}">Back to your asks</a></p>' if back else ""
    # in the inbox: its own stylesheet and script, from its own origin (the inbox's CSP allows no other)
    if inbox:
        csp = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'"
        assets = (
            '<meta name=viewport content="width=device-width, initial-scale=1">'
            "<link rel=stylesheet href=/static/inbox.css><script src=/static/inbox.js defer></script>"
        )
        zone = "in your time zone (UTC when you point at one)"
    else:
        csp, assets, zone = "default-src 'none'; img-src 'self'", "", "in UTC"
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta http-equiv=Content-Security-Policy content="{csp}">{assets}'
        f"<title>{_e(name)}</title></head><body><main class=wide>"
        f"{nav}<h1>{_e(name)}</h1>"
        f"<p>outcome <strong>{_e(closed or 'open')}</strong> · {_e(verdict)}</p>{agent}"
        f"<h2 id=happened>What happened, in order</h2><p class=meta>Times {zone}.</p>"
        f"<ol id=timeline-steps aria-labelledby=happened>{''.join(items)}</ol>"
        "<h2 id=diagram-title>Sequence diagram</h2>"
        f'<div class=diagram role=region aria-labelledby=diagram-title tabindex="0">{svg}</div>'
        f"<details><summary>Plan digest</summary><code>{_e(record.get('planDigest'))}</code></details>"
        "</main></body></html>"
    )
