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
   offline. The record is filed where the gateway's inbox draws timelines (`--records`, HATP-GW-81) and its
   timeline opened in the same signed-in browser; `hatp timeline`'s page (HATP-GW-75) is written beside it.
   Screenshots of the list, the ask, the decision and the timeline are written to the data dir (printed).

With `--open` (`make demo-passkey OPEN=1`) nothing drives a browser: the demo prints a one-time enrolment link
for the person asked and the ask's link, and waits for a real person, bounded by the ask's deadline. They
register a passkey at the link (HATP-GW-71); the demo, as the operator, approves the registration with the
TEST-ONLY Directory key (`hatp enrol approve`, printed); the running gateway sees the re-signed card at once
(HATP-GW-82); they sign in with that passkey and approve, and the trip commits as above.

Run: .venv/bin/python -m demo.passkey [--data DIR] [--open].
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import cbor2
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from playwright.async_api import Page, async_playwright

from demo.trip_mcp import plan_for, timeline
from demo.trip_suite import ORG, open_seven
from hatp_mcp.core.gateway.passkey import b64u
from hatp_mcp.core.model.base import format_ts, parse_ts
from hatp_mcp.core.signing.keys import Keyring, SigningKey, sign_object
from hatp_mcp.core.txn.record import verify_record
from hatp_mcp.mcp.serve import quiet
from hatp_mcp.runtime.org import load_human_keys
from hatp_mcp.store.inbox_state import InboxState
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


@asynccontextmanager
async def chromium(passkey: tuple[str, ec.EllipticCurvePrivateKey] | None = None) -> AsyncIterator[Page]:
    """Headless Chromium with a virtual authenticator (user verification, resident keys), holding `passkey`
    (credential id, private key) when given; closed on the way out."""
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
            if passkey is not None:
                credential_id, key = passkey
                der = key.private_bytes(
                    serialization.Encoding.DER, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
                )
                raw_id = base64.urlsafe_b64decode(credential_id + "=" * (-len(credential_id) % 4))
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
            yield page
        finally:
            await browser.close()


async def approve_in_chromium(page: Page, url: str, ask_id: str, shots: Path) -> str:
    """Sign in, open the ask, approve. Returns the page's closing message; writes list.png, ask.png and
    decided.png into `shots`."""
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


async def wait_for_a_person(
    data: Path, org: Path, url: str, ask_id: str, who: str, deadline: datetime, out: Callable[[str], None]
) -> None:
    """`--open`: print the enrolment link for `who` and the ask's link, approve their registration as the operator
    would, and return once the trip has an outcome; bounded by the ask's deadline (then the coordinator ends the
    trip itself, and the outcome says so)."""
    gateway_data = data / "servers" / "gateway"
    hatp = [sys.executable, "-m", "hatp_mcp.cli"]
    issued = await anyio.run_process([*hatp, "enrol", "code", "--data", str(gateway_data), "--human", who,
                                      "--inbox-url", url, "--hours", "1"])  # fmt: skip
    link = issued.stdout.decode().strip()
    out(f"  a real person, as {who}: register a passkey at {link}")
    out(f"  then sign in with it and approve at {url}asks/{ask_id} (waiting until {format_ts(deadline)})")
    seconds = max((deadline - datetime.now(UTC)).total_seconds(), 0) + 60
    with anyio.fail_after(seconds):  # the coordinator ends the trip at the deadline: the outcome comes by then
        state = InboxState(gateway_data)
        try:
            while True:  # the registration lands in the gateway's inbox.db, written by another process
                pending = [e for e in state.enrolments("pending") if e.human == who]
                if pending:
                    break
                await anyio.sleep(0.5)
        finally:
            state.close()
        key = org / "test-only-keys" / "directory.private.jwk.json"
        approve = ["enrol", "approve", str(pending[0].seq), "--data", str(gateway_data), "--org", str(org)]
        done = await anyio.run_process([*hatp, *approve, "--key", str(key)], check=False)
        out(f"  operator: hatp {' '.join(approve)} --key DIRECTORY_KEY (TEST-ONLY)")
        out(f"    {(done.stdout or done.stderr).decode().strip()}")
        out("  the running gateway uses the re-signed card at once: sign in now")


