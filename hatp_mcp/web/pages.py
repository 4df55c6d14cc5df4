"""The web inbox's pages as HTML strings, rendered from the structured ask only (spec/gateway.md HATP-GW-72).

Every value is escaped (`html.escape` with quotes) where it is put into the page: a `<script>` in a plan's
summary or arguments is text, never markup. Agent-written text (the summary, free-text arguments, a question's
wording) is shown only inside a block labelled "agent-written". No page shows a contact detail (the pages never
read the contacts table) or another person's decision proof. The pages load one script, /static/inbox.js, from
the inbox's own origin (the Content-Security-Policy allows nothing else); they carry no inline script or style.
"""

from __future__ import annotations

import json
from datetime import datetime
from html import escape

from hatp_mcp.core.gateway.screen import final_words
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.evidence import REASON_MAX
from hatp_mcp.core.model.gateway import AskRecord, Screen, ScreenOperation
from hatp_mcp.core.model.when import in_words
from hatp_mcp.web.questions import answer_controls

__all__ = ["INBOX_CSS", "INBOX_JS", "ask_page", "enrol_page", "list_page", "signin_page"]


def _e(value: object) -> str:
    return escape(str(value), quote=True)


AGENT_LABEL = "written by the agent"
TIERS = (
    "hold: reserved, released if the trip does not go ahead; compensate: done, but can be reversed (a refund);"
    " final: cannot be undone once it runs."
)


def _page(title: str, body: str, csrf: str) -> str:
    # HATP-GW-88: a viewport tag and the inbox's own stylesheet (style-src 'self'), no inline style or script.
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        f'<meta name=csrf-token content="{_e(csrf)}"><title>{_e(title)}</title>'
        "<link rel=stylesheet href=/static/inbox.css>"
        "<script src=/static/inbox.js defer></script></head>"
        f"<body><main>{body}</main></body></html>"
    )


def signin_page(csrf: str, message: str = "") -> str:
    note = f"<p id=message>{_e(message)}</p>" if message else "<p id=message></p>"
    body = (
        "<h1>HATP inbox</h1><p>Sign in with the passkey on your card. No password.</p>"
        f"<button id=signin type=button>Sign in with your passkey</button>{note}"
    )
    return _page("Sign in", body, csrf)


def enrol_page(csrf: str) -> str:
    body = (
        "<h1>Register a passkey</h1><p>With the one-time code your operator gave you (it is in this page's link),"
        " or while signed in, register a passkey. It counts once your operator has put it on your"
        " Directory-signed card.</p><button id=enrol type=button>Register a passkey</button><p id=message></p>"
    )
    return _page("Register a passkey", body, csrf)


def _money(rec: AskRecord) -> str:
    screen = rec.ask.screen
    if screen is not None and screen.totals:
        return "; ".join(screen.totals)
    return "; ".join(a.display() for a in rec.up_to) if rec.up_to else "no amount stated"


def _person(address: str | None, names: dict[str, str]) -> str:
    """A person or agent by display name, the address on hover (title); the address alone when no card names it."""
    if not address:
        return ""
    name = names.get(address)
    if name is None:
        return f"<span class=addr>{_e(address)}</span>"
    return f'<span class=person title="{_e(address)}">{_e(name)}</span>'


def _when(ts: str | None, now: datetime | None, countdown: bool = False) -> str:
    """A time as UTC text (right without the script), marked with its ISO form for the script to show in the
    approver's local zone; with `countdown`, "in N min" computed from the gateway's clock at render time."""
    if not ts:
        return ""
    at = parse_ts(ts)
    shown = f"<time datetime={_e(ts)} data-local>{_e(at.strftime('%Y-%m-%d %H:%M UTC'))}</time>"
    if countdown and now is not None:
        left = (at - now).total_seconds()
        shown += (
            f" <span class=countdown data-until={_e(ts)} data-now={_e(format_ts(now))}>({_e(in_words(left))})</span>"
        )
    return shown


def _agent_text(texts: list[str]) -> str:
    """One labelled block for everything one agent-written source says (HATP-GW-72)."""
    lines = "<br>".join(_e(t) for t in texts)
    return f"<blockquote class=agent-written><strong>{AGENT_LABEL}:</strong> {lines}</blockquote>"


def _agent(text: str) -> str:
    return _agent_text([text])


