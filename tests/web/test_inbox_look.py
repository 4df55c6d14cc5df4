"""The inbox as approvers expect it (HATP-GW-88), in Chromium at a desktop's 1280 px and a phone's 360 px: the summary
(who asks, what, up to how much), the step that cannot be undone and the countdown fit the first screen on a desktop;
nothing scrolls sideways on a phone; a reject carries the person's reason, signed with their passkey, into the
gateway's no vote (HATP-GW-87). The tests write the README's screenshots to docs/screenshots/ on every run."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.async_api import Page

from demo.trip_world import build_world
from hatp_mcp.core.gateway.machine import open_approval
from hatp_mcp.core.gateway.passkey import unb64u
from hatp_mcp.core.gateway.proof import subject_digest
from hatp_mcp.core.gateway.screen import final_words
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.model.when import in_words
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.web import pages
from hatp_mcp.web.inbox import CSP
from hatp_mcp.web.pages import INBOX_JS, ask_page
from hatp_mcp.web.record_shelf import RecordShelf
from tests.acme_org import GATEWAY_ID, directory, h, plan
from tests.mcp.test_model_answers import agent_view, approving, status_of
from tests.web.browserless import signed_in
from tests.web.chromium import chromium_page
from tests.web.inbox_fixture import Served, serve_inbox
from tests.web.record_fixture import committed_record
from tests.web.test_inbox_timeline import keys, shelve

pytestmark = pytest.mark.anyio

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
ASK = "txn-acme-0001/finance"
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 360, "height": 740}
TRIP = "Dana's offsite in Berlin: venue deposit"
EARLIER = "Dana's flight to Lisbon"


@pytest.fixture
async def served_plain(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Served]:
    async with serve_inbox(tmp_path, clock) as s:
        yield s


async def _sign_in(served: Served, page: Page, cdp: Any, authenticator: str, path: str = "/") -> None:
    await cdp.send("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": served.cdp_credential()})
    await page.goto(served.origin + path)
    await page.click("#signin")


async def _on_first_screen(page: Page, selector: str) -> bool:
    box = await page.locator(selector).first.bounding_box()
    size = page.viewport_size
    assert size is not None
    return box is not None and box["y"] >= 0 and box["y"] + box["height"] <= size["height"] and box["width"] > 0


async def test_HATP_GW_88_on_a_desktop_the_summary_the_final_step_and_the_countdown_show_without_scrolling(
    tmp_path: Path, clock: FakeClock
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (_context, page, cdp, authenticator):
            await served.gateway.ask(plan(summary=TRIP), "finance")
            await served.gateway.ask(plan(summary=EARLIER, txn_id="txn-acme-0002"), "finance")
            earlier = served.gateway.store.get("txn-acme-0002/finance")
            assert earlier is not None and earlier.record is not None
            when = format_ts(clock.now())
            rejected = served.bob.decide(
                "txn-acme-0002/finance", subject_digest(earlier.record.ask), "reject", when, origin=served.origin
            )
            await served.gateway.decide_passkey("txn-acme-0002/finance", rejected, served.inbox.rp, 0, via="inbox")
            await page.set_viewport_size(DESKTOP)
            await _sign_in(served, page, cdp, authenticator)
            await page.wait_for_selector("#waiting")
            listed = await page.locator("#waiting li.ask").inner_text()
            decided = await page.locator("#decided li.ask").inner_text()
            await page.screenshot(path=str(SHOTS / "list.png"), full_page=True)
            await page.click(f'a[href="/asks/{ASK}"]')
            await page.wait_for_selector("#actions")
            await page.wait_for_load_state("load")  # after the page script localised its times
            seen = {s: await _on_first_screen(page, s) for s in ("#headline", "#amount", "#irreversible", ".countdown")}
            headline = await page.locator("#headline").inner_text()
            irreversible = await page.locator("#irreversible").inner_text()
            countdown = await page.locator("#deadline .countdown").inner_text()
            labels = await page.locator("text=written by the agent:").count()
            blocks = await page.locator(".agent-written").count()
            digest_hidden = not await page.locator("#details dd code").last.is_visible()
            await page.screenshot(path=str(SHOTS / "ask.png"), full_page=True)
    assert TRIP in listed and "written by the agent" in listed  # the trip's summary rides with the ask, labelled
    assert EARLIER in decided and "state rejected" in decided  # decided asks apart from the waiting one
    assert all(seen.values()), seen
    assert headline == "Dana Diaz asks you to approve travel.spend"
    assert "human://" not in headline  # a person by display name; the address is on hover and in the details
    assert irreversible.startswith("This payment cannot be undone once approved.")  # final_words, as a model reads
    assert countdown.startswith("(in ") and countdown.endswith("min)")
    assert labels == blocks  # one label per agent-written block
    assert digest_hidden  # the digest and ids are folded into a details section


async def test_HATP_GW_88_on_a_phone_nothing_scrolls_sideways_the_deadline_is_in_local_time_and_the_css_is_the_inbox_s(
    tmp_path: Path, clock: FakeClock
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with anyio.fail_after(60):
        async with (
            serve_inbox(tmp_path, clock) as served,
            # the approver's zone, and the locale set, not the machine's: the words toLocaleString writes depend on it
            chromium_page(locale="en-US", timezone="Europe/Berlin") as (_context, page, cdp, authenticator),
        ):
            await served.gateway.ask(plan(summary=TRIP), "finance")
            await page.set_viewport_size(PHONE)
            sheets: list[str] = []
            page.on("response", lambda r: sheets.append(r.url) if r.url.endswith(".css") and r.ok else None)
            await _sign_in(served, page, cdp, authenticator, f"/asks/{ASK}")
            await page.wait_for_selector("#actions")
            await page.wait_for_load_state("load")  # after the page script localised its times
            widths = await page.evaluate(
                "[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth, window.innerWidth]"
            )
            local = await page.locator("#deadline time").inner_text()
            utc = await page.locator("#deadline time").get_attribute("datetime")
            list_widths = None
            await page.screenshot(path=str(SHOTS / "ask-phone.png"), full_page=True)
            await page.goto(served.origin + "/")
            await page.wait_for_selector("#waiting")
            list_widths = await page.evaluate(
                "[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth]"
            )
    assert utc == "2026-11-29T14:00:00Z" and "03:00 PM" in local and "GMT+1" in local  # 14:00 UTC in Berlin
    scroll, client, inner = widths
    assert inner == PHONE["width"]  # the viewport tag: laid out at the phone's width, not a desktop's 980 px
    assert scroll <= client, widths
    assert list_widths is not None and list_widths[0] <= list_widths[1], list_widths
    assert sheets == [served.origin + "/static/inbox.css"] * len(sheets) and sheets


async def test_HATP_GW_88_the_stylesheet_comes_from_the_inbox_itself_under_the_unchanged_csp(
    served_plain: Served,
) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served_plain)
        status, headers, css = await b.get("/static/inbox.css")
        _s, _h, page = await b.get("/")
    assert status == 200 and headers["content-type"].startswith("text/css") and "@media" in css
    assert headers["content-security-policy"] == CSP and "style-src 'self'" in CSP and "unsafe-inline" not in CSP
    assert "<link rel=stylesheet href=/static/inbox.css>" in page and "<style" not in page and " style=" not in page
    assert 'name=viewport content="width=device-width, initial-scale=1"' in page


async def test_HATP_GW_87_HATP_GW_93_bob_rejects_with_a_reason_in_chromium_and_the_no_vote_names_him_and_carries_it(
    tmp_path: Path, clock: FakeClock
) -> None:
    reason = "The venue is over budget: ask for the smaller room <b>first</b>"
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (_context, page, cdp, authenticator):
            await served.gateway.ask(plan(summary=TRIP), "finance")
            await page.set_viewport_size(DESKTOP)
            await _sign_in(served, page, cdp, authenticator, f"/asks/{ASK}")
            await page.wait_for_selector("#actions")
            await page.wait_for_load_state("load")  # after the page script localised its times
            passes_to = await page.locator("#pass").inner_text()
            await page.fill("#reason", reason)
            await page.click("button[data-decision=reject]")
            await page.wait_for_selector("#message:text-matches('^(Recorded|Not recorded)')")
            message = await page.locator("#message").inner_text()
            await page.click("#outcome-link")
            await page.wait_for_selector("#outcome")
            shown = await page.locator("#your-reason").inner_text()
            rejected_by = await page.locator("#rejected-by").inner_text()
            rejected_title = await page.locator("#rejected-by .person").get_attribute("title")
            stored = served.gateway.store.get(ASK)
            answer = await served.gateway.poll("txn-acme-0001", "finance")  # the signed vote the coordinator gets
    assert passes_to == "Pass it on (no one else is left to ask)"  # bob, carol and frank are all asked already
    assert message == "Recorded: reject. The ask is rejected."
    assert shown == reason
    assert stored is not None and stored.record is not None
    (d,) = stored.record.decisions
    assert (d.approver, d.decision, d.reason) == (h("bob"), "reject", reason)
    assert d.passkey is not None and d.passkey.reason == reason  # signed with his passkey, not added after
    vote = answer.vote  # what the coordinator passes to the agent's status
    assert (vote["decision"], vote["code"], vote["reason"]) == (
        "no",
        "REJECTED",
        f"rejected by Bob Brown ({h('bob')}): {reason}",  # HATP-GW-93: the name, the address beside it
    )
    assert rejected_by == "Rejected by Bob Brown." and rejected_title == h("bob")


async def test_HATP_GW_87_a_reason_with_an_approve_is_refused_before_anything_is_signed(served_plain: Served) -> None:
    with anyio.fail_after(20):
        await served_plain.gateway.ask(plan(), "finance")
        b = await signed_in(served_plain)
        status, body = await b.post(f"/asks/{ASK}/challenge", {"decision": "approve", "reason": "fine"})
        too_long, refused = await b.post(f"/asks/{ASK}/challenge", {"decision": "reject", "reason": "x" * 501})
        ok, kept = await b.post(f"/asks/{ASK}/challenge", {"decision": "reject", "reason": "no"})
    assert status == 400 and body["rule"] == "HATP-GW-87" and body["path"] == "reason"
    assert too_long == 400 and refused["rule"] == "HATP-GW-87"
    assert ok == 200 and kept["payload"]["reason"] == "no"


async def test_HATP_GW_88_after_a_decision_the_page_shows_the_outcome_and_the_timeline_link(
    tmp_path: Path, clock: FakeClock
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (_context, page, cdp, authenticator):
            record, ring = await committed_record(served, plan(summary=TRIP))
            shelve(tmp_path / "records", record)
            served.inbox.records = RecordShelf(tmp_path / "records", keys(tmp_path, ring))
            await page.set_viewport_size(DESKTOP)
            await _sign_in(served, page, cdp, authenticator, f"/asks/{ASK}")
            await page.wait_for_selector("#outcome")
            outcome = await page.locator("#outcome").inner_text()
            actions = await page.locator("#actions").count()
            await page.screenshot(path=str(SHOTS / "decided.png"), full_page=True)
            await page.click("#timeline")
            await page.wait_for_selector("svg")  # its screenshots: tests/web/test_inbox_timeline.py
            await page.wait_for_load_state("load")  # after the page script localised its times
            await page.goto(served.origin + "/")
            await page.wait_for_selector("#decided")
            decided = await page.locator("#decided").inner_text()
            waiting = await page.locator("#waiting").count()
    assert "The ask is approved." in outcome and "You chose approve." in outcome
    assert actions == 0 and waiting == 0
    assert TRIP in decided and "timeline" in decided


async def test_HATP_GW_88_pass_it_on_names_the_person_the_ask_goes_to_next(served_plain: Served) -> None:
    await served_plain.gateway.ask(plan(), "finance")
    stored = served_plain.gateway.store.get(ASK)
    assert stored is not None and stored.record is not None
    rec = stored.record
    seats = [s.model_copy(update={"status": "eligible"}) if s.human == h("carol") else s for s in rec.seats]
    page = ask_page(rec.model_copy(update={"seats": seats}), h("bob"), True, "t", names={h("carol"): "Carol Chen"})
    alone = ask_page(rec, h("bob"), True, "t", names={h("carol"): "Carol Chen"})
    assert "<button type=button id=pass data-decision=decline>Pass it on to Carol Chen</button>" in page
    assert "Pass it on (no one else is left to ask)" in alone and "Carol" not in alone


def test_HATP_GW_88_the_page_says_the_final_step_in_the_one_sentence_the_notices_and_a_model_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rec = open_approval(plan(), "finance", directory(), gateway=GATEWAY_ID, now=parse_ts("2026-11-29T10:00:00Z"))
    screen = rec.ask.screen
    assert screen is not None
    step = screen.model_copy(update={"operations": [o.model_copy(update={"amount": None}) for o in screen.operations]})
    for shown in (screen, step):
        with_screen = rec.model_copy(update={"ask": rec.ask.model_copy(update={"screen": shown})})
        page = ask_page(with_screen, h("bob"), True, "t")
        assert f"<div id=irreversible role=note><p><strong>{final_words(shown)}</strong>" in page
    assert final_words(step) == "This step cannot be undone once approved."
    # one source: the page follows whatever the model-facing texts say, escaped as every value on the page is
    monkeypatch.setattr(pages, "final_words", lambda _screen: "Wire <b>transfers</b> & card captures are final.")
    page = ask_page(rec, h("bob"), True, "t")
    assert "<strong>Wire &lt;b&gt;transfers&lt;/b&gt; &amp; card captures are final.</strong>" in page
    assert "This payment cannot be undone" not in page


async def test_HATP_GW_97_a_second_passkey_decision_is_refused_naming_bob_by_his_card(
    served_plain: Served, clock: FakeClock
) -> None:
    served = served_plain
    await served.gateway.ask(plan(), "finance")
    stored = served.gateway.store.get(ASK)
    assert stored is not None and stored.record is not None
    digest, when = subject_digest(stored.record.ask), format_ts(clock.now())
    first = served.bob.decide(ASK, digest, "approve", when, origin=served.origin)
    _after, count = await served.gateway.decide_passkey(ASK, first, served.inbox.rp, 0, via="inbox")
    again = served.bob.decide(ASK, digest, "approve", when, origin=served.origin)
    with pytest.raises(HatpError) as e:
        await served.gateway.decide_passkey(ASK, again, served.inbox.rp, count, via="inbox")
    assert e.value.rule == "HATP-GW-6"
    assert e.value.reason.startswith("Bob Brown (human://acme.com/bob) already decided this ask")


async def test_HATP_GW_87_a_reason_bob_signs_in_the_inbox_reaches_the_agent_s_transaction_status(
    tmp_path: Path, clock: FakeClock
) -> None:
    reason = "The hotel is over the city cap: pick the one on Alexanderplatz"
    txn = "txn-inbox-reason"
    with anyio.fail_after(30):
        async with serve_inbox(tmp_path, clock) as served, agent_view(build_world(clock), served.gateway, clock) as c:
            await approving(c, clock, txn)
            b = await signed_in(served)  # bob, in the inbox over HTTP, with the passkey on his card
            ok, options = await b.post(f"/asks/{txn}/finance/challenge", {"decision": "reject", "reason": reason})
            assert ok == 200, options
            credential = served.bob.credential_json(unb64u(options["challenge"]), origin=served.origin)
            decided, after = await b.post(
                f"/asks/{txn}/finance/decide", {"nonce": options["nonce"], "credential": credential}
            )
            done = await status_of(c, txn, wait=10)
    assert (decided, after) == (200, {"state": "rejected"})
    assert done["outcome"] == "ABORTED"
    assert done["firstRefusal"]["reason"].endswith(f"rejected by Bob Brown ({h('bob')}): {reason}")  # HATP-GW-93


def test_HATP_GW_94_the_script_s_countdown_words_round_as_the_gateway_s_for_every_distance() -> None:
    node = shutil.which("node")
    if node is None:
        pytest.fail("node is missing: `make axe` installs it (apt-get install -y nodejs npm)")
    start = INBOX_JS.index("function inWords(")
    source = INBOX_JS[start : INBOX_JS.index("\n}\n", start) + 2]
    deltas = [0, 1, 29.999, 30, 59.4, 89.999, 90, 3599.99, 3600, 7170, 7199.5, 14399.996, 14400, -1, -30, -29, -7230]
    script = f"{source}\nconsole.log(JSON.stringify({json.dumps(deltas)}.map((s) => inWords(s * 1000))));"
    ran = subprocess.run([node, "-e", script], capture_output=True, text=True, timeout=30, check=True)
    assert json.loads(ran.stdout) == [in_words(d) for d in deltas]
    assert in_words(3599.99) == "in 60 min" and in_words(89.999) == "in 1 min" and in_words(90) == "in 2 min"
    assert in_words(0) == in_words(29.999) == in_words(-29) == "now" and in_words(-30) == "1 min ago"


async def test_HATP_GW_94_the_first_countdown_tick_says_what_the_gateway_wrote(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (context, page, cdp, authenticator):
            await served.gateway.ask(plan(summary=TRIP), "finance")  # decide by 14:00:00Z
            # 14399.9996 s before it: the page's clock is read to the millisecond, the gateway's to the microsecond
            clock.advance(0.0004)
            await _sign_in(served, page, cdp, authenticator, f"/asks/{ASK}")
            await page.wait_for_selector("#actions")
            await page.wait_for_load_state("load")  # after the page script localised its times
            ticked = await page.locator("#deadline .countdown").inner_text()
            html = await (await context.request.get(f"{served.origin}/asks/{ASK}")).text()  # as written, no script
    written = html.split("class=countdown", 1)[1].split(">", 1)[1].split("<", 1)[0]
    assert written == "(in 4 h 0 min)" and ticked == written  # not "(in 3 h 59 min)" a few ms later
