"""Headless Debian Chromium for the web tests, with a CDP virtual authenticator (UV, resident keys). Test code."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import BrowserContext, CDPSession, Page, async_playwright

__all__ = ["CHROMIUM", "chromium_page"]

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
OPTIONS: dict[str, Any] = {
    "protocol": "ctap2",
    "ctap2Version": "ctap2_1",
    "transport": "internal",
    "hasResidentKey": True,
    "hasUserVerification": True,
    "isUserVerified": True,
    "automaticPresenceSimulation": True,
}


@asynccontextmanager
async def chromium_page(
    *, bypass_csp: bool = False, locale: str = "en-US", timezone: str | None = None
) -> AsyncIterator[tuple[BrowserContext, Page, CDPSession, str]]:
    """(context, page, cdp, authenticatorId); the browser is closed on the way out. `bypass_csp` only for a test
    that injects its own tooling (axe-core) into a page; every other test runs under the inbox's CSP. The locale is
    always set (never the machine's), so what a page's script writes with `toLocaleString` is the same everywhere;
    `timezone`: the approver's zone (IANA name), else the machine's."""
    if not HAVE_CHROMIUM:
        pytest.fail("chromium is missing: `make test` installs it (apt-get install -y chromium)")
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=ARGS)
        try:
            context = await browser.new_context(bypass_csp=bypass_csp, locale=locale, timezone_id=timezone)
            page = await context.new_page()
            cdp = await context.new_cdp_session(page)
            await cdp.send("WebAuthn.enable", {"enableUI": False})
            added = await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": OPTIONS})
            yield context, page, cdp, str(added["authenticatorId"])
        finally:
            await browser.close()