def _summary(rec: AskRecord) -> str | None:
    screen = rec.ask.screen
    if screen is not None and screen.agent_written:
        return " ".join(a.text for a in screen.agent_written)
    return None


def _mine_open(rec: AskRecord, human: str) -> bool:
    return rec.state == "pending" and any(s.human == human and s.status == "asked" for s in rec.seats)


def list_page(
    human: str,
    records: list[AskRecord],
    csrf: str,
    timelines: set[str] | None = None,
    *,
    names: dict[str, str] | None = None,
    now: datetime | None = None,
) -> str:
    """`timelines`: the txnIds whose finished record the inbox can draw for this person (HATP-GW-81). The asks are
    split into those waiting for this person and those decided (HATP-GW-88), each with the trip's summary."""
    names = names or {}
    waiting: list[str] = []
    decided: list[str] = []
    for rec in records:
        ask = rec.ask
        drawn = (
            f' <a class=timeline href="/txns/{_e(ask.txn_id)}/timeline">timeline</a>'
            if ask.txn_id and ask.txn_id in (timelines or set())
            else ""
        )
        what = ask.screen.action if ask.screen is not None else f"{ask.kind} question"
        who = ask.screen.requester if ask.screen is not None else (ask.requester or "")
        summary = _summary(rec)
        told = f"<span class=agent-written><strong>{AGENT_LABEL}:</strong> {_e(summary)}</span>" if summary else ""
        mine = _mine_open(rec, human)
        when = _when(ask.decide_by, now, countdown=mine)
        row = (
            f'<li class=ask><p class=what><a href="/asks/{_e(ask.ask_id)}">{_e(what)}</a>'
            f" for {_person(who, names)}, up to <span class=amount>{_e(_money(rec))}</span></p>"
            f"{told}<p class=meta>{'decide by ' + when if mine else 'state ' + _e(rec.state)}{drawn}</p></li>"
        )
        (waiting if mine else decided).append(row)
    sections = (
        f"<h2 id=waiting-title>Waiting for you</h2><ul id=waiting class=asks aria-labelledby=waiting-title>"
        f"{''.join(waiting)}</ul>"
        if waiting
        else "<h2>Waiting for you</h2><p id=empty>Nothing is waiting for you.</p>"
    )
    if decided:
        sections += (
            f"<h2 id=decided-title>Decided</h2><ul id=decided class=asks aria-labelledby=decided-title>"
            f"{''.join(decided)}</ul>"
        )
    body = (
        f"<h1>Your asks</h1><p>Signed in as {_person(human, names)}. "
        f"<button id=signout type=button>Sign out</button></p><div id=asks>{sections}</div>"
    )
    return _page("Your asks", body, csrf)


def _final_steps(screen: Screen) -> list[ScreenOperation]:
    return [op for op in screen.operations if op.tier == "final"]


def _outcome(rec: AskRecord, human: str, names: dict[str, str]) -> str:
    """What became of the ask, and this person's own decision with its signed reason (HATP-GW-88)."""
    mine = next((d for d in rec.decisions if d.approver == human), None)
    parts = [f"<section id=outcome><h2>Outcome</h2><p>The ask is <strong>{_e(rec.state)}</strong>.</p>"]
    rejecters = [d.approver for d in rec.decisions if d.decision == "reject"]
    if rejecters:  # HATP-GW-93: who rejected, by the name on their card (the address on hover)
        who = ", ".join(_person(a, names) for a in rejecters)
        parts.append(f"<p id=rejected-by>Rejected by {who}.</p>")
    if mine is not None:
        why = f" Your reason: <q id=your-reason>{_e(mine.reason)}</q>" if mine.reason else ""
        parts.append(f"<p>You chose <strong>{_e(mine.decision)}</strong>.{why}</p>")
    for seat in rec.seats:
        if seat.human == human and seat.decision == "decline":
            parts.append("<p>You passed it on.</p>")
    parts.append("</section>")
    return "".join(parts)


def _delegates(rec: AskRecord, human: str) -> list[str]:
    return [s.human for s in rec.seats if s.status == "eligible" and s.human != human]


