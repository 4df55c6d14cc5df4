"""`make demo-passkey OPEN=1` (`demo.passkey --open`) end to end: the demo drives no browser, prints an enrolment
link for the person asked and the ask's link, and waits. Here a "real person" is a Chromium whose virtual
authenticator holds no passkey yet: it registers one at the printed link (HATP-GW-71), the demo approves the
registration as the operator, the running gateway counts the re-signed card at once (HATP-GW-82), and the person
signs in with the new passkey and approves; the trip commits and `hatp verify --org` checks the assertion."""

from __future__ import annotations

import re
from pathlib import Path

import anyio
import pytest

from demo.passkey import run_demo
from tests.web.chromium import chromium_page

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]


class Printed:
    """The demo's output lines, and a way to wait for one (signalled per line, never polled)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._new = anyio.Event()

    def __call__(self, line: str) -> None:
        self.lines.append(line)
        self._new.set()
        self._new = anyio.Event()

    async def wait_for(self, pattern: str) -> re.Match[str]:
        while True:
            new = self._new
            for line in self.lines:
                if m := re.search(pattern, line):
                    return m
            await new.wait()


async def test_the_open_demo_prints_the_links_waits_for_a_real_person_and_commits_once_they_approve_with_their_passkey(
    tmp_path: Path,
) -> None:
    printed = Printed()
    result: dict[str, object] = {}
    with anyio.fail_after(240):
        async with anyio.create_task_group() as tg:

            async def demo() -> None:
                result.update(await run_demo(tmp_path, out=printed, open_=True))

            tg.start_soon(demo)
            enrol = await printed.wait_for(r"register a passkey at (http://localhost:\d+/enrol\?code=\S+)")
            ask = await printed.wait_for(r"approve at (http://localhost:\d+/asks/\S+) \(waiting until")
            waited = "outcome" not in result  # printed the links, and is waiting for the person
            async with chromium_page() as (_context, page, _cdp, _authenticator):
                await page.goto(enrol.group(1))
                await page.click("#enrol")
                await page.wait_for_selector("#message:text-matches('^(Registered|Not registered)')")
                registered = await page.locator("#message").inner_text()
                await printed.wait_for(r"uses the re-signed card at once")
                await page.goto(ask.group(1))  # signed out: the link leads through sign-in back to the ask
                await page.click("#signin")
                await page.wait_for_selector("#actions")
                await page.click("button[data-decision=approve]")
                await page.wait_for_selector("#message:text-matches('^(Recorded|Not recorded)')")
                decided = await page.locator("#message").inner_text()
    assert waited and registered.startswith("Registered: enrolment 1 is pending")
    assert decided.startswith("Recorded: approve.")
    assert result["outcome"] == "COMMITTED" and result["rc"] == 0, "\n".join(printed.lines)
    record = result["record"]
    assert isinstance(record, dict)
    approval = next(e["evidence"] for e in record["events"] if e["event"] == "approval")
    (decision,) = approval["decisions"]
    assert decision["approver"] == result["who"] and "passkey" in decision and decision["via"] == "inbox-passkey"
    assert not (tmp_path / "screenshots" / "list.png").exists()  # nothing drove a browser but the person's
    assert any("hatp verify --org" in line and line.endswith("ok") for line in printed.lines)
