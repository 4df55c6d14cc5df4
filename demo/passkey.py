"""`make demo-passkey`: the trip over seven MCP server processes, the finance approver approving in the web inbox
with a passkey, in a real (headless) Chromium.

1. Enrolment, as the operator does it today (spec/gateway.md HATP-GW-71): each finance approver's passkey (an
   ES256 credential made here) is put on their card, and the card re-signed with the Directory's key (the
   TEST-ONLY key of acme.com); the organisation's `gateway.json` names the inbox's relying party.
2. The seven servers start (demo/trip_suite.py), the gateway with its web inbox (`--inbox-port`), the coordinator
   checking every person's decision against the cards (`--org`, HATP-TXN-19) and polling only once an hour: the
   decision reaches it through the long poll (HATP-MCP-40).
3. The agent begins the trip; Chromium, with the approver's passkey in the DevTools protocol's virtual
   authenticator, signs in to the inbox, opens the ask and approves: the assertion is over the SHA-256 of the
   canonical {askId, subjectDigest, decision, nonce, issuedAt} (HATP-GW-67).
4. The trip commits; the record holds the approver's passkey assertion, and `hatp verify --org` checks it
   offline; its timeline (`hatp timeline`, HATP-GW-75) is written beside it. Screenshots of the list, the ask,
   the decision and the timeline are written to the data dir (printed).

Run: .venv/bin/python -m demo.passkey [--data DIR]. (A real person at a real browser would first need the
inbox's registration ceremony, which is not built yet: HATP-GW-71.)
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import cbor2
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from playwright.async_api import async_playwright

from demo.trip_mcp import plan_for, timeline
from demo.trip_suite import ORG, open_seven
from hatp_mcp.core.evidence.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.humans.passkey import b64u
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.mcp.serve import quiet
from hatp_mcp.runtime.org import load_human_keys
from hatp_mcp.web.timeline import render_timeline

__all__ = ["CHROMIUM", "main", "run_demo"]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]
APPROVERS = ("alice", "bob", "carol", "dana", "erin", "frank")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def enrol(org: Path, port: int) -> dict[str, tuple[str, ec.EllipticCurvePrivateKey]]:
    """Copy acme.com to `org`, give each approver a passkey on a card re-signed by the Directory (TEST-ONLY key)
    and name the inbox's relying party. Returns human -> (credential id, private key)."""
    shutil.copytree(ORG, org)
    directory = SigningKey.from_jwk(json.loads((org / "test-only-keys" / "directory.private.jwk.json").read_text()))
    out: dict[str, tuple[str, ec.EllipticCurvePrivateKey]] = {}
    for name in APPROVERS:
        path = org / "cards" / f"{name}.json"
        card = {k: v for k, v in json.loads(path.read_text()).items() if k != "signature"}
        key = ec.generate_private_key(ec.SECP256R1())
        nums = key.public_key().public_numbers()
        cose = cbor2.dumps({1: 2, 3: -7, -1: 1, -2: nums.x.to_bytes(32, "big"), -3: nums.y.to_bytes(32, "big")})
        credential_id = b64u(name.encode() + b"-passkey-" + nums.x.to_bytes(32, "big")[:8])
        keys = [k for k in card["keys"] if k["type"] != "passkey"]  # the fixture's placeholders go
        card["keys"] = [*keys, {"type": "passkey", "id": credential_id, "publicKey": b64u(cose)}]
        path.write_text(json.dumps(sign_object(card, directory), indent=1))
        out[card["id"]] = (credential_id, key)
    origin = f"http://localhost:{port}"
    settings = {"inboxUrl": origin, "passkey": {"rpId": "localhost", "origins": [origin]}}
    (org / "gateway.json").write_text(json.dumps(settings, indent=1))
    return out


async def approve_in_chromium(
    url: str, ask_id: str, credential_id: str, key: ec.EllipticCurvePrivateKey, shots: Path
) -> str:
    """Headless Chromium with the passkey in a virtual authenticator: sign in, open the ask, approve. Returns the
    page's closing message; writes list.png, ask.png and decided.png into `shots`."""
    der = key.private_bytes(serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    raw_id = base64.urlsafe_b64decode(credential_id + "=" * (-len(credential_id) % 4))
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={"width": 1000, "height": 700})
            page = await context.new_page()
            cdp = await context.new_cdp_session(page)
            await cdp.send("WebAuthn.enable", {"enableUI": False})
            options: dict[str, Any] = {
                "protocol": "ctap2",
                "ctap2Version": "ctap2_1",
                "transport": "internal",
                "hasResidentKey": True,
                "hasUserVerification": True,
                "isUserVerified": True,
                "automaticPresenceSimulation": True,
            }
            added = await cdp.send("WebAuthn.addVirtualAuthenticator", {"options": options})
            credential = {
                "credentialId": base64.b64encode(raw_id).decode(),
                "isResidentCredential": True,
                "rpId": "localhost",
                "privateKey": base64.b64encode(der).decode(),
                "userHandle": base64.b64encode(raw_id[:16]).decode(),
                "signCount": 0,
            }
            await cdp.send(
                "WebAuthn.addCredential", {"authenticatorId": added["authenticatorId"], "credential": credential}
            )
            await page.goto(url)
            await page.click("#signin")
            await page.wait_for_selector("#asks")
            await page.screenshot(path=str(shots / "list.png"), full_page=True)
            await page.click(f'a[href="/asks/{ask_id}"]')
            await page.wait_for_selector("#actions")
            await page.screenshot(path=str(shots / "ask.png"), full_page=True)
            await page.click("button[data-decision=approve]")
            await page.wait_for_selector("#message:text-matches('^(Recorded|Not recorded)')")
            await page.screenshot(path=str(shots / "decided.png"), full_page=True)
            return await page.locator("#message").inner_text()
        finally:
            await browser.close()


