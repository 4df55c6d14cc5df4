"""The web inbox: a Starlette app the gateway process serves (`servers.gateway --inbox-port N`, spec/gateway.md
HATP-GW-72..74). A person signs in with a passkey on their Directory-signed card, sees only the asks they were
asked, opens one and decides with their passkey: the decision's WebAuthn challenge is the SHA-256 of the canonical
JSON of {askId, subjectDigest, decision, nonce, issuedAt} (HATP-GW-67), kept server-side by its nonce and usable
once; the gateway verifies the assertion against the card (core/gateway/passkey.py) and records it.

Safe by default:
- every POST proves where it comes from: its Origin is the inbox's own (exact, port included) and it carries the
  CSRF token (`X-CSRF-Token`) bound to the session, or before sign-in to the `hatp_csrf` cookie (double submit);
  anything else is refused 403 and changes nothing (HATP-GW-73);
- every response carries a strict Content-Security-Policy (`default-src 'none'`, scripts and fetches from the
  inbox's own origin only, no inline script, no framing), `nosniff`, `no-referrer`, `no-store`;
- every body is bounded before it is read, by the route it goes to (`body_cap`: a few KiB for sign-in and a
  decision, what the longest answer needs for a challenge): a Content-Length over it is refused 413 from the header
  alone, a body without one is counted as it streams (HATP-GW-85); a body is read by the one JSON loader
  (core/model/wire.py), so depth, duplicates and numbers are refused 400 with their rule, never a 500;
- sessions are random ids in an HttpOnly, SameSite=Strict cookie, expire after `session_seconds` on the Clock,
  and end at sign-out; pages never show a contact detail (pages.py).
An ask that is not the signed-in person's answers 404, the same as an ask that does not exist.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import sqlite3
from datetime import timedelta
from typing import Any
from urllib.parse import quote

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send
from webauthn import generate_registration_options, verify_authentication_response, verify_registration_response
from webauthn.helpers import options_to_json
from webauthn.helpers.cose import COSEAlgorithmIdentifier
from webauthn.helpers.exceptions import InvalidAuthenticationResponse, InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    PublicKeyCredentialDescriptor,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from hatp_mcp.core.gateway import asks as core_asks
from hatp_mcp.core.gateway.passkey import RelyingParty, b64u, decision_challenge, decision_payload, unb64u
from hatp_mcp.core.gateway.proof import HumanKeys, subject_digest
from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.card import HumanCard
from hatp_mcp.core.model.evidence import REASON_MAX, PasskeyAssertion
from hatp_mcp.core.model.gateway import MAX_TEXT_ANSWER, AskRecord
from hatp_mcp.core.model.wire import load_json
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.card_watch import CardWatch
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.inbox_state import InboxState, Session
from hatp_mcp.web.pages import INBOX_CSS, INBOX_JS, ask_page, enrol_page, list_page, signin_page
from hatp_mcp.web.record_shelf import RecordShelf
from hatp_mcp.web.timeline import render_timeline

__all__ = ["CSP", "Inbox", "body_cap"]

CSP = (
    "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; img-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "X-Frame-Options": "DENY",
}
SESSION_COOKIE = "hatp_session"
CSRF_COOKIE = "hatp_csrf"
CHALLENGE_SECONDS = 300


# HATP-GW-85: what a route's body may hold. A WebAuthn assertion, a nonce, a code: a few KiB; a registration may
# carry an attestation certificate chain; a challenge carries the answer, up to the longest text answer a question
# may ask for with every character JSON-escaped as a surrogate pair (12 bytes).
SMALL_BODY = 8 * 1024
ENROL_BODY = 64 * 1024
ANSWER_BODY = 12 * MAX_TEXT_ANSWER + SMALL_BODY


def body_cap(method: str, path: str) -> int:
    """HATP-GW-85: the most bytes a request's body may hold, by its route (a path no route takes gets the least)."""
    if method != "POST":
        return 0  # no other method of the inbox reads a body
    if path == "/enrol/register":
        return ENROL_BODY
    if path.startswith("/asks/") and path.endswith("/challenge"):
        return ANSWER_BODY
    return SMALL_BODY


def _refusal(status: int, error: str, rule: str, path: str | None = None) -> Response:
    return JSONResponse({"error": error, "rule": rule, **({"path": path} if path else {})}, status)