async def run_demo(data: Path, *, out: Callable[[str], None] = print, open_: bool = False) -> dict[str, Any]:
    """Run the demo in `data`; returns {"outcome", "record", "verified", "rc", "shots", "who"}. With `open_` a real
    person approves (see the module docstring) and no screenshots are taken. Raises on a failed step."""
    port = _free_port()
    org = data / "org"
    passkeys = enrol(org, port)
    out(f"enrolled {len(passkeys)} approvers' passkeys on their Directory-signed cards (TEST-ONLY Directory key)")
    records, keyring = data / "records", data / "keyring.json"
    records.mkdir(parents=True, exist_ok=True)
    shots = data / "screenshots"
    shots.mkdir(parents=True, exist_ok=True)
    url = f"http://localhost:{port}/"
    async with AsyncExitStack() as stack:
        extra = {
            "gateway": ["--org", str(org), "--inbox-port", str(port), "--records", str(records),
                        "--record-keys", str(keyring)],
            "coordinator": ["--org", str(org), "--poll-seconds", "3600"],
        }  # fmt: skip
        suite = await open_seven(stack, data / "servers", extra=extra)
        out(f"started {len(suite.procs)} MCP server processes; the web inbox is at {url}")
        keyring.write_text(json.dumps(suite.keyring().to_jwks()))
        txn_id = f"txn-passkey-{datetime.now(UTC).strftime('%H%M%S%f')}"
        started = datetime.now(UTC)
        await suite.begin(plan_for(txn_id, started, "2026-12-10", "14C"))
        await suite.asked(txn_id)
        ask_id = f"{txn_id}/finance"
        shown = await suite.tool("gateway", "show_ask", {"ask_id": ask_id})
        who = str(shown["waitingFor"][0])
        if open_:
            out(f"{txn_id}: begun; {who} is asked")
            deadline = parse_ts(str(shown["decideBy"]))
            await wait_for_a_person(data, org, url, ask_id, who, deadline, out)
            done = await suite.outcome(txn_id)
        else:
            out(f"{txn_id}: begun; {who} is asked; Chromium signs in with their passkey and approves")
            page = await stack.enter_async_context(chromium(passkeys[who]))
            message = await approve_in_chromium(page, url, ask_id, shots)
            out(f"  the inbox says: {message}")
            done = await suite.outcome(txn_id)
        for line in timeline(done["record"], started):
            out(line)
        out(f"  => {done['outcome']}")
        path = records / f"{txn_id}.record.json"  # filed where the inbox draws timelines (HATP-GW-81)
        path.write_text(json.dumps(done["record"], indent=1))
        if not open_:
            await page.goto(f"{url}txns/{txn_id}/timeline")
            await page.wait_for_selector("svg")
            await page.set_viewport_size({"width": 1450, "height": 800})
            await page.screenshot(path=str(shots / "timeline.png"), full_page=True)
        else:
            out(f"  the timeline, for the person who approved: {url}txns/{txn_id}/timeline")
    cmd = [sys.executable, "-m", "hatp_mcp.cli", "verify", str(path), "--keys", str(keyring)]
    verified = await anyio.run_process([*cmd, "--org", str(org), "--json"], check=False)
    report = json.loads(verified.stdout.decode() or "{}")
    out(f"  hatp verify --org {path.name}: {'ok' if verified.returncode == 0 else 'FAILED'}")
    ring = Keyring.from_jwks(json.loads(keyring.read_text()))
    problems = verify_record(done["record"], ring, humans=load_human_keys(org))
    page_file = data / "timeline.html"
    page_file.write_text(render_timeline(done["record"], problems))
    out(f"  timeline (hatp timeline): {page_file} ({len(problems)} problem(s))")
    if not open_:
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
    parser.add_argument("--open", action="store_true", help="wait for a real person at the printed links")
    args = parser.parse_args(argv)
    quiet()
    if not Path(CHROMIUM).exists():
        print("chromium is missing: apt-get install -y chromium (make demo-passkey does it)", file=sys.stderr)
        return 2

    async def bounded(data: Path) -> dict[str, Any]:
        # --open: the wait for the person is bounded by the ask's deadline (an hour) inside run_demo
        with anyio.fail_after(2 * 3600 if args.open else 300):
            return await run_demo(data, open_=args.open)

    if args.data:
        Path(args.data).mkdir(parents=True, exist_ok=True)
        result = anyio.run(bounded, Path(args.data).resolve())
    else:
        tmp = Path(tempfile.mkdtemp(prefix="hatp-passkey-"))
        result = anyio.run(bounded, tmp)
    return 0 if result["outcome"] == "COMMITTED" and result["rc"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
