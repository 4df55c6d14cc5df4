"""A finished transaction as a timeline (spec/gateway.md HATP-GW-75): a sequence diagram drawn server-side as SVG
inside one self-contained HTML page (no script, no stylesheet or font from anywhere; nothing fetched), from the
record itself and the result of checking it (`verify_record`'s problems, the same checks `hatp verify` makes).

Lifelines: the people who decided, the gateway, the coordinator, each participant. One row per record event, in
the record's order: who sent what (votes, receipts, approvals, commits, compensations), the people's decisions
inside each approval (with how each was proven: passkey or Ed25519), and each event's check result: ✓, or ✗ with
the rule that failed. Every value is escaped; agent-written text is not drawn at all (the plan's summary appears
once, labelled). Pure: takes the record and the problems, returns a string.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from html import escape
from typing import Any

__all__ = ["render_timeline"]

_W, _ROW, _TOP = 190, 30, 70


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


def render_timeline(
    record: Mapping[str, Any], problems: Iterable[Any], *, title: str | None = None, back: str | None = None
) -> str:
    """The HTML page. `problems`: objects with `index`, `rule`, `reason` (core/txn/record.py Problem); `back`: a
    link (the inbox's own path) shown above the diagram."""
    found: dict[int, list[str]] = {}
    for p in problems:
        found.setdefault(int(p.index), []).append(str(p.rule))
    lanes = _lanes(record)
    x = {lane: 110 + i * _W for i, lane in enumerate(lanes)}
    coordinator = next((lane for lane in lanes if lane.startswith("coordinator")), lanes[0] if lanes else "")
    rows: list[str] = []
    y = _TOP
    events: Sequence[Mapping[str, Any]] = _objs(record.get("events"))
    for i, event in enumerate(events):
        author = str(event.get("author"))
        bad = found.get(i, [])
        check = f"✗ {' '.join(bad)}" if bad else "✓"
        colour = "#b00020" if bad else "#1b5e20"
        src, dst = x.get(author, x.get(coordinator, 0)), x.get(coordinator, 0)
        label = _e(f"{i}  {_label(event)}")
        if src == dst:
            rows.append(f'<circle cx="{src}" cy="{y}" r="4" fill="#333"/>')
            rows.append(f'<text x="{src + 10}" y="{y + 4}" font-size="12">{label}</text>')
        else:
            rows.append(f'<line x1="{src}" y1="{y}" x2="{dst}" y2="{y}" stroke="#333" marker-end="url(#arrow)"/>')
            rows.append(f'<text x="{min(src, dst) + 8}" y="{y - 5}" font-size="12">{label}</text>')
        rows.append(f'<text x="8" y="{y + 4}" font-size="12" fill="{colour}">{_e(check)}</text>')
        y += _ROW
        if event.get("event") == "approval":
            for d in _objs(_obj(event.get("evidence")).get("decisions")):
                person = str(d.get("approver"))
                how = "passkey" if d.get("passkey") else "Ed25519 proof" if d.get("proof") else "no proof"
                px, gx = x.get(person, 0), x.get(author, 0)
                text = _e(f"{person.rsplit('/', 1)[-1]}: {d.get('decision')} ({how})")
                rows.append(
                    f'<line x1="{px}" y1="{y}" x2="{gx}" y2="{y}" stroke="#555" stroke-dasharray="4 3" '
                    'marker-end="url(#arrow)"/>'
                )
                rows.append(f'<text x="{min(px, gx) + 8}" y="{y - 5}" font-size="12">{text}</text>')
                y += _ROW
    height = y + 20
    width = 110 + max(len(lanes), 1) * _W
    heads = "".join(
        f'<text x="{x[lane]}" y="30" font-size="13" font-weight="bold" text-anchor="middle">{_e(_short(lane))}</text>'
        f'<line x1="{x[lane]}" y1="40" x2="{x[lane]}" y2="{height - 10}" stroke="#bbb"/>'
        for lane in lanes
    )
    closed = _obj(events[-1].get("body")).get("outcome") if events else None
    verdict = (
        "hatp verify: the record holds" if not found else f"hatp verify: {sum(map(len, found.values()))} problem(s)"
    )
    summary = _obj(record.get("plan")).get("summary")
    agent = f"<p><strong>agent-written:</strong> {_e(summary)}</p>" if summary else ""
    svg = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
        f'aria-label="sequence diagram of {_e(record.get("txnId"))}"><defs><marker id="arrow" viewBox="0 0 10 10" '
        'refX="9" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z" fill="#333"/></marker></defs>'
        f"{heads}{''.join(rows)}</svg>"
    )
    name = title or f"Transaction {record.get('txnId')}"
    nav = f'<p><a id=back href="{_e(back)}">Back to your asks</a></p>' if back else ""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        "<meta http-equiv=Content-Security-Policy content=\"default-src 'none'; img-src 'self'\">"
        f"<title>{_e(name)}</title></head><body>"
        f"{nav}<h1>{_e(name)}</h1>"
        f"<p>outcome <strong>{_e(closed or 'open')}</strong> · {_e(verdict)} · plan "
        f"<code>{_e(record.get('planDigest'))}</code></p>{agent}{svg}</body></html>"
    )
