"""The web inbox in a real browser: Debian's Chromium driven by Playwright, WebAuthn through the DevTools
protocol's virtual authenticator holding bob's passkey (the one on his Directory-signed card). Bob signs in, sees
his ask with the hostile plan text inert, approves with his passkey; the gateway records the assertion
(HATP-GW-48, HATP-GW-53). `make test` installs chromium with apt when it is missing; never `playwright install`."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from playwright.async_api import Browser, async_playwright

from hatp_mcp.core.humans.passkey import unb64u
from hatp_mcp.runtime.clock import FakeClock
from tests.acme_org import h, plan
from tests.web.inbox_fixture import serve_inbox

pytestmark = pytest.mark.anyio

CHROMIUM = "/usr/bin/chromium"
HAVE_CHROMIUM = Path(CHROMIUM).exists()  # checked once, at import
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
HOSTILE = "<script>window.pwned=1</script><img src=x onerror=window.pwned=2>Approve at once"
ASK = "txn-acme-0001/finance"


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    if not HAVE_CHROMIUM:
        pytest.fail("chromium is missing: `make test` installs it (apt-get install -y chromium)")
    async with async_playwright() as p:
        b = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            yield b
        finally:
            await b.close()


async def test_HATP_GW_53_bob_signs_in_and_approves_with_his_passkey_in_chromium_and_hostile_text_stays_inert(
    tmp_path: Path, clock: FakeClock, browser: Browser
) -> None:
    with anyio.fail_after(60):
        async with serve_inbox(tmp_path, clock) as served:
            await served.gateway.ask(plan(summary=HOSTILE), "finance")
            context = await browser.new_context()
            page = await context.new_page()
            cdp = await context.new_cdp_session(page)
            await cdp.send("WebAuthn.enable", {"enableUI": False})
            added = await cdp.send(
                "WebAuthn.addVirtualAuthenticator",
                {
                    "options": {
                        "protocol": "ctap2",
                        "ctap2Version": "ctap2_1",
                        "transport": "internal",
                        "hasResidentKey": True,
                        "hasUserVerification": True,
                        "isUserVerified": True,
                        "automaticPresenceSimulation": True,
                    }
                },
            )
            await cdp.send(
                "WebAuthn.addCredential",
                {
                    "authenticatorId": added["authenticatorId"],
                    "credential": {
                        "credentialId": base64.b64encode(unb64u(served.bob.credential_id)).decode(),
                        "isResidentCredential": True,
                        "rpId": "localhost",
                        "privateKey": served.private_key_b64(),
                        "userHandle": base64.b64encode(b"bob").decode(),
                        "signCount": 0,
                    },
                },
            )
            await page.goto(served.origin + "/")
            await page.click("#signin")
            await page.wait_for_selector("#asks")
            await page.click(f'a[href="/asks/{ASK}"]')
            await page.wait_for_selector("#actions")
            summary = await page.locator("blockquote.agent-written").last.inner_text()
            pwned = await page.evaluate("window.pwned === undefined")
            await page.click("button[data-decision=approve]")
            await page.wait_for_selector(
                "#message:text-matches('^(Recorded|Not recorded)')"
            )  # (the CSP forbids wait_for_function's eval)
            message = await page.locator("#message").inner_text()
            await context.close()
            stored = served.gateway.store.get(ASK)
    assert summary == f"agent-written: {HOSTILE}" and pwned
    assert message == "Recorded: approve. The ask is pending."
    assert stored is not None and stored.record is not None
    (d,) = stored.record.decisions
    assert (d.approver, d.decision) == (h("bob"), "approve") and d.passkey is not None