class _BoundedBodies:
    """HATP-GW-85: a request's body is read here, at most `body_cap` bytes of it, before any handler runs; a
    Content-Length over the cap is refused 413 without reading a byte, a body without one is refused 413 as soon as
    its count passes the cap. The handler then reads the body from memory. Sits inside _StrictHeaders, so its
    refusals carry the security headers too."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        cap = body_cap(scope["method"], scope["path"])
        declared = [v for k, v in scope.get("headers", []) if k.lower() == b"content-length"]
        if declared:
            if len(declared) > 1 or not declared[0].isdigit():
                await _refusal(400, "the Content-Length is not one number", "HATP-GW-85")(scope, receive, send)
                return
            if int(declared[0]) > cap:
                await _too_large(cap)(scope, receive, send)
                return
        parts: list[bytes] = []
        size, more = 0, True
        while more:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before its body ended: there is no one to answer
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > cap:
                await _drain(receive, message.get("more_body", False))
                await _too_large(cap)(scope, receive, send)
                return
            parts.append(chunk)
            more = message.get("more_body", False)
        body, given = b"".join(parts), False

        async def replay() -> Message:
            nonlocal given
            if not given:
                given = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # after the body: a disconnect, as the server reports it

        await self.app(scope, replay, send)


DRAIN_BYTES = 64 * 1024
DRAIN_SECONDS = 1.0
"""After a streamed body passed its cap, at most DRAIN_BYTES more of it, for at most DRAIN_SECONDS, is read and
dropped before the 413 goes out: a connection closed with bytes unread is reset, and the reset can destroy the
answer before the client reads it. A client that sends more, or stalls, is answered when either bound is reached."""


async def _drain(receive: Receive, more: bool) -> None:
    """Read and drop the rest of a refused body, within DRAIN_BYTES and DRAIN_SECONDS."""
    dropped = 0
    with anyio.move_on_after(DRAIN_SECONDS):
        while more and dropped <= DRAIN_BYTES:
            message = await receive()
            if message["type"] != "http.request":
                return
            dropped += len(message.get("body", b""))
            more = message.get("more_body", False)


def _too_large(cap: int) -> Response:
    return _refusal(413, f"the body is larger than this route takes ({cap} bytes)", "HATP-GW-85")


def _hatp_refusal(request: Request, exc: Exception) -> Response:
    """A refusal a handler did not answer itself (a body the JSON loader refused, HATP-OBJ-1/2/4): 400 with its
    rule and path, never a 500."""
    if not isinstance(exc, HatpError):
        raise exc
    return _refusal(400, exc.reason[:300], exc.rule, exc.path or None)


class _StrictHeaders:
    """Every response of the app carries _HEADERS (HATP-GW-74): the pages, the JSON answers, the redirects, and the
    answers Starlette writes itself (404 for a path no route matches, 405, a 500), set as the response starts."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._raw = [(k.lower().encode(), v.encode()) for k, v in _HEADERS.items()]
        self._names = {k for k, _ in self._raw}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def strict_send(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in self._names]
                message = {**message, "headers": kept + self._raw}
            await send(message)

        await self.app(scope, receive, strict_send)


