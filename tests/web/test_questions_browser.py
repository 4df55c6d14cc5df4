"""Choose / form / text asks answered in a real browser (Debian Chromium, Playwright, CDP virtual authenticator
holding bob's passkey): the page draws the question from the structured ask, bob picks, fills or types, and the
answer is signed with his passkey (HATP-GW-80); hostile agent text in the question, the options and a form's
field descriptions stays inert and labelled (HATP-GW-72); an answer that does not fit is refused with its rule and
nothing is signed (HATP-ASK-3); a POST with bob's session cookie but without the page's CSRF token is refused
(HATP-GW-73)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.async_api import Page

from hatp_mcp.core.model.gateway import Answer
from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import h
from tests.web.chromium import chromium_page
from tests.web.inbox_fixture import Served, serve_inbox

pytestmark = pytest.mark.anyio

HOSTILE = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>"
FORM = {
    "type": "object",
    "properties": {
        "nights": {"type": "integer", "minimum": 1, "description": f"How many nights {HOSTILE}"},
        "room": {"enum": ["single", "double"]},
        "late": {"type": "boolean"},
        "note": {"type": "string", "maxLength": 40},
    },
    "required": ["nights", "room"],
}
DONE = "#message:text-matches('^(Recorded|Not recorded|Not sent)')"  # (the CSP forbids wait_for_function's eval)


async def open_ask(served: Served, page: Page, cdp: Any, authenticator: str, ask_id: str) -> None:
    await cdp.send("WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": served.cdp_credential()})
    await page.goto(served.origin + "/")
    await page.click("#signin")
    await page.wait_for_selector("#asks")
    await page.click(f'a[href="/asks/{ask_id}"]')
    await page.wait_for_selector("#answer")


async def answered(served: Served, ask_id: str) -> Answer:
    stored = await served.gateway.current(ask_id)
    assert stored.evidence is not None, stored.state
    return Answer.model_validate(stored.evidence)


async def test_HATP_GW_80_bob_picks_an_option_in_chromium_and_it_is_signed_with_his_passkey_hostile_labels_inert(
    tmp_path: Path, clock: FakeClock
) -> None:
    options = [{"id": "adlon", "label": f"Hotel Adlon {HOSTILE}"}, {"id": "ritz", "label": "The Ritz"}]
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (_ctx, page, cdp, authenticator):
            await served.gateway.open_question(
                ask_id="q-hotel", kind="choose", address=h("bob"), question=f"Which hotel? {HOSTILE}", options=options
            )
            await open_ask(served, page, cdp, authenticator, "q-hotel")
            question = await page.locator("blockquote.agent-written").inner_text()
            label = await page.locator("label:has(input[value=adlon]) .agent-written").inner_text()
            await page.check("input[value=adlon]")
            await page.click("#answer-submit")
            await page.wait_for_selector(DONE)
            message = await page.locator("#message").inner_text()
            inert = await page.evaluate("window.pwned === undefined && document.querySelectorAll('img').length === 0")
            signed = await answered(served, "q-hotel")
    assert (
        question == f"written by the agent: Which hotel? {HOSTILE}"
        and label == f"written by the agent: Hotel Adlon {HOSTILE}"
    )
    assert inert and message == "Recorded: answer. The ask is answered."
    assert signed.value == "adlon" and signed.passkey is not None and signed.passkey.value == "adlon"


async def test_HATP_GW_80_bob_fills_a_form_in_chromium_a_missing_field_is_refused_unsigned_then_the_full_form_counts(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (_ctx, page, cdp, authenticator):
            await served.gateway.open_question(
                ask_id="q-stay", kind="form", address=h("bob"), question="Your stay", form_schema=FORM
            )
            await open_ask(served, page, cdp, authenticator, "q-stay")
            described = await page.locator("label:has(#field-nights) .agent-written").inner_text()
            await page.fill("#field-nights", "3")
            await page.click("#answer-submit")  # no room chosen: refused before any challenge
            await page.wait_for_selector(DONE)
            missing = await page.locator("#message").inner_text()
            count = served.inbox.state.sign_count(served.bob.credential_id)
            await page.select_option("#field-room", label="double")
            await page.check("#field-late")
            await page.fill("#field-note", "quiet room")
            await page.click("#answer-submit")
            await page.wait_for_selector("#message:text-matches('^Recorded')")
            message = await page.locator("#message").inner_text()
            inert = await page.evaluate("window.pwned === undefined")
            signed = await answered(served, "q-stay")
    assert described == f"written by the agent: How many nights {HOSTILE}" and inert
    assert missing == "Not recorded: HATP-ASK-3: the form does not fit its schema: 'room' is a required property"
    assert count == 1  # the sign-in only: the refused form was never signed
    assert message == "Recorded: answer. The ask is answered."
    assert signed.value == {"nights": 3, "room": "double", "late": True, "note": "quiet room"}
    assert signed.passkey is not None and signed.passkey.value == signed.value


async def test_HATP_GW_80_bob_types_a_text_answer_in_chromium_and_a_post_without_the_csrf_token_is_refused(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (context, page, cdp, authenticator):
            await served.gateway.open_question(
                ask_id="q-diet", kind="text", address=h("bob"), question="Dietary needs?", max_length=30
            )
            await open_ask(served, page, cdp, authenticator, "q-diet")
            maxlength = await page.get_attribute("#answer-text", "maxlength")
            # The page's session cookie, the inbox's own Origin, but no (or a forged) CSRF token: refused.
            headers = {"Origin": served.origin, "Content-Type": "application/json"}
            bare = await context.request.post(
                f"{served.origin}/asks/q-diet/challenge", data={"decision": "answer", "value": "x"}, headers=headers
            )
            forged = await context.request.post(
                f"{served.origin}/asks/q-diet/challenge",
                data={"decision": "answer", "value": "x"},
                headers=headers | {"X-CSRF-Token": "forged"},
            )
            refusals = [(bare.status, (await bare.json())["rule"]), (forged.status, (await forged.json())["rule"])]
            await page.fill("#answer-text", "no nuts, <b>please</b>")
            await page.click("#answer-submit")
            await page.wait_for_selector(DONE)
            message = await page.locator("#message").inner_text()
            signed = await answered(served, "q-diet")
    assert maxlength == "30" and refusals == [(403, "HATP-GW-73"), (403, "HATP-GW-73")]
    assert message == "Recorded: answer. The ask is answered."
    assert signed.value == "no nuts, <b>please</b>" and signed.passkey is not None