def ask_page(
    rec: AskRecord,
    human: str,
    can_decide: bool,
    csrf: str,
    *,
    timeline: bool = False,
    names: dict[str, str] | None = None,
    now: datetime | None = None,
) -> str:
    """The ask, summary first: what, for whom, up to how much, the step that cannot be undone and the deadline;
    then the steps, what the agent wrote (labelled, one label per block), and the digest and ids folded away
    (HATP-GW-72, HATP-GW-88). `names`: display names by address, from the signed cards; never a contact."""
    names = names or {}
    ask = rec.ask
    screen = ask.screen
    parts: list[str] = []
    if screen is not None:
        parts.append(
            "<section id=summary aria-labelledby=headline>"
            f"<h1 id=headline>{_person(screen.requester, names)} asks you to approve"
            f" <code>{_e(screen.action)}</code></h1>"
            f"<p class=amount-line>Up to <strong id=amount>{_e(_money(rec))}</strong></p>"
        )
        summary = _summary(rec)
        if summary:
            parts.append(_agent(summary))
        final = final_words(screen)
        if final:  # HATP-GW-88: the one sentence the notices and a model's text say too, from the one function
            steps = "".join(
                f"<li>{_e(op.operation)} at <code>{_e(op.participant)}</code>"
                + (f", {_e(op.amount)}" if op.amount else "")
                + "</li>"
                for op in _final_steps(screen)
            )
            parts.append(
                f"<div id=irreversible role=note><p><strong>{_e(final)}</strong>"
                f" It runs and stays done:</p><ul>{steps}</ul></div>"
            )
        parts.append(
            f"<p id=deadline>Decide by {_when(ask.decide_by, now, countdown=rec.state == 'pending')}</p></section>"
        )
    else:
        who = f" for {_person(ask.requester, names)}" if ask.requester else ""
        parts.append(
            f"<h1>{_e(ask.kind)} question{who}</h1><p>Answer by <span id=decide-by>"
            f"{_when(ask.decide_by, now, countdown=rec.state == 'pending')}</span>.</p>"
        )
        if ask.question is not None:
            parts.append(_agent(ask.question.text))
        if rec.state == "answered" and rec.answered_by == human:
            shown = rec.answer_value if isinstance(rec.answer_value, str) else json.dumps(rec.answer_value)
            parts.append(f"<p>You answered: <code id=answered>{_e(shown)}</code></p>")
    if can_decide and ask.kind == "approve":
        delegates = _delegates(rec, human)
        to = f" to {names.get(delegates[0], delegates[0])}" if delegates else " (no one else is left to ask)"
        parts.append(
            "<section id=actions aria-label=Decide>"
            "<button type=button class=primary data-decision=approve>Approve with your passkey</button>"
            "<div class=reject><label for=reason>Reason for a reject (optional, the agent reads it)</label>"
            f"<textarea id=reason maxlength={REASON_MAX} rows=2></textarea>"
            "<button type=button data-decision=reject>Reject</button></div>"
            f"<button type=button id=pass data-decision=decline>Pass it on{_e(to)}</button>"
            "</section>"
        )
    elif can_decide:
        parts.append(answer_controls(ask))
    elif rec.state != "pending" or any(s.human == human and s.status != "asked" for s in rec.seats):
        parts.append(_outcome(rec, human, names))
    if timeline and ask.txn_id:
        parts.append(f'<p><a id=timeline href="/txns/{_e(ask.txn_id)}/timeline">The transaction\'s timeline</a></p>')
    if screen is not None:
        parts.append("<h2>Steps</h2><ol id=steps>")
        for op in screen.operations:
            money = f", {_e(op.amount)}" + (f" (up to {_e(op.up_to)})" if op.up_to else "") if op.amount else ""
            args = _agent_text([a.text for a in op.args]) if op.args else ""
            parts.append(
                f"<li><span class=op>{_e(op.operation)}</span> at <code>{_e(op.participant)}</code>{money}"
                f" <span class=tier>{_e(op.tier)}</span>{args}</li>"
            )
        parts.append(f"</ol><p class=tiers>{_e(TIERS)}</p>")
        parts.append(
            "<details id=details><summary>Digest and ids</summary><dl>"
            f"<dt>ask</dt><dd><code id=ask-id>{_e(ask.ask_id)}</code></dd>"
            f"<dt>state</dt><dd id=state>{_e(rec.state)}</dd>"
            f"<dt>transaction</dt><dd><code>{_e(screen.txn_id)}</code></dd>"
            f"<dt>requested by</dt><dd><code>{_e(screen.requester)}</code></dd>"
            f"<dt>through the agent</dt><dd><code>{_e(screen.agent)}</code></dd>"
            f"<dt>approvals needed</dt><dd>{_e(screen.quorum or '')}</dd>"
            f"<dt>plan digest</dt><dd><code>{_e(screen.plan_digest)}</code></dd>"
            "</dl></details>"
        )
    else:
        parts.append(
            f"<details id=details><summary>Ids</summary><p>Ask <code id=ask-id>{_e(ask.ask_id)}</code>,"
            f" state <span id=state>{_e(rec.state)}</span>.</p></details>"
        )
    parts.append("<p id=message role=status></p><p><a href=/>Back to your asks</a></p>")
    return _page(f"Ask {ask.ask_id}", "".join(parts), csrf)


