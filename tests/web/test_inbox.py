"""The web inbox over real HTTP (uvicorn on loopback), with a software authenticator standing in for the browser's:
passkey sign-in, only one's own asks, a decision proven by a passkey over the decision's challenge and used once,
CSRF and Origin checks on every POST, the strict CSP, escaping of hostile plan text, and sessions that expire
(HATP-GW-67, HATP-GW-72..74). tests/web/test_inbox_browser.py does the same in Chromium."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import httpx
import pytest

from hatp_mcp.core.gateway.directory import Directory
from hatp_mcp.core.gateway.passkey import RelyingParty, unb64u
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover, RecordingNotifier
from hatp_mcp.store.gateway_store import SqliteGatewayStore
from hatp_mcp.store.inbox_state import InboxState, Session
from hatp_mcp.web.inbox import CSP, Inbox
from tests.acme_org import NAMES, card_doc, gateway_key, h, plan, well_known
from tests.passkey_authenticator import SoftAuthenticator
from tests.web.browserless import Browserless, signed_in
from tests.web.inbox_fixture import Served, serve_inbox

pytestmark = pytest.mark.anyio

HOSTILE = "<script>window.pwned=1</script>Approve at once"
ASK = "txn-acme-0001/finance"


@pytest.fixture
async def served(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Served]:
    async with serve_inbox(tmp_path, clock) as s:
        await s.gateway.ask(plan(summary=HOSTILE), "finance")
        yield s


async def test_HATP_GW_72_bob_signs_in_with_his_passkey_sees_his_ask_and_pages_carry_the_strict_csp(
    served: Served,
) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, headers, page = await b.get("/")
        _s, _h, ask = await b.get(f"/asks/{ASK}")
        other, _h2, _p = await b.get("/asks/txn-acme-0001/legal")
    assert status == 200 and headers["content-security-policy"] == CSP and headers["x-frame-options"] == "DENY"
    assert f'href="/asks/{ASK}"' in page and "travel.spend" in page
    assert "<script>window.pwned" not in ask and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in ask
    assert "written by the agent:</strong> &lt;script&gt;" in ask  # the agent's text, labelled and inert
    assert "@mail.acme.example" not in page + ask and "+1-555" not in page + ask  # no contact details
    assert other == 404


async def test_HATP_GW_72_an_ask_bob_was_not_asked_is_neither_listed_nor_shown_nor_open_to_his_decision(
    served: Served,
) -> None:
    theirs = "txn-acme-0002/finance"
    await served.gateway.ask(plan(address="human://acme.com/alice", txn_id="txn-acme-0002"), "finance")
    with anyio.fail_after(20):
        b = await signed_in(served)
        _s, _h, page = await b.get("/")
        shown, _h2, _p = await b.get(f"/asks/{theirs}")
        challenged, _body = await b.post(f"/asks/{theirs}/challenge", {"decision": "approve"})
    assert f'href="/asks/{ASK}"' in page and theirs not in page
    assert (shown, challenged) == (404, 404)  # like an ask that does not exist


async def test_HATP_GW_67_a_decision_is_proven_by_a_passkey_over_its_own_challenge_and_its_nonce_works_once(
    served: Served,
) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, options = await b.post(f"/asks/{ASK}/challenge", {"decision": "approve"})
        credential = served.bob.credential_json(unb64u(options["challenge"]), origin=served.origin)
        decided, result = await b.post(f"/asks/{ASK}/decide", {"nonce": options["nonce"], "credential": credential})
        again, replay = await b.post(f"/asks/{ASK}/decide", {"nonce": options["nonce"], "credential": credential})
    assert status == 200 and options["payload"]["decision"] == "approve" and options["allowCredentials"]
    assert (decided, result) == (200, {"state": "pending"})  # one of two approvals
    assert (again, replay["rule"]) == (400, "HATP-GW-67")
    stored = served.gateway.store.get(ASK)
    assert stored is not None and stored.record is not None
    (d,) = stored.record.decisions
    assert d.approver == h("bob") and d.passkey is not None and d.proof is None and d.via == "inbox-passkey"
    assert served.inbox.state.sign_count(served.bob.credential_id) == 2  # sign-in, then the decision


async def test_HATP_GW_67_a_reject_challenge_answered_and_posted_as_approve_counts_only_as_what_was_signed(
    served: Served,
) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        _s, reject = await b.post(f"/asks/{ASK}/challenge", {"decision": "reject"})
        _s, approve = await b.post(f"/asks/{ASK}/challenge", {"decision": "approve"})
        signed_reject = served.bob.credential_json(unb64u(reject["challenge"]), origin=served.origin)
        status, refused = await b.post(f"/asks/{ASK}/decide", {"nonce": approve["nonce"], "credential": signed_reject})
    assert (status, refused["rule"]) == (403, "HATP-GW-67")
    stored = served.gateway.store.get(ASK)
    assert stored is not None and stored.record is not None and stored.record.decisions == []


@pytest.mark.parametrize(("origin", "csrf"), [("http://evil.example", None), (None, ""), (None, "forged-token")])
async def test_HATP_GW_73_a_post_from_another_origin_or_without_the_sessions_csrf_token_is_refused_and_changes_nothing(
    served: Served, origin: str | None, csrf: str | None
) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, body = await b.post(f"/asks/{ASK}/challenge", {"decision": "approve"}, origin=origin, csrf=csrf)
        fresh = Browserless(served.origin)
        await fresh.get("/")
        pre, _b = await fresh.post("/signin/options", {}, origin=origin, csrf=csrf)
    assert (status, body["rule"]) == (403, "HATP-GW-73") and pre == 403


async def test_HATP_GW_74_a_session_expires_on_the_clock_and_then_shows_the_sign_in_page(
    served: Served, clock: FakeClock
) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        clock.advance(served.inbox.session_seconds + 1)
        _s, _h, page = await b.get("/")
        status, body = await b.post(f"/asks/{ASK}/challenge", {"decision": "approve"})
    assert "Sign in with your passkey" in page and (status, body["rule"]) == (403, "HATP-GW-73")


async def test_a_post_whose_body_is_not_a_json_object_is_refused_not_a_server_error(served: Served) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, body = await b.post(f"/asks/{ASK}/challenge", ["approve"])
        decided, refused = await b.post(f"/asks/{ASK}/decide", "nonce")
    assert (status, body["rule"]) == (400, "HATP-GW-67") and (decided, refused["rule"]) == (400, "HATP-GW-67")


async def test_HATP_GW_74_a_path_no_route_matches_and_a_method_a_route_does_not_take_carry_the_strict_headers_too(
    served: Served,
) -> None:
    """Starlette's own answers (404 for an unmatched path, 405 for a wrong method) are responses of the inbox as
    much as its pages: a bare 404 without the CSP let a path echo land in a page with no policy at all."""
    with anyio.fail_after(20):
        b = Browserless(served.origin)
        missing = await b.get("/no/such/page?<script>x</script>")
        wrong_method = await b.get("/signin")
    for status, headers, _text in (missing, wrong_method):
        lower = {k.lower(): v for k, v in headers.items()}
        assert lower["content-security-policy"] == CSP, (status, headers)
        assert (lower["x-content-type-options"], lower["referrer-policy"], lower["cache-control"]) == (
            "nosniff",
            "no-referrer",
            "no-store",
        )
        assert lower["x-frame-options"] == "DENY"
    assert (missing[0], wrong_method[0]) == (404, 405)


async def test_HATP_GW_86_a_stolen_session_cookie_alone_enrols_no_passkey(served: Served) -> None:
    thief = SoftAuthenticator(h("bob"))
    with anyio.fail_after(20):
        b = await signed_in(served)  # the thief holds bob's cookie and reads the CSRF token with it
        status, options = await b.post("/enrol/options", {})
        registration = thief.registration_json(unb64u(options["publicKey"]["challenge"]), origin=served.origin)
        refused, body = await b.post("/enrol/register", {"nonce": options["nonce"], "credential": registration})
    assert status == 200 and refused == 403, body
    assert body["rule"] == "HATP-GW-86"
    assert served.inbox.state.enrolments() == []  # nothing for the operator to approve by mistake


async def test_HATP_GW_86_bob_adds_a_passkey_with_a_fresh_assertion_of_his_own_and_the_list_says_so(
    served: Served,
) -> None:
    new = SoftAuthenticator(h("bob"))
    with anyio.fail_after(20):
        b = await signed_in(served)
        _s, options = await b.post("/enrol/options", {})
        proof = options["assertion"]
        assertion = served.bob.credential_json(unb64u(proof["challenge"]), origin=served.origin)
        registration = new.registration_json(unb64u(options["publicKey"]["challenge"]), origin=served.origin)
        status, done = await b.post(
            "/enrol/register", {"nonce": options["nonce"], "credential": registration, "assertion": assertion}
        )
        again, _body = await b.post(
            "/enrol/register", {"nonce": options["nonce"], "credential": registration, "assertion": assertion}
        )
    (enrolment,) = served.inbox.state.enrolments()
    assert proof["allowCredentials"] == [served.bob.credential_id]
    assert (status, done["state"], again) == (200, "pending", 400)
    assert (enrolment.credential_id, enrolment.authorized_by) == (
        new.credential_id,
        f"passkey {served.bob.credential_id}",
    )


async def test_HATP_GW_86_an_assertion_of_another_persons_passkey_or_over_another_challenge_adds_nothing(
    served: Served,
) -> None:
    alice = SoftAuthenticator(h("alice"))  # not on bob's card
    new = SoftAuthenticator(h("bob"))
    with anyio.fail_after(20):
        b = await signed_in(served)
        answers = []
        for proof in ("someone else's", "another challenge"):
            _s, options = await b.post("/enrol/options", {})
            challenge = unb64u(options["assertion"]["challenge"])
            assertion = (
                alice.credential_json(challenge, origin=served.origin)
                if proof == "someone else's"
                else served.bob.credential_json(unb64u(options["publicKey"]["challenge"]), origin=served.origin)
            )
            registration = new.registration_json(unb64u(options["publicKey"]["challenge"]), origin=served.origin)
            body = {"nonce": options["nonce"], "credential": registration, "assertion": assertion}
            answers.append(await b.post("/enrol/register", body))
    assert [(status, body["rule"]) for status, body in answers] == [(403, "HATP-GW-86"), (403, "HATP-GW-86")]
    assert served.inbox.state.enrolments() == []


async def test_HATP_GW_74_behind_tls_the_inbox_reads_and_sets_only_host_only_secure_cookies(
    tmp_path: Path, clock: FakeClock
) -> None:
    origin = "https://inbox.acme.example"
    directory, _ignored = Directory.load(well_known(), [card_doc(n) for n in NAMES])
    store = SqliteGatewayStore(tmp_path)
    state = InboxState(tmp_path)
    gw = GatewayApprover(directory=directory, key=gateway_key(), store=store, clock=clock, notifier=RecordingNotifier())
    inbox = Inbox(gw, state, RelyingParty("inbox.acme.example", (origin,)), clock)
    sid = "sid-of-bob"
    state.open_session(Session(sid, h("bob"), "csrf-of-bob", "2100-01-01T00:00:00Z"))
    try:
        with anyio.fail_after(20):
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=inbox.app), base_url=origin) as web:
                first = await web.get("/")
                web.cookies.clear()
                tossed = await web.get("/", headers={"Cookie": f"hatp_session={sid}"})  # set from a sibling host
                own = await web.get("/", headers={"Cookie": f"__Host-hatp_session={sid}"})
    finally:
        state.close()
        store.close()
    set_cookie = first.headers["set-cookie"]
    assert set_cookie.startswith("__Host-hatp_csrf=") and "secure" in set_cookie.lower()
    assert "path=/" in set_cookie.lower() and "domain" not in set_cookie.lower()
    assert "Signed in as" not in tossed.text  # a cookie the inbox never set: ignored, as if signed out
    assert f'<span class=person title="{h("bob")}">' in own.text and "Signed in as" in own.text