async def screenshot(page_uri: str, png: Path) -> None:
    """A local page (a file:// URI) in Chromium, as a PNG."""
    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            tab = await browser.new_page(viewport={"width": 1450, "height": 800})
            await tab.goto(page_uri)
            await tab.screenshot(path=str(png), full_page=True)
        finally:
            await browser.close()


async def run_demo(data: Path, *, out: Callable[[str], None] = print) -> dict[str, Any]:
    """Run the demo in `data`; returns {"outcome", "record", "verified", "shots"}. Raises on a failed step."""
    port = _free_port()
    org = data / "org"
    passkeys = enrol(org, port)
    out(f"enrolled {len(passkeys)} approvers' passkeys on their Directory-signed cards (TEST-ONLY Directory key)")
    async with AsyncExitStack() as stack:
        extra = {
            "gateway": ["--org", str(org), "--inbox-port", str(port)],
            "coordinator": ["--org", str(org), "--poll-seconds", "3600"],
        }
        suite = await open_seven(stack, data / "servers", extra=extra)
        out(f"started {len(suite.procs)} MCP server processes; the web inbox is at http://localhost:{port}/")
        (data / "keyring.json").write_text(json.dumps(suite.keyring().to_jwks()))
        txn_id = f"txn-passkey-{datetime.now(UTC).strftime('%H%M%S%f')}"
        started = datetime.now(UTC)
        await suite.begin(plan_for(txn_id, started, "2026-12-10", "14C"))
        await suite.asked(txn_id)
        ask_id = f"{txn_id}/finance"
        shown = await suite.tool("gateway", "show_ask", {"ask_id": ask_id})
        who = str(shown["waitingFor"][0])
        out(f"{txn_id}: begun; {who} is asked; Chromium signs in with their passkey and approves")
        credential_id, key = passkeys[who]
        shots = data / "screenshots"
        shots.mkdir(parents=True, exist_ok=True)
        message = await approve_in_chromium(f"http://localhost:{port}/", ask_id, credential_id, key, shots)
        out(f"  the inbox says: {message}")
        done = await suite.outcome(txn_id)
    for line in timeline(done["record"], started):
        out(line)
    out(f"  => {done['outcome']}")
    path = data / f"{txn_id}.record.json"
    path.write_text(json.dumps(done["record"], indent=1))
    cmd = [sys.executable, "-m", "hatp_mcp.cli", "verify", str(path), "--keys", str(data / "keyring.json")]
    verified = await anyio.run_process([*cmd, "--org", str(org), "--json"], check=False)
    report = json.loads(verified.stdout.decode() or "{}")
    out(f"  hatp verify --org {path.name}: {'ok' if verified.returncode == 0 else 'FAILED'}")
    ring = Keyring.from_jwks(json.loads((data / "keyring.json").read_text()))
    problems = verify_record(done["record"], ring, humans=load_human_keys(org))
    page = data / "timeline.html"
    page.write_text(render_timeline(done["record"], problems))
    await screenshot(page.resolve().as_uri(), shots / "timeline.png")
    out(f"  timeline: {page} ({len(problems)} problem(s))")
    out(f"  screenshots: {', '.join(str(shots / f'{n}.png') for n in ('list', 'ask', 'decided', 'timeline'))}")
    return {
        "outcome": done["outcome"],
        "record": done["record"],
        "verified": report,
        "rc": verified.returncode,
        "shots": shots,
        "who": who,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="demo.passkey", description=__doc__)
    parser.add_argument("--data", help="keep state, record and screenshots here (default: a temporary directory)")
    args = parser.parse_args(argv)
    quiet()
    if not Path(CHROMIUM).exists():
        print("chromium is missing: apt-get install -y chromium (make demo-passkey does it)", file=sys.stderr)
        return 2

    async def bounded(data: Path) -> dict[str, Any]:
        with anyio.fail_after(300):
            return await run_demo(data)

    if args.data:
        Path(args.data).mkdir(parents=True, exist_ok=True)
        result = anyio.run(bounded, Path(args.data).resolve())
    else:
        tmp = Path(tempfile.mkdtemp(prefix="hatp-passkey-"))
        result = anyio.run(bounded, tmp)
    return 0 if result["outcome"] == "COMMITTED" and result["rc"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
