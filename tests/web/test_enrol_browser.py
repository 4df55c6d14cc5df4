"""Passkey enrolment end to end in Chromium (HATP-GW-71): the operator issues a one-time code, the person registers
a passkey in the inbox (verified with py_webauthn, UV required), it does not count until the operator approves it,
which re-signs the card with the Directory's key; after the gateway restarts on the new card the person signs in
with that passkey. A spent code registers nothing more."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
from pathlib import Path

import anyio
import pytest

from hatp_mcp.cli import main as hatp
from hatp_mcp.core.signing.keys import SigningKey, sign_object
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.org import load_directory
from tests.acme_org import h
from tests.web.chromium import chromium_page
from tests.web.inbox_fixture import serve_inbox

pytestmark = pytest.mark.anyio

ORG = Path(__file__).resolve().parents[2] / "spec" / "fixtures" / "org"
KEYS = "test-only-keys"
DONE = "#message:text-matches('^(Registered|Not registered|Sign-in failed)')"


def cli(*args: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = hatp(list(args))
    return rc, out.getvalue().strip()


async def test_HATP_GW_71_a_passkey_registered_with_a_code_counts_only_once_the_operator_re_signs_the_card(
    tmp_path: Path, clock: FakeClock
) -> None:
    org = tmp_path / "org"
    shutil.copytree(ORG, org)
    data = tmp_path / "gateway"
    data.mkdir()
    with anyio.fail_after(90):
        async with chromium_page() as (_context, page, _cdp, _auth):
            async with serve_inbox(data, clock, org) as served:
                rc, code = cli("enrol", "code", "--data", str(data), "--human", h("erin"))
                assert rc == 0 and code
                await page.goto(f"{served.origin}/enrol?code={code}")
                await page.click("#enrol")
                await page.wait_for_selector(DONE)
                registered = await page.locator("#message").inner_text()
                await page.goto(f"{served.origin}/enrol?code={code}")  # the same code again
                await page.click("#enrol")
                await page.wait_for_selector(DONE)
                spent = await page.locator("#message").inner_text()
                await page.goto(served.origin + "/")
                await page.click("#signin")
                await page.wait_for_selector(DONE)
                before = await page.locator("#message").inner_text()
            rc_list, listed = cli("enrol", "list", "--data", str(data))
            (pending,) = json.loads(listed)
            wrong, _ = cli(  # the gateway's key is not the Directory's: nothing is written
                "enrol", "approve", "1", "--data", str(data), "--org", str(org),
                "--key", str(org / "test-only-keys" / "gateway.private.jwk.json"),
            )  # fmt: skip
            untouched = load_directory(org)[0].card(h("erin"))
            rc_ok, approved = cli(
                "enrol", "approve", "1", "--data", str(data), "--org", str(org),
                "--key", str(org / "test-only-keys" / "directory.private.jwk.json"),
            )  # fmt: skip
            async with serve_inbox(data, clock, org) as restarted:  # the gateway restarts on the new card
                await page.goto(restarted.origin + "/")
                await page.click("#signin")
                await page.wait_for_selector("#empty, #asks")
                signed_in = await page.locator("main").inner_text()
    assert registered == "Registered: enrolment 1 is pending until your operator approves it."
    assert spent.startswith("Not registered: HATP-GW-71: no valid enrolment code")
    assert before == "Sign-in failed: HATP-GW-68: this passkey is not on any signed card"
    assert rc_list == 0 and (pending["human"], pending["state"]) == (h("erin"), "pending")
    assert pending["authorized_by"] == "code"  # HATP-GW-86: how the registration was allowed
    assert wrong == 1 and untouched is not None and not any(k.id == pending["credential_id"] for k in untouched.keys)
    assert rc_ok == 0 and pending["credential_id"] in approved
    card = load_directory(org)[0].card(h("erin"))
    assert card is not None and any(k.type == "passkey" and k.id == pending["credential_id"] for k in card.keys)
    assert "Signed in as Erin Evans" in signed_in  # the card's display name, the address on hover


async def test_HATP_GW_82_the_running_gateway_signs_in_with_a_passkey_the_moment_the_operator_re_signs_the_card(
    tmp_path: Path, clock: FakeClock
) -> None:
    org = tmp_path / "org"
    shutil.copytree(ORG, org)
    data = tmp_path / "gateway"
    data.mkdir()
    with anyio.fail_after(90):
        async with chromium_page() as (_context, page, _cdp, _auth), serve_inbox(data, clock, org) as served:
            _rc, code = cli("enrol", "code", "--data", str(data), "--human", h("erin"))
            await page.goto(f"{served.origin}/enrol?code={code}")
            await page.click("#enrol")
            await page.wait_for_selector(DONE)
            original = (org / "cards" / "erin.json").read_bytes()
            (pending,) = json.loads(cli("enrol", "list", "--data", str(data))[1])
            # Planted: erin's card with her new passkey, re-signed by the gateway's key instead of the Directory's
            card = {k: v for k, v in json.loads(original).items() if k != "signature"}
            card["keys"] = [*card["keys"], {"type": "passkey", "id": pending["credential_id"], "publicKey": "AA"}]
            forged = sign_object(
                card, SigningKey.from_jwk(json.loads((org / KEYS / "gateway.private.jwk.json").read_text()))
            )
            (org / "cards" / "erin.json").write_text(json.dumps(forged))
            await page.goto(served.origin + "/")
            await page.click("#signin")
            await page.wait_for_selector(DONE)
            refused = await page.locator("#message").inner_text()
            (org / "cards" / "erin.json").write_bytes(original)
            rc, _approved = cli(
                "enrol", "approve", str(pending["seq"]), "--data", str(data), "--org", str(org),
                "--key", str(org / KEYS / "directory.private.jwk.json"),
            )  # fmt: skip
            await page.goto(served.origin + "/")  # the same gateway process, no restart
            await page.click("#signin")
            await page.wait_for_selector("#empty, #asks")
            signed_in = await page.locator("main").inner_text()
    assert refused == "Sign-in failed: HATP-GW-68: this passkey is not on any signed card"
    assert rc == 0 and "Signed in as Erin Evans" in signed_in
