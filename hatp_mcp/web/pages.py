"""The web inbox's pages as HTML strings, rendered from the structured ask only (spec/gateway.md HATP-GW-72).

Every value is escaped (`html.escape` with quotes) where it is put into the page: a `<script>` in a plan's
summary or arguments is text, never markup. Agent-written text (the summary, free-text arguments, a question's
wording) is shown only inside a block labelled "agent-written". No page shows a contact detail (the pages never
read the contacts table) or another person's decision proof. The pages load one script, /static/inbox.js, from
the inbox's own origin (the Content-Security-Policy allows nothing else); they carry no inline script or style.
"""

from __future__ import annotations

import json
from html import escape

from hatp_mcp.core.model.gateway import AskRecord
from hatp_mcp.web.questions import answer_controls

__all__ = ["INBOX_JS", "ask_page", "enrol_page", "list_page", "signin_page"]


def _e(value: object) -> str:
    return escape(str(value), quote=True)


def _page(title: str, body: str, csrf: str) -> str:
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f'<meta name=csrf-token content="{_e(csrf)}"><title>{_e(title)}</title>'
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


def list_page(human: str, records: list[AskRecord], csrf: str, timelines: set[str] | None = None) -> str:
    """`timelines`: the txnIds whose finished record the inbox can draw for this person (HATP-GW-81)."""
    rows = []
    for rec in records:
        ask = rec.ask
        drawn = (
            f' <a class=timeline href="/txns/{_e(ask.txn_id)}/timeline">timeline</a>'
            if ask.txn_id and ask.txn_id in (timelines or set())
            else ""
        )
        what = ask.screen.action if ask.screen is not None else f"{ask.kind} question"
        who = ask.screen.requester if ask.screen is not None else (ask.requester or "")
        rows.append(
            f'<tr><td><a href="/asks/{_e(ask.ask_id)}">{_e(what)}</a></td><td>{_e(_money(rec))}</td>'
            f"<td>{_e(ask.decide_by)}</td><td>{_e(who)}</td><td>{_e(rec.state)}{drawn}</td></tr>"
        )
    table = (
        "<table id=asks><thead><tr><th>what</th><th>how much (up to)</th><th>decide by</th><th>asked for</th>"
        f"<th>state</th></tr></thead><tbody>{''.join(rows)}</tbody></table>"
        if rows
        else "<p id=empty>Nothing is waiting for you.</p>"
    )
    body = f"<h1>Your asks</h1><p>Signed in as {_e(human)}. <button id=signout type=button>Sign out</button></p>{table}"
    return _page("Your asks", body, csrf)


def _agent(text: str) -> str:
    return f"<blockquote class=agent-written><strong>agent-written:</strong> {_e(text)}</blockquote>"


def ask_page(rec: AskRecord, human: str, can_decide: bool, csrf: str, *, timeline: bool = False) -> str:
    ask = rec.ask
    parts = [f"<h1>{_e(ask.screen.title if ask.screen else ask.kind + ' question')}</h1>"]
    parts.append(f"<p>Ask <code id=ask-id>{_e(ask.ask_id)}</code>, state <span id=state>{_e(rec.state)}</span>.</p>")
    screen = ask.screen
    if screen is not None:
        parts.append(
            "<dl>"
            f"<dt>requested by</dt><dd>{_e(screen.requester)} through {_e(screen.agent)}</dd>"
            f"<dt>amount (you sign for up to)</dt><dd id=amount>{_e(_money(rec))}</dd>"
            f"<dt>approvals needed</dt><dd>{_e(screen.quorum or '')}</dd>"
            f"<dt>decide by</dt><dd>{_e(ask.decide_by)}</dd>"
            f"<dt>plan digest</dt><dd><code>{_e(screen.plan_digest)}</code></dd>"
            "</dl><h2>Operations</h2><ul>"
        )
        for op in screen.operations:
            money = f", {_e(op.amount)}" + (f" (up to {_e(op.up_to)})" if op.up_to else "") if op.amount else ""
            args = "".join(_agent(a.text) for a in op.args)
            parts.append(f"<li>{_e(op.operation)} on {_e(op.participant)} ({_e(op.tier)}){money}{args}</li>")
        parts.append("</ul>")
        parts.extend(_agent(a.text) for a in screen.agent_written)
    else:
        who = f" for {_e(ask.requester)}" if ask.requester else ""
        parts.append(f"<p>A {_e(ask.kind)} question{who}; answer by <span id=decide-by>{_e(ask.decide_by)}</span>.</p>")
        if ask.question is not None:
            parts.append(_agent(ask.question.text))
        if rec.state == "answered" and rec.answered_by == human:
            shown = rec.answer_value if isinstance(rec.answer_value, str) else json.dumps(rec.answer_value)
            parts.append(f"<p>You answered: <code id=answered>{_e(shown)}</code></p>")
    if can_decide and ask.kind == "approve":
        parts.append(
            "<p id=actions>"
            "<button type=button data-decision=approve>Approve with your passkey</button> "
            "<button type=button data-decision=reject>Reject</button> "
            "<button type=button data-decision=decline>Pass it on</button></p>"
        )
    elif can_decide:
        parts.append(answer_controls(ask))
    if timeline and ask.txn_id:
        parts.append(f'<p><a id=timeline href="/txns/{_e(ask.txn_id)}/timeline">The transaction\'s timeline</a></p>')
    parts.append("<p id=message></p><p><a href=/>Back to your asks</a></p>")
    return _page(f"Ask {ask.ask_id}", "".join(parts), csrf)


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
    const options = await post(base + "/challenge", value === undefined ? {decision} : {decision, value});
    const credential = await getAssertion(options);
    const done = await post(base + "/decide", {nonce: options.nonce, credential});
    document.getElementById("state").textContent = done.state;
    say("Recorded: " + decision + ". The ask is " + done.state + ".");
    const box = document.getElementById("answer");
    if (box) { box.remove(); }
    const actions = document.getElementById("actions");
    if (actions) { actions.remove(); }
  } catch (e) { say("Not recorded: " + e.message); }
}
document.addEventListener("DOMContentLoaded", () => {
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