INBOX_CSS = """
:root { color-scheme: light; --ink: #1a1a1a; --muted: #555; --line: #d0d0d0; --warn: #8a1c00; --warnbg: #fff1ec;
  --accent: #0b57d0; }
* { box-sizing: border-box; }
body { margin: 0; font: 16px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--ink);
  background: #f6f6f4; }
main { max-width: 46rem; margin: 0 auto; padding: 1rem; background: #fff; min-height: 100vh; }
h1 { font-size: 1.35rem; margin: 0.2rem 0 0.5rem; }
h2 { font-size: 1.1rem; margin: 1.2rem 0 0.4rem; }
code { font-size: 0.9em; overflow-wrap: anywhere; }
a { color: var(--accent); }
.person { border-bottom: 1px dotted var(--muted); }
.amount-line { font-size: 1.2rem; margin: 0.3rem 0; }
.agent-written { display: block; margin: 0.5rem 0; padding: 0.4rem 0.7rem; border-left: 4px solid var(--line);
  background: #f3f3f3; color: #333; overflow-wrap: anywhere; }
.agent-written strong { font-size: 0.8rem; color: var(--muted); }
#irreversible { border: 2px solid var(--warn); background: var(--warnbg); color: var(--warn); padding: 0.4rem 0.8rem;
  border-radius: 6px; margin: 0.6rem 0; }
#irreversible p, #irreversible ul { margin: 0.2rem 0; }
#deadline { margin: 0.4rem 0; }
.countdown { font-weight: 600; }
#actions { display: flex; flex-direction: column; align-items: flex-start; gap: 0.7rem; margin: 1rem 0;
  padding: 0.8rem; border: 1px solid var(--line); border-radius: 6px; }
#actions .reject { display: flex; flex-direction: column; align-items: flex-start; gap: 0.3rem; width: 100%; }
#actions textarea { width: 100%; font: inherit; padding: 0.3rem; }
button { font: inherit; padding: 0.5rem 0.9rem; border-radius: 6px; border: 1px solid #888; background: #fff;
  color: var(--ink); cursor: pointer; }
button.primary { background: var(--accent); border-color: var(--accent); color: #fff; }
button:focus-visible, a:focus-visible, textarea:focus-visible, summary:focus-visible {
  outline: 3px solid #f5a623; outline-offset: 2px; }
.tier { font-size: 0.8rem; padding: 0 0.35rem; border: 1px solid var(--line); border-radius: 4px; color: var(--muted); }
.tiers { font-size: 0.9rem; color: var(--muted); }
#steps li { margin: 0.3rem 0; }
details { margin: 1rem 0; }
details dl { display: grid; grid-template-columns: max-content 1fr; gap: 0.2rem 0.8rem; }
details dd { margin: 0; min-width: 0; }
ul.asks { list-style: none; padding: 0; }
li.ask { border: 1px solid var(--line); border-radius: 6px; padding: 0.5rem 0.8rem; margin: 0.5rem 0; }
li.ask p { margin: 0.2rem 0; }
.meta { color: var(--muted); font-size: 0.9rem; }
#outcome { border: 1px solid var(--line); border-radius: 6px; padding: 0.4rem 0.8rem; }
#answer { min-width: 0; margin: 0.8rem 0; border: 1px solid var(--line); border-radius: 6px; }
#answer ul { list-style: none; padding: 0; margin: 0; }
#answer li { margin: 0.5rem 0; }
#answer label { display: block; }
#answer textarea, #answer input[type=text], #answer input[type=number], #answer select { display: block;
  width: 100%; max-width: 100%; font: inherit; padding: 0.3rem; margin-top: 0.2rem; }
main.wide { max-width: 80rem; }
.diagram { overflow-x: auto; border: 1px solid var(--line); border-radius: 6px; margin: 0.5rem 0; }
.diagram svg { display: block; }
#timeline-steps { padding-left: 1.6rem; }
#timeline-steps li { margin: 0.25rem 0; overflow-wrap: anywhere; }
#timeline-steps time { font-variant-numeric: tabular-nums; color: var(--muted); }
#timeline-steps .decision { font-style: italic; }
@media (max-width: 30rem) { main { padding: 0.7rem; } h1 { font-size: 1.2rem; } }
"""