class Inbox:
    def __init__(
        self,
        gateway: GatewayApprover,
        state: InboxState,
        rp: RelyingParty,
        clock: Clock,
        *,
        session_seconds: float = 900,
        records: RecordShelf | None = None,
        cards: CardWatch | None = None,
    ) -> None:
        self.gateway = gateway
        self.records = records
        self.cards = cards  # HATP-GW-82: the cards as the operator re-signed them, seen before each passkey check
        self.state = state
        self.rp = rp
        self.clock = clock
        self.session_seconds = session_seconds
        self._https = all(o.startswith("https://") for o in rp.origins)  # behind TLS: cookies are Secure
        # HATP-GW-74: behind TLS they are `__Host-` cookies (Secure, path /, no Domain): a sibling host of the same
        # site cannot set one the inbox reads. A page on another port of the same host still can (cookies ignore
        # the port): the inbox gets a host name of its own (spec/gateway.md HATP-GW-74, spec/threat-model.md).
        prefix = "__Host-" if self._https else ""
        self.session_cookie, self.csrf_cookie = prefix + SESSION_COOKIE, prefix + CSRF_COOKIE
        self.app: ASGIApp = _StrictHeaders(
            _BoundedBodies(
                Starlette(
                    exception_handlers={HatpError: _hatp_refusal},
                    routes=[
                        Route("/", self.home, methods=["GET"]),
                        Route("/static/inbox.js", self.script, methods=["GET"]),
                        Route("/static/inbox.css", self.stylesheet, methods=["GET"]),
                        Route("/signin/options", self.signin_options, methods=["POST"]),
                        Route("/signin", self.signin, methods=["POST"]),
                        Route("/signout", self.signout, methods=["POST"]),
                        Route("/enrol", self.enrol_page, methods=["GET"]),
                        Route("/enrol/options", self.enrol_options, methods=["POST"]),
                        Route("/enrol/register", self.enrol_register, methods=["POST"]),
                        Route("/txns/{txn_id}/timeline", self.timeline, methods=["GET"]),
                        Route("/asks/{ask_id:path}/challenge", self.challenge, methods=["POST"]),
                        Route("/asks/{ask_id:path}/decide", self.decide, methods=["POST"]),
                        Route("/asks/{ask_id:path}", self.show, methods=["GET"]),
                    ],
                )
            )
        )

    # -- plumbing ---------------------------------------------------------------------------------------------

    def _now(self) -> str:
        return format_ts(self.clock.now())

    def _session(self, request: Request) -> Session | None:
        sid = request.cookies.get(self.session_cookie)
        return self.state.session(sid, self._now()) if sid else None

    def _html(self, request: Request, body: str, status: int = 200) -> Response:
        return HTMLResponse(body, status)

    def _json(self, data: dict[str, Any], status: int = 200) -> Response:
        return JSONResponse(data, status)

    def _refuse(self, status: int, error: str, rule: str | None = None, path: str | None = None) -> Response:
        return self._json(
            {"error": error, **({"rule": rule} if rule else {}), **({"path": path} if path else {})}, status
        )

    def _csrf_ok(self, request: Request, session: Session | None) -> bool:
        """HATP-GW-73: the Origin is the inbox's own and the token is the session's (or, before sign-in, the
        double-submitted cookie's)."""
        origin = request.headers.get("origin")
        if origin is None or origin not in self.rp.origins:
            return False
        sent = request.headers.get("x-csrf-token", "")
        expected = session.csrf if session is not None else request.cookies.get(self.csrf_cookie, "")
        return bool(sent) and bool(expected) and hmac.compare_digest(sent, expected)

    def _fresh(self) -> None:
        """The organisation's cards as they are now (a passkey the operator just approved counts at once)."""
        if self.cards is not None:
            self.cards.refresh()

    def _mine(self, human: str) -> list[AskRecord]:
        out = []
        for s in self.gateway.store.asks():
            if s.record is not None and any(
                seat.human == human and seat.status in ("asked", "decided") for seat in s.record.seats
            ):
                out.append(s.record)
        return out

    def _card(self, human: str) -> HumanCard | None:
        return self.gateway.directory.card(human)

    # -- pages ------------------------------------------------------------------------------------------------

    async def script(self, request: Request) -> Response:
        return Response(INBOX_JS, media_type="text/javascript")

    async def stylesheet(self, request: Request) -> Response:
        """HATP-GW-88: the pages' one stylesheet, from the inbox's own origin (the CSP's `style-src 'self'`)."""
        return Response(INBOX_CSS, media_type="text/css")

    def _names(self) -> dict[str, str]:
        """Display names by address, from the Directory-signed cards (never a contact detail), and the agents'
        and requesters' addresses have none: they are shown as addresses."""
        return self.gateway.names()

    async def home(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            token = request.cookies.get(self.csrf_cookie) or secrets.token_urlsafe(32)
            response = self._html(request, signin_page(token))
            response.set_cookie(self.csrf_cookie, token, httponly=True, samesite="strict", path="/", secure=self._https)
            return response
        mine = self._mine(session.human)
        timelines = {r.ask.txn_id for r in mine if r.ask.txn_id and self._finished(r) and self._shelved(r.ask.txn_id)}
        page = list_page(session.human, mine, session.csrf, timelines, names=self._names(), now=self.clock.now())
        return self._html(request, page)

    async def show(self, request: Request) -> Response:
        session = self._session(request)
        ask_id = request.path_params["ask_id"]
        if session is None:  # a link from a notice: sign in, then come back here
            return RedirectResponse(f"/?next={quote('/asks/' + ask_id, safe='/')}", 303)
        rec = next((r for r in self._mine(session.human) if r.ask.ask_id == ask_id), None)
        if rec is None:
            return self._html(request, "<!doctype html><title>Not found</title><p>No such ask.</p>", 404)
        can = rec.state == "pending" and any(s.human == session.human and s.status == "asked" for s in rec.seats)
        timeline = rec.ask.txn_id is not None and self._finished(rec) and self._shelved(rec.ask.txn_id)
        page = ask_page(
            rec, session.human, can, session.csrf, timeline=timeline, names=self._names(), now=self.clock.now()
        )
        return self._html(request, page)

    # -- timelines (HATP-GW-81) -------------------------------------------------------------------------------

    @staticmethod
    def _finished(rec: AskRecord) -> bool:
        return rec.state != "pending"

    def _shelved(self, txn_id: str) -> bool:
        return self.records is not None and self.records.has(txn_id)

    async def timeline(self, request: Request) -> Response:
        """A finished transaction the signed-in person was asked about, drawn with every check's result; anyone
        else, and any transaction without a record that matches the plan they were shown, gets 404."""
        session = self._session(request)
        txn_id = request.path_params["txn_id"]
        if session is None:
            return RedirectResponse(f"/?next={quote('/txns/' + txn_id + '/timeline', safe='/')}", 303)
        asked = [r for r in self._mine(session.human) if r.ask.txn_id == txn_id and self._finished(r)]
        records = self.records
        record = records.get(txn_id) if records is not None and asked else None
        if records is None or record is None or record.get("planDigest") not in {r.ask.plan_digest for r in asked}:
            return self._html(request, "<!doctype html><title>Not found</title><p>No such transaction.</p>", 404)
        ring = records.keyring()
        if ring is None:  # nothing to check it with: not shown, never shown unchecked
            return self._html(request, "<!doctype html><title>Not checked</title><p>No keyring to check it.</p>", 503)
        humans = HumanKeys.from_cards(self.gateway.directory.cards(), self.rp)
        problems = verify_record(record, ring, humans=humans)
        return self._html(request, render_timeline(record, problems, back="/", names=self._names(), inbox=True))

    # -- sign-in ----------------------------------------------------------------------------------------------

    async def signin_options(self, request: Request) -> Response:
        if not self._csrf_ok(request, None):
            return self._refuse(403, "cross-site or token-less request refused", "HATP-GW-73")
        nonce = secrets.token_urlsafe(18)
        challenge = secrets.token_bytes(32)
        expires = format_ts(self.clock.now() + timedelta(seconds=CHALLENGE_SECONDS))
        self.state.keep_challenge(nonce, "signin", None, {"challenge": b64u(challenge)}, expires, self._now())
        return self._json(
            {
                "nonce": nonce,
                "challenge": b64u(challenge),
                "rpId": self.rp.rp_id,
                "timeout": 60000,
                "allowCredentials": [],
            }
        )

    async def signin(self, request: Request) -> Response:
        if not self._csrf_ok(request, None):
            return self._refuse(403, "cross-site or token-less request refused", "HATP-GW-73")
        self._fresh()
        body = await _body(request)
        kept = self.state.take_challenge(str(body.get("nonce", "")), "signin", self._now())
        credential = body.get("credential") or {}
        if kept is None:
            return self._refuse(400, "unknown, used or expired sign-in challenge", "HATP-GW-67")
        found = self._credential(str(credential.get("id", "")))
        if found is None:
            return self._refuse(403, "this passkey is not on any signed card", "HATP-GW-68")
        card, public_key = found
        try:
            verified = verify_authentication_response(
                credential=credential,
                expected_challenge=unb64u(kept[1]["challenge"]),
                expected_rp_id=self.rp.rp_id,
                expected_origin=list(self.rp.origins),
                credential_public_key=public_key,
                credential_current_sign_count=self.state.sign_count(str(credential["id"])),
                require_user_verification=True,
            )
        except (InvalidAuthenticationResponse, ValueError, KeyError, TypeError) as exc:
            return self._refuse(403, f"sign-in refused: {str(exc)[:200]}", "HATP-GW-68")
        self.state.set_sign_count(str(credential["id"]), int(verified.new_sign_count))
        session = Session(
            secrets.token_urlsafe(32),
            card.id,
            secrets.token_urlsafe(32),
            format_ts(self.clock.now() + timedelta(seconds=self.session_seconds)),
        )
        self.state.open_session(session)
        response = self._json({"human": card.id})
        response.set_cookie(
            self.session_cookie,
            session.sid,
            max_age=int(self.session_seconds),
            httponly=True,
            samesite="strict",
            path="/",
            secure=self._https,
        )
        return response

    def _credential(self, credential_id: str) -> tuple[HumanCard, bytes] | None:
        for card in self.gateway.directory.cards():
            for k in card.keys:
                if k.type == "passkey" and k.id == credential_id:
                    return card, unb64u(k.public_key)
        return None

    async def signout(self, request: Request) -> Response:
        session = self._session(request)
        if session is None or not self._csrf_ok(request, session):
            return self._refuse(403, "cross-site or token-less request refused", "HATP-GW-73")
        self.state.end_session(session.sid)
        response = self._json({"signedOut": True})
        response.delete_cookie(self.session_cookie, path="/", secure=self._https)
        return response

    # -- enrolment (HATP-GW-71) ---------------------------------------------------------------------------------

    async def enrol_page(self, request: Request) -> Response:
        session = self._session(request)
        token = (
            session.csrf
            if session is not None
            else (request.cookies.get(self.csrf_cookie) or secrets.token_urlsafe(32))
        )
        response = self._html(request, enrol_page(token))
        if session is None:
            response.set_cookie(self.csrf_cookie, token, httponly=True, samesite="strict", path="/", secure=self._https)
        return response

    def _enrolling(self, session: Session | None, code: str) -> tuple[str, str | None] | None:
        """Who may register: the holder of an unexpired one-time code the operator issued, or a signed-in person
        (adding a passkey, proven again at registration by a fresh assertion, HATP-GW-86). Returns (human, code
        hash or None)."""
        if code:
            code_hash = hashlib.sha256(code.encode()).hexdigest()
            human = self.state.enrol_code(code_hash, self._now())
            return (human, code_hash) if human is not None else None
        return (session.human, None) if session is not None else None

    async def enrol_options(self, request: Request) -> Response:
        session = self._session(request)
        if not self._csrf_ok(request, session):
            return self._refuse(403, "cross-site or token-less request refused", "HATP-GW-73")
        who = self._enrolling(session, str((await _body(request)).get("code", "")))
        if who is None or self._card(who[0]) is None:
            return self._refuse(403, "no valid enrolment code, and not signed in", "HATP-GW-71")
        human, code_hash = who
        card = self._card(human)
        existing = [k.id for k in card.keys if k.type == "passkey" and _is_b64u(k.id)] if card is not None else []
        options = generate_registration_options(
            rp_id=self.rp.rp_id,
            rp_name="HATP inbox",
            user_name=human,
            user_id=hashlib.sha256(human.encode()).digest()[:16],
            user_display_name=card.display_name if card is not None else human,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.REQUIRED, user_verification=UserVerificationRequirement.REQUIRED
            ),
            supported_pub_key_algs=[COSEAlgorithmIdentifier.ECDSA_SHA_256],
            exclude_credentials=[PublicKeyCredentialDescriptor(id=unb64u(c)) for c in existing],
        )
        nonce = secrets.token_urlsafe(18)
        expires = format_ts(self.clock.now() + timedelta(seconds=CHALLENGE_SECONDS))
        kept: dict[str, Any] = {"challenge": b64u(options.challenge), "codeHash": code_hash}
        answer: dict[str, Any] = {"nonce": nonce, "publicKey": json.loads(options_to_json(options))}
        if code_hash is None:  # HATP-GW-86: signed in, so a passkey already on the card asserts the addition
            if not existing:
                return self._refuse(403, "your card lists no passkey: enrol with your operator's code", "HATP-GW-86")
            kept["assertChallenge"] = b64u(secrets.token_bytes(32))
            answer["assertion"] = {
                "challenge": kept["assertChallenge"],
                "rpId": self.rp.rp_id,
                "timeout": 60000,
                "allowCredentials": existing,
            }
        self.state.keep_challenge(nonce, "enrol", human, kept, expires, self._now())
        return self._json(answer)

    def _fresh_assertion(self, human: str, challenge: str, assertion: Any) -> str | None:
        """HATP-GW-86: the id of the passkey on `human`'s card that asserted `challenge` just now (user verified,
        exact origin and rpId, a rising counter), or None."""
        if not isinstance(assertion, dict):
            return None
        found = self._credential(str(assertion.get("id", "")))
        if found is None or found[0].id != human:
            return None
        try:
            verified = verify_authentication_response(
                credential=assertion,
                expected_challenge=unb64u(challenge),
                expected_rp_id=self.rp.rp_id,
                expected_origin=list(self.rp.origins),
                credential_public_key=found[1],
                credential_current_sign_count=self.state.sign_count(str(assertion["id"])),
                require_user_verification=True,
            )
        except (InvalidAuthenticationResponse, ValueError, KeyError, TypeError):
            return None
        self.state.set_sign_count(str(assertion["id"]), int(verified.new_sign_count))
        return str(assertion["id"])

    async def enrol_register(self, request: Request) -> Response:
        session = self._session(request)
        if not self._csrf_ok(request, session):
            return self._refuse(403, "cross-site or token-less request refused", "HATP-GW-73")
        body = await _body(request)
        kept = self.state.take_challenge(str(body.get("nonce", "")), "enrol", self._now())
        if kept is None or kept[0] is None:
            return self._refuse(400, "unknown, used or expired enrolment challenge", "HATP-GW-71")
        human, payload = kept[0], kept[1]
        authorized_by = "code"
        if payload.get("codeHash") is None:  # HATP-GW-86: a session alone (a stolen cookie) adds no passkey
            asserted = None
            if session is not None and session.human == human and isinstance(payload.get("assertChallenge"), str):
                asserted = self._fresh_assertion(human, payload["assertChallenge"], body.get("assertion"))
            if asserted is None:
                return self._refuse(
                    403,
                    "adding a passkey while signed in needs a fresh assertion of a passkey already on your card"
                    " (or your operator's enrolment code): nothing was registered",
                    "HATP-GW-86",
                )
            authorized_by = f"passkey {asserted}"
        try:
            verified = verify_registration_response(
                credential=body.get("credential") or {},
                expected_challenge=unb64u(payload["challenge"]),
                expected_rp_id=self.rp.rp_id,
                expected_origin=list(self.rp.origins),
                require_user_verification=True,
                supported_pub_key_algs=[COSEAlgorithmIdentifier.ECDSA_SHA_256],
            )
        except (InvalidRegistrationResponse, ValueError, KeyError, TypeError) as exc:
            return self._refuse(403, f"registration refused: {str(exc)[:200]}", "HATP-GW-71")
        try:
            seq = self.state.register(
                payload.get("codeHash"),
                human,
                b64u(verified.credential_id),
                b64u(verified.credential_public_key),
                self._now(),
                authorized_by,
            )
        except (KeyError, sqlite3.IntegrityError):
            return self._refuse(409, "the code was used, or this passkey is already registered", "HATP-GW-71")
        return self._json({"enrolment": seq, "state": "pending", "human": human})

    # -- deciding ---------------------------------------------------------------------------------------------

    async def challenge(self, request: Request) -> Response:
        session = self._session(request)
        if session is None or not self._csrf_ok(request, session):
            return self._refuse(403, "cross-site, token-less or signed-out request refused", "HATP-GW-73")
        self._fresh()
        ask_id = request.path_params["ask_id"]
        rec = next((r for r in self._mine(session.human) if r.ask.ask_id == ask_id), None)
        body = await _body(request)
        decision, value, reason = str(body.get("decision", "")), body.get("value"), body.get("reason")
        if rec is None:
            return self._refuse(404, "no such ask")
        if reason is not None and (
            decision != "reject" or not isinstance(reason, str) or not 1 <= len(reason) <= REASON_MAX
        ):  # HATP-GW-87: only a reject carries a reason, a sentence or two, signed with the decision
            return self._refuse(
                400, f"a reason goes with a reject only, as 1 to {REASON_MAX} characters", "HATP-GW-87", "reason"
            )
        if rec.ask.kind == "approve" and decision not in ("approve", "reject", "decline"):
            return self._refuse(400, "decision is approve, reject or decline", "HATP-GW-67")
        if rec.ask.kind != "approve":
            if decision not in ("answer", "decline"):
                return self._refuse(400, f"a {rec.ask.kind} question is answered or declined", "HATP-ASK-6")
            if decision == "answer":
                try:  # HATP-GW-80: an answer that does not fit is refused here, before there is anything to sign
                    core_asks.check_fits(rec.ask, value)
                except HatpError as exc:
                    return self._refuse(400, exc.reason[:300], exc.rule, exc.path)
        card = self._card(session.human)
        # only real credential ids (base64url): a card may still list a placeholder entry
        creds = [k.id for k in card.keys if k.type == "passkey" and _is_b64u(k.id)] if card is not None else []
        if not creds:
            return self._refuse(403, "your card lists no passkey: enrol one first", "HATP-GW-68")
        nonce, issued = secrets.token_urlsafe(18), self._now()
        subject = subject_digest(rec.ask)
        payload = decision_payload(ask_id, subject, decision, nonce, issued, value, reason)
        expires = format_ts(self.clock.now() + timedelta(seconds=CHALLENGE_SECONDS))
        self.state.keep_challenge(nonce, "decide", session.human, payload, expires, self._now())
        challenge = decision_challenge(ask_id, subject, decision, nonce, issued, value, reason)
        return self._json(
            {
                "nonce": nonce,
                "challenge": b64u(challenge),
                "rpId": self.rp.rp_id,
                "timeout": 60000,
                "allowCredentials": creds,
                "payload": payload,
            }
        )

    async def decide(self, request: Request) -> Response:
        session = self._session(request)
        if session is None or not self._csrf_ok(request, session):
            return self._refuse(403, "cross-site, token-less or signed-out request refused", "HATP-GW-73")
        self._fresh()
        ask_id = request.path_params["ask_id"]
        body = await _body(request)
        kept = self.state.take_challenge(str(body.get("nonce", "")), "decide", self._now())
        if kept is None or kept[0] != session.human or kept[1].get("askId") != ask_id:
            return self._refuse(400, "unknown, used or expired challenge for this ask", "HATP-GW-67")
        payload, credential = kept[1], body.get("credential") or {}
        response = credential.get("response") or {}
        try:
            assertion = PasskeyAssertion(
                ask_id=payload["askId"],
                subject_digest=payload["subjectDigest"],
                human=session.human,
                decision=payload["decision"],
                value=payload.get("value"),
                reason=payload.get("reason"),
                nonce=payload["nonce"],
                issued_at=payload["issuedAt"],
                credential_id=str(credential.get("id", "")),
                authenticator_data=str(response.get("authenticatorData", "")),
                client_data_json=str(response.get("clientDataJSON", "")),
                signature=str(response.get("signature", "")),
                user_handle=response.get("userHandle") or None,
            )
            last = self.state.sign_count(assertion.credential_id)
            after, count = await self.gateway.decide_passkey(ask_id, assertion, self.rp, last, via="inbox-passkey")
        except HatpError as exc:
            return self._refuse(403, exc.reason[:300], exc.rule)
        except (ValueError, KeyError) as exc:
            return self._refuse(400, f"unreadable assertion: {str(exc)[:200]}", "HATP-GW-68")
        self.state.set_sign_count(assertion.credential_id, count)
        return self._json({"state": after.state})


def _is_b64u(text: str) -> bool:
    try:
        return b64u(unb64u(text)) == text
    except ValueError:
        return False


async def _body(request: Request) -> dict[str, Any]:
    """The JSON object a POST carries (already bounded, HATP-GW-85), read by the one JSON loader; an empty body or
    another JSON value is an empty object (the handlers then refuse it). Raises WireError HATP-OBJ-1/2/4 for a
    body that is not JSON, nests too deep or holds a number a double cannot (the app answers it 400)."""
    raw = await request.body()
    if not raw.strip():
        return {}
    body = load_json(raw, "the request body")
    return body if isinstance(body, dict) else {}
