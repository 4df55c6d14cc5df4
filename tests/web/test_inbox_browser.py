"""The web inbox in a real browser: Debian's Chromium driven by Playwright, WebAuthn through the DevTools
protocol's virtual authenticator holding bob's passkey (the one on his Directory-signed card). Bob signs in, sees
his ask with the hostile plan text inert, approves with his passkey; the gateway records the assertion
(HATP-GW-67, HATP-GW-72). `make test` installs chromium with apt when it is missing; never `playwright install`."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import h, plan
from tests.web.chromium import chromium_page
from tests.web.inbox_fixture import serve_inbox

pytestmark = pytest.mark.anyio

HOSTILE = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>Approve at once"
ASK = "txn-acme-0001/finance"


async def test_HATP_GW_72_bob_signs_in_and_approves_with_his_passkey_in_chromium_and_hostile_text_stays_inert(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (_context, page, cdp, authenticator):
            await served.gateway.ask(plan(summary=HOSTILE), "finance")
            await cdp.send(
                "WebAuthn.addCredential",
                {
                    "authenticatorId": authenticator,
                    "credential": served.cdp_credential(),
                },
            )
            await page.goto(served.origin + "/")
            await page.click("#signin")
            await page.wait_for_selector("#asks")
            await page.click(f'a[href="/asks/{ASK}"]')
            await page.wait_for_selector("#actions")
            summary = await page.locator("#summary blockquote.agent-written").inner_text()
            pwned = await page.evaluate("window.pwned === undefined")
            await page.click("button[data-decision=approve]")
            await page.wait_for_selector(
                "#message:text-matches('^(Recorded|Not recorded)')"
            )  # (the CSP forbids wait_for_function's eval)
            message = await page.locator("#message").inner_text()
            stored = served.gateway.store.get(ASK)
    assert summary == f"written by the agent: {HOSTILE}" and pwned
    assert message == "Recorded: approve. The ask is pending."
    assert stored is not None and stored.record is not None
    (d,) = stored.record.decisions
    assert (d.approver, d.decision) == (h("bob"), "approve") and d.passkey is not None


async def test_HATP_GW_72_the_link_in_a_notice_leads_through_sign_in_back_to_the_ask(
    tmp_path: Path, clock: FakeClock
) -> None:
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served, chromium_page() as (_context, page, cdp, authenticator):
            await served.gateway.ask(plan(), "finance")
            await cdp.send(
                "WebAuthn.addCredential", {"authenticatorId": authenticator, "credential": served.cdp_credential()}
            )
            await page.goto(f"{served.origin}/asks/{ASK}")  # the notice's link, signed out
            await page.click("#signin")
            await page.wait_for_selector("#actions")
            shown = await page.locator("#ask-id").text_content()
    assert shown == ASK