INBOX_JS = r"""
"use strict";
const b64u = (buf) => btoa(String.fromCharCode(...new Uint8Array(buf)))
  .replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
const unb64u = (s) => Uint8Array.from(atob(s.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
const csrf = () => document.querySelector("meta[name=csrf-token]").content;
const say = (text) => { document.getElementById("message").textContent = text; };
async function post(path, body) {
  const r = await fetch(path, {method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json", "X-CSRF-Token": csrf()}, body: JSON.stringify(body)});
  const data = await r.json();
  if (!r.ok) { throw new Error((data.rule ? data.rule + ": " : "") + (data.error || r.statusText)); }
  return data;
}
function assertionJSON(cred) {
  const r = cred.response;
  return {id: cred.id, rawId: b64u(cred.rawId), type: cred.type, response: {
    authenticatorData: b64u(r.authenticatorData), clientDataJSON: b64u(r.clientDataJSON),
    signature: b64u(r.signature), userHandle: r.userHandle ? b64u(r.userHandle) : null}};
}
async function getAssertion(options) {
  const cred = await navigator.credentials.get({publicKey: {challenge: unb64u(options.challenge),
    rpId: options.rpId, userVerification: "required", timeout: options.timeout,
    allowCredentials: (options.allowCredentials || []).map((c) => ({type: "public-key", id: unb64u(c)}))}});
  return assertionJSON(cred);
}
async function signin() {
  try {
    const options = await post("/signin/options", {});
    const credential = await getAssertion(options);
    await post("/signin", {nonce: options.nonce, credential});
    const next = new URLSearchParams(window.location.search).get("next") || "/";
    const inside = next.startsWith("/asks/") || next.startsWith("/txns/");
    window.location.assign(inside ? next : "/");  // only back into this inbox
  } catch (e) { say("Sign-in failed: " + e.message); }
}
async function enrol() {
  try {
    const code = new URLSearchParams(window.location.search).get("code") || "";
    const options = await post("/enrol/options", {code});
    // signed in without a code: a passkey already on the card asserts the addition first (HATP-GW-86)
    const assertion = options.assertion ? await getAssertion(options.assertion) : undefined;
    const pk = options.publicKey;
    pk.challenge = unb64u(pk.challenge);
    pk.user.id = unb64u(pk.user.id);
    pk.excludeCredentials = (pk.excludeCredentials || []).map((c) => ({type: c.type, id: unb64u(c.id)}));
    const cred = await navigator.credentials.create({publicKey: pk});
    const credential = {id: cred.id, rawId: b64u(cred.rawId), type: cred.type, response: {
      clientDataJSON: b64u(cred.response.clientDataJSON), attestationObject: b64u(cred.response.attestationObject)}};
    const done = await post("/enrol/register", {nonce: options.nonce, credential, assertion});
    say("Registered: enrolment " + done.enrolment + " is " + done.state + " until your operator approves it.");
  } catch (e) { say("Not registered: " + e.message); }
}
function field(el) {  // one control's value, by its data-type; undefined when left empty
  const t = el.dataset.type;
  if (t === "boolean") { return el.checked; }
  if (el.value === "") { return undefined; }
  if (t === "number") { return Number(el.value); }
  if (t === "json") {
    try { return JSON.parse(el.value); }
    catch (e) { throw new Error((el.dataset.field || "the answer") + " is not JSON"); }
  }
  return el.value;
}
function answerValue() {  // read back from the controls questions.py drew; the gateway checks it fits
  const box = document.getElementById("answer");
  const kind = box.dataset.kind;
  if (kind === "choose") {
    const picked = box.querySelector("input[name=choice]:checked");
    return picked ? picked.value : "";
  }
  if (kind === "text") { return document.getElementById("answer-text").value; }
  if (kind === "form-json") { return field(document.getElementById("answer-json")); }
  const value = {};
  box.querySelectorAll("[data-field]").forEach((el) => {
    const v = field(el);
    if (v !== undefined) { value[el.dataset.field] = v; }
  });
  return value;
}
async function answer() {
  let value;
  try { value = answerValue(); } catch (e) { say("Not sent: " + e.message); return; }
  await decide("answer", value);
}
async function decide(decision, value) {
  const askId = document.getElementById("ask-id").textContent;
  const base = "/asks/" + encodeURIComponent(askId);
  try {
    const body = value === undefined ? {decision} : {decision, value};
    const reason = document.getElementById("reason");
    if (decision === "reject" && reason && reason.value.trim() !== "") { body.reason = reason.value.trim(); }
    const options = await post(base + "/challenge", body);
    const credential = await getAssertion(options);
    const done = await post(base + "/decide", {nonce: options.nonce, credential});
    document.getElementById("state").textContent = done.state;
    say("Recorded: " + decision + ". The ask is " + done.state + ".");
    const box = document.getElementById("answer");
    if (box) { box.remove(); }
    const actions = document.getElementById("actions");
    if (actions) { actions.remove(); }
    const link = document.createElement("a");
    link.id = "outcome-link";
    link.href = base;
    link.textContent = "See the outcome";
    const note = document.createElement("p");
    note.append(link);
    document.getElementById("message").after(note);
  } catch (e) { say("Not recorded: " + e.message); }
}
function inWords(left) {  // as core/model/when.py in_words: to the nearest minute, a half minute up (HATP-GW-94)
  const ms = Math.abs(left);
  const n = Math.floor(ms / 60000) + (ms % 60000 >= 30000 ? 1 : 0);
  if (n === 0) { return "now"; }
  const span = n >= 120 ? Math.floor(n / 60) + " h " + (n % 60) + " min" : n + " min";
  return left >= 0 ? "in " + span : span + " ago";
}
function localTimes() {  // the server wrote UTC; show the approver's own zone, and keep the countdowns current
  document.querySelectorAll("time[data-local]").forEach((t) => {
    const at = new Date(t.getAttribute("datetime"));
    if (!isNaN(at)) {
      const seconds = t.dataset.local === "seconds" ? {second: "2-digit"} : {};
      t.textContent = at.toLocaleString([], {year: "numeric", month: "short", day: "numeric",
        hour: "2-digit", minute: "2-digit", ...seconds, timeZoneName: "short"});
    }
  });
  document.querySelectorAll("[data-local-time]").forEach((t) => {  // a time of day inside the timeline's diagram
    const at = new Date(t.dataset.localTime);
    if (!isNaN(at)) {
      t.textContent = at.toLocaleTimeString([], {hour: "2-digit", minute: "2-digit", second: "2-digit"});
    }
  });
  const loaded = Date.now();  // counted on the gateway's clock as of the page, not the device's (it may be off)
  const tick = () => document.querySelectorAll("[data-until]").forEach((c) => {
    const now = new Date(c.dataset.now).getTime() + (Date.now() - loaded);
    c.textContent = "(" + inWords(new Date(c.dataset.until) - now) + ")";
  });
  tick();
  window.setInterval(tick, 30000);
}
document.addEventListener("DOMContentLoaded", () => {
  try { localTimes(); } catch (e) { /* the server's UTC text stays */ }
  const en = document.getElementById("enrol");
  if (en) { en.addEventListener("click", enrol); }
  const s = document.getElementById("signin");
  if (s) { s.addEventListener("click", signin); }
  const out = document.getElementById("signout");
  if (out) { out.addEventListener("click", async () => { await post("/signout", {}); window.location.assign("/"); }); }
  const a = document.getElementById("answer-submit");
  if (a) { a.addEventListener("click", answer); }
  document.querySelectorAll("button[data-decision]").forEach((b) =>
    b.addEventListener("click", () => decide(b.dataset.decision)));
});
"""
