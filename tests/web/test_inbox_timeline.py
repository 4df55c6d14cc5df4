"""Timelines inside the web inbox (HATP-GW-81, HATP-GW-91): a finished transaction the signed-in person was asked
about opens as a sequence diagram and a list with each check's result (the checks `hatp verify --org` makes) and
each step's time in the approver's zone, in the order things happened, under the inbox's strict CSP, nothing fetched
from anywhere, hostile plan text inert, readable at 1280 px and 360 px with no serious axe violation (the README's
timeline screenshots are written here); a person who was not asked, a record that names another plan, and a name
that is a path see nothing. In Chromium and over plain HTTP."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import anyio
import pytest

from hatp_mcp.core.signing.keys import Keyring
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.web.inbox import CSP
from hatp_mcp.web.record_shelf import RecordShelf
from tests.acme_org import h, human_keys, plan
from tests.web.browserless import signed_in
from tests.web.chromium import chromium_page
from tests.web.inbox_fixture import serve_inbox
from tests.web.record_fixture import committed_record
from tests.web.test_inbox_a11y import serious

pytestmark = pytest.mark.anyio

SHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
TRIP = "Dana's offsite in Berlin: venue deposit"
HOSTILE = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>"
TXN = "txn-acme-0001"


def keys(tmp_path: Path, ring: Keyring) -> Path:
    path = tmp_path / "keyring.json"
    path.write_text(json.dumps(ring.to_jwks()))
    return path


def shelve(shelf: Path, record: dict[str, object], name: str | None = None) -> None:
    shelf.mkdir(exist_ok=True)
    (shelf / f"{name or record['txnId']}.record.json").write_text(json.dumps(record))


async def test_HATP_GW_81_bob_opens_the_timeline_of_a_transaction_he_approved_every_check_passes_hostile_text_inert(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(60):
        async with (
            serve_inbox(tmp_path, clock) as served,
            chromium_page(timezone="Europe/Berlin") as (context, page, cdp, authenticator),
        ):
            record, ring = await committed_record(served, plan(summary=HOSTILE))
            shelve(tmp_path / "records", record)
            served.inbox.records = RecordShelf(tmp_path / "records", keys(tmp_path, ring))
            requested: list[str] = []
            page.on("request", lambda r: requested.append(r.url))
            await cdp.send(
                "WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": served.cdp_credential()}
            )
            await page.goto(f"{served.origin}/txns/{TXN}/timeline")  # signed out: through sign-in, then back here
            await page.click("#signin")
            await page.wait_for_selector("svg")
            await page.wait_for_load_state("load")  # after the page script localised its times
            text = await page.locator("body").inner_text()
            svg = await page.locator("svg").inner_html()
            local = await page.locator("svg tspan[data-local-time]").first.text_content()
            title = await page.locator("#timeline-steps time").first.get_attribute("title")
            inert = await page.evaluate("window.pwned === undefined && document.querySelectorAll('img').length === 0")
            direct = await context.request.get(f"{served.origin}/txns/{TXN}/timeline")
            await page.click("#back")
            await page.wait_for_selector("#asks")
            await page.click(f'a.timeline[href="/txns/{TXN}/timeline"]')  # and from the list
            await page.wait_for_selector("svg")
            await page.wait_for_load_state("load")  # after the page script localised its times
    assert verify_record(record, ring, humans=human_keys()) != []  # without the relying party: not counted
    assert "hatp verify: the record holds" in text and "COMMITTED" in text
    assert svg.count("✓") == len(record["events"]) and "✗" not in svg  # passkey checked with the inbox's rp
    assert local == "11:00:00 AM" and title == "2026-11-29 10:00:00 UTC"  # the inbox's script ran, under its CSP
    assert "Bob Brown: approve (passkey)" in svg and "Carol Chen: approve (Ed25519 proof)" in svg
    assert f"agent-written: {HOSTILE}" in text and inert
    assert direct.status == 200 and direct.headers["content-security-policy"] == CSP
    assert all(u.startswith(served.origin + "/") for u in requested)  # nothing fetched from anywhere else
    assert "@mail.acme.example" not in text and "+1-555" not in text  # no contact details


async def test_HATP_GW_81_a_person_not_asked_a_record_of_another_plan_and_a_path_for_a_name_see_nothing(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(30):
        async with serve_inbox(tmp_path, clock) as served:
            record, ring = await committed_record(served, plan())
            shelf = tmp_path / "records"
            shelve(shelf, record)
            served.inbox.records = RecordShelf(shelf, keys(tmp_path, ring))
            # carol's own transaction, bob never asked: its record is on the shelf too
            other = plan(txn_id="txn-acme-0002", address=h("carol"))
            await served.gateway.ask(other, "finance")
            await served.gateway.withdraw(other.txn_id, "finance")
            shelve(shelf, {**record, "txnId": other.txn_id}, other.txn_id)
            # a record under bob's txnId that names another plan
            (shelf / "evil").mkdir()
            shelve(shelf / "evil", {**record, "planDigest": "sha256:" + "0" * 64}, TXN)
            b = await signed_in(served)
            _s, _h, listing = await b.get("/")
            mine, _h1, _p1 = await b.get(f"/txns/{TXN}/timeline")
            not_asked, _h2, _p2 = await b.get(f"/txns/{other.txn_id}/timeline")
            served.inbox.records = RecordShelf(shelf / "evil", keys(tmp_path, ring))
            another_plan, _h3, _p3 = await b.get(f"/txns/{TXN}/timeline")
            served.inbox.records = RecordShelf(shelf / "evil", keys(tmp_path, ring))
            climbing, _h4, _p4 = await b.get("/txns/..%2F" + TXN + "/timeline")
            signed_out, _h5, _p5 = await type(b)(served.origin).get(f"/txns/{TXN}/timeline")
    assert f'href="/txns/{TXN}/timeline"' in listing and other.txn_id not in listing
    assert (mine, not_asked, another_plan, climbing) == (200, 404, 404, 404)
    assert signed_out == 200 and "Sign in with your passkey" in _p5  # the redirect leads to sign-in


async def test_HATP_GW_81_a_tampered_record_is_drawn_with_the_rule_that_failed_and_an_unchecked_one_not_at_all(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(30):
        async with serve_inbox(tmp_path, clock) as served:
            record, ring = await committed_record(served, plan())
            tampered = copy.deepcopy(record)
            approval = next(e for e in tampered["events"] if e["event"] == "approval")
            approval["evidence"]["decisions"][0]["decision"] = "reject"
            shelve(tmp_path / "records", tampered)
            served.inbox.records = RecordShelf(tmp_path / "records", keys(tmp_path, ring))
            b = await signed_in(served)
            status, _h, page = await b.get(f"/txns/{TXN}/timeline")
            served.inbox.records = RecordShelf(tmp_path / "records", tmp_path / "no-keyring.json")
            unchecked, _h2, said = await b.get(f"/txns/{TXN}/timeline")
    assert status == 200 and "✗ HATP-" in page and "problem(s)" in page and "the record holds" not in page
    assert unchecked == 503 and "✓" not in said  # nothing to check it with: not drawn at all


async def test_HATP_GW_91_the_timeline_shows_local_times_in_order_at_1280_and_360_px_with_no_serious_axe_violation(
    tmp_path: Path, clock: FakeClock
) -> None:
    SHOTS.mkdir(parents=True, exist_ok=True)
    found: dict[str, Any] = {}
    with anyio.fail_after(90):
        async with (
            serve_inbox(tmp_path, clock) as served,
            # axe is injected by the test (the CSP bypassed for it); a German approver in Berlin
            chromium_page(bypass_csp=True, locale="de-DE", timezone="Europe/Berlin") as (_c, page, cdp, authenticator),
        ):
            clock.advance(90)  # 10:01:30 UTC: 11:01:30 in Berlin
            record, ring = await committed_record(served, plan(summary=TRIP))
            shelve(tmp_path / "records", record)
            served.inbox.records = RecordShelf(tmp_path / "records", keys(tmp_path, ring))
            await cdp.send(
                "WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": served.cdp_credential()}
            )
            await page.set_viewport_size({"width": 1280, "height": 800})
            await page.goto(f"{served.origin}/txns/{TXN}/timeline")
            await page.click("#signin")
            await page.wait_for_selector("svg")
            await page.wait_for_load_state("load")  # after the page script localised its times
            steps = await page.locator("#timeline-steps li").all_inner_texts()
            titles = await page.locator("#timeline-steps time").evaluate_all("(ts) => ts.map((t) => t.title)")
            drawn = await page.locator("svg tspan[data-local-time]").all_text_contents()
            await page.screenshot(path=str(SHOTS / "timeline.png"), full_page=True)
            found["desktop"] = await serious(page)
            await page.set_viewport_size({"width": 360, "height": 740})
            await page.reload()
            await page.wait_for_selector("svg")
            await page.wait_for_load_state("load")  # after the page script localised its times
            widths = await page.evaluate(
                "[document.scrollingElement.scrollWidth, document.scrollingElement.clientWidth, window.innerWidth]"
            )
            await page.screenshot(path=str(SHOTS / "timeline-phone.png"), full_page=True)
            found["phone"] = await serious(page)
    assert found == {"desktop": [], "phone": []}, found
    assert len(steps) == len(record["events"]) + 2  # bob's and carol's decisions
    assert all("11:01:30" in s for s in steps), steps  # the approver's zone, written the German way
    assert set(titles) == {"2026-11-29 10:01:30 UTC"}  # UTC on hover
    assert drawn == ["11:01:30"] * len(steps)
    who = [s.split("✓ ")[-1] if "✓" in s else s for s in steps]
    first_vote = next(i for i, s in enumerate(who) if "vote finance" in s)
    assert any("Bob Brown decided: approve (passkey)" in s for s in who[:first_vote]), who  # before what it produced
    assert any("Carol Chen decided: approve (Ed25519 proof)" in s for s in who[:first_vote]), who
    scroll, client, inner = widths
    assert inner == 360 and scroll <= client, widths  # the diagram scrolls in its own box, the page does not
