"""Keyboard and screen-reader use of the inbox (HATP-GW-88): axe-core (tests/web/axe, pinned by its lockfile, `make
axe`) runs in Chromium over the list, an ask at a desktop's and a phone's width, a decided ask, and the question
pages (choose, form, text, answered) at a phone's width, and finds no serious or critical violation; no question page
scrolls sideways on the phone. axe is injected by the test (so this context bypasses the CSP for it); the pages
themselves still load only the inbox's own stylesheet and script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.async_api import Page

from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import h, plan
from tests.web.chromium import chromium_page
from tests.web.inbox_fixture import serve_inbox

pytestmark = pytest.mark.anyio

AXE = Path(__file__).resolve().parent / "axe" / "node_modules" / "axe-core" / "axe.min.js"
ASK = "txn-acme-0001/finance"
TRIP = "Dana's offsite in Berlin: venue deposit"


async def serious(page: Page) -> list[dict[str, Any]]:
    """axe's serious and critical violations on the page as it is now: rule id, impact and the nodes' selectors."""
    if not AXE.exists():
        pytest.fail("axe-core is missing: `make axe` installs it (npm ci in tests/web/axe)")
    await page.add_script_tag(path=str(AXE))
    found: list[dict[str, Any]] = await page.evaluate(
        """async () => (await axe.run(document, {resultTypes: ["violations"]})).violations
             .filter((v) => v.impact === "serious" || v.impact === "critical")
             .map((v) => ({id: v.id, impact: v.impact, nodes: v.nodes.map((n) => n.target.join(" "))}))"""
    )
    return found


async def test_HATP_GW_88_axe_finds_no_serious_violation_on_the_list_the_ask_at_both_widths_and_the_decided_ask(
    tmp_path: Path, clock: FakeClock
) -> None:
    found: dict[str, list[dict[str, Any]]] = {}
    with anyio.fail_after(90):
        async with (
            serve_inbox(tmp_path, clock) as served,
            chromium_page(bypass_csp=True) as (_context, page, cdp, authenticator),
        ):
            await served.gateway.ask(plan(summary=TRIP), "finance")
            await cdp.send(
                "WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": served.cdp_credential()}
            )
            await page.set_viewport_size({"width": 1280, "height": 800})
            await page.goto(served.origin + "/")
            found["signin"] = await serious(page)
            await page.click("#signin")
            await page.wait_for_selector("#waiting")
            found["list"] = await serious(page)
            await page.goto(f"{served.origin}/asks/{ASK}")
            await page.wait_for_selector("#actions")
            found["ask"] = await serious(page)
            await page.set_viewport_size({"width": 360, "height": 740})
            await page.reload()
            await page.wait_for_selector("#actions")
            found["ask-phone"] = await serious(page)
            await page.fill("#reason", "over budget")
            await page.click("button[data-decision=reject]")
            await page.wait_for_selector("#outcome-link")
            await page.click("#outcome-link")
            await page.wait_for_selector("#outcome")
            found["decided"] = await serious(page)
            await page.goto(served.origin + "/")
            await page.wait_for_selector("#decided")
            found["list-decided"] = await serious(page)
    assert found == {k: [] for k in ("signin", "list", "ask", "ask-phone", "decided", "list-decided")}, found


async def test_HATP_GW_88_axe_flags_the_reject_reason_box_once_its_label_is_gone(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(60):
        async with (
            serve_inbox(tmp_path, clock) as served,
            chromium_page(bypass_csp=True) as (_context, page, cdp, authenticator),
        ):
            await served.gateway.ask(plan(summary=TRIP), "finance")
            await cdp.send(
                "WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": served.cdp_credential()}
            )
            await page.goto(f"{served.origin}/asks/{ASK}")
            await page.click("#signin")
            await page.wait_for_selector("#actions")
            await page.evaluate("document.querySelector('label[for=reason]').remove()")  # a planted violation
            found = await serious(page)
    assert [(v["id"], v["nodes"]) for v in found] == [("label", ["#reason"])]


FORM = {
    "type": "object",
    "properties": {
        "nights": {"type": "integer", "minimum": 1, "description": "How many nights"},
        "room": {"enum": ["single", "double"], "title": "Room type"},
        "late": {"type": "boolean", "description": "Late check-in"},
        "note": {"type": "string", "maxLength": 40},
        "guests": {"type": "array", "description": "Who comes along, as a JSON list of names"},
    },
    "required": ["nights", "room"],
}


async def test_HATP_GW_88_question_pages_at_360_px_do_not_scroll_sideways_and_axe_finds_no_serious_violation(
    tmp_path: Path, clock: FakeClock
) -> None:
    found: dict[str, Any] = {}
    with anyio.fail_after(120):
        async with (
            serve_inbox(tmp_path, clock) as served,
            chromium_page(bypass_csp=True) as (_context, page, cdp, authenticator),
        ):
            bob = h("bob")
            options = [
                {"id": "adlon", "label": "Hotel Adlon, by the Brandenburg Gate"},
                {"id": "ritz", "label": "Ritz"},
            ]
            await served.gateway.open_question(
                ask_id="q-hotel", kind="choose", address=bob, question="Which hotel?", options=options
            )
            await served.gateway.open_question(
                ask_id="q-stay", kind="form", address=bob, question="The stay", form_schema=FORM
            )
            await served.gateway.open_question(
                ask_id="q-json", kind="form", address=bob, question="Anything", form_schema={"type": "array"}
            )
            await served.gateway.open_question(
                ask_id="q-note", kind="text", address=bob, question="A note for the hotel", max_length=400
            )
            await cdp.send(
                "WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": served.cdp_credential()}
            )
            await page.set_viewport_size({"width": 360, "height": 740})
            await page.goto(served.origin + "/")
            await page.click("#signin")
            await page.wait_for_selector("#waiting")
            found["list"] = await serious(page)
            for ask in ("q-hotel", "q-stay", "q-json", "q-note"):
                await page.goto(f"{served.origin}/asks/{ask}")
                await page.wait_for_selector("#answer")
                width = await page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
                found[ask] = {"axe": await serious(page), "wider": width[0] > width[1]}
            # a planted violation: a text area wider than the phone is caught by the same measure
            await page.evaluate("document.getElementById('answer-text').style.minWidth = '600px'")
            planted = await page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
            await page.goto(f"{served.origin}/asks/q-hotel")
            await page.wait_for_selector("#answer")
            await page.check("input[value=adlon]")
            await page.click("#answer-submit")
            await page.wait_for_selector("#outcome-link")
            await page.click("#outcome-link")
            await page.wait_for_selector("#answered")
            width = await page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
            found["answered"] = {"axe": await serious(page), "wider": width[0] > width[1]}
    clean = {"axe": [], "wider": False}
    assert planted[0] > planted[1], planted
    assert found == {"list": [], "q-hotel": clean, "q-stay": clean, "q-json": clean, "q-note": clean, "answered": clean}
