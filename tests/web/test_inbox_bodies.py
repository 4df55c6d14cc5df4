"""Hostile request bodies at the web inbox over real HTTP (issue #35 items 3 and 6): every body is bounded before it
is read (HATP-GW-85), a body nested past the limit or an answer outside what a signature can hold is refused 4xx
with its rule, never a 500 (HATP-OBJ-2, HATP-ASK-8), and every answer, the inbox's own refusals and the paths no
route matches included, carries the security headers (HATP-GW-74)."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import anyio.to_thread
import pytest

from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.web.inbox import CSP, body_cap
from tests.acme_org import h
from tests.web.browserless import Browserless, signed_in
from tests.web.inbox_fixture import Served, serve_inbox

pytestmark = pytest.mark.anyio

FORM = {"type": "object", "properties": {"nights": {"type": "integer", "minimum": 1}}, "required": ["nights"]}


@pytest.fixture
async def served(tmp_path: Path, clock: FakeClock) -> AsyncIterator[Served]:
    async with serve_inbox(tmp_path, clock) as s:
        await s.gateway.open_question(
            ask_id="q-stay", kind="form", address=h("bob"), question="How long?", form_schema=FORM
        )
        yield s


def raw_post(origin: str, path: str, head: dict[str, str], body: bytes, chunked: bool = False) -> tuple[int, str]:
    """One POST over a plain socket (a Content-Length that promises more than is sent, or a chunked body), its
    status and the whole answer; bounded by the socket's timeout. A body the inbox refuses from its header is not
    sent at all (the test sends an empty one): a server that closes with bytes unread resets the connection."""
    host, port = origin.removeprefix("http://").split(":")
    lines = [f"POST {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close", "Content-Type: application/json"]
    lines += [f"{k}: {v}" for k, v in head.items()]
    if chunked:
        lines.append("Transfer-Encoding: chunked")
    elif "Content-Length" not in head:
        lines.append(f"Content-Length: {len(body)}")
    with socket.create_connection(("127.0.0.1", int(port)), timeout=10) as sock:
        sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        try:
            if chunked:
                for i in range(0, len(body), 4096):
                    part = body[i : i + 4096]
                    sock.sendall(f"{len(part):x}\r\n".encode() + part + b"\r\n")
                sock.sendall(b"0\r\n\r\n")
            else:
                sock.sendall(body)
        except OSError:
            pass  # the inbox answered and closed before taking it all: what is read below says how
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    text = answer.decode("latin-1")
    return int(text.split(" ", 2)[1]), text


def posted_json(b: Browserless) -> dict[str, str]:
    return {"Origin": b.origin, "X-CSRF-Token": b.csrf, "Cookie": "; ".join(f"{k}={v}" for k, v in b.cookies.items())}


def nested(levels: int) -> bytes:
    return b'{"nonce": ' + b"[" * levels + b"]" * levels + b"}"


async def test_HATP_GW_85_a_body_larger_than_its_route_takes_is_refused_413_before_it_is_read(served: Served) -> None:
    b = Browserless(served.origin)
    await b.get("/")
    head = posted_json(b)
    with anyio.fail_after(20):
        # promises 300 MiB and sends none of it: answered at once from the header alone
        promised = await anyio.to_thread.run_sync(
            raw_post, served.origin, "/signin", head | {"Content-Length": str(300 * 1024 * 1024)}, b""
        )
        # no Content-Length: the streamed count stops it at the cap
        streamed = await anyio.to_thread.run_sync(
            raw_post, served.origin, "/signin", head, b'{"nonce": "' + b"x" * (16 * 1024) + b'"}', True
        )
    for status, text in (promised, streamed):
        assert status == 413 and '"rule":"HATP-GW-85"' in text.replace(" ", ""), text[:400]
        assert f"content-security-policy: {CSP}".lower() in text.lower()
    assert body_cap("POST", "/signin") < 64 * 1024 < body_cap("POST", "/asks/q-stay/challenge")


async def test_HATP_OBJ_2_a_sign_in_nested_1000_deep_is_refused_400_not_500(served: Served) -> None:
    b = Browserless(served.origin)
    with anyio.fail_after(20):
        await b.get("/")
        status, text = await anyio.to_thread.run_sync(raw_post, served.origin, "/signin", posted_json(b), nested(1_000))
    assert status == 400 and '"rule":"HATP-OBJ-2"' in text.replace(" ", ""), text[:400]


@pytest.mark.parametrize("levels", [1_000, 100_000])
async def test_HATP_OBJ_2_an_answer_nested_past_the_limit_is_refused_400_not_500(served: Served, levels: int) -> None:
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, text = await anyio.to_thread.run_sync(
            raw_post, served.origin, "/asks/q-stay/challenge", posted_json(b), nested(levels)
        )
    assert status == 400 and '"rule":"HATP-OBJ-2"' in text.replace(" ", ""), text[:400]


@pytest.mark.parametrize("number", ["1e0", "1.0", "18446744073709551616", "9007199254740992"])
async def test_HATP_ASK_8_a_form_answer_no_signature_can_hold_is_refused_400_before_any_challenge(
    served: Served, number: str
) -> None:
    body = f'{{"decision": "answer", "value": {{"nights": {number}}}}}'.encode()
    with anyio.fail_after(20):
        b = await signed_in(served)
        status, text = await anyio.to_thread.run_sync(
            raw_post, served.origin, "/asks/q-stay/challenge", posted_json(b), body
        )
        fits, _ = await b.post("/asks/q-stay/challenge", {"decision": "answer", "value": {"nights": 2}})
    assert status == 400 and '"rule":"HATP-ASK-8"' in text.replace(" ", ""), text[:400]
    assert fits == 200


@pytest.mark.parametrize(
    ("method", "path", "body", "expected"),
    [
        ("GET", "/nowhere", None, 404),
        ("POST", "/", None, 405),
        ("PUT", "/asks/x", None, 405),
        ("PUT", "/asks/x", {}, 413),  # a method that reads no body takes none (HATP-GW-85)
        ("POST", "/nowhere", {}, 404),
    ],
)
async def test_HATP_GW_74_a_path_no_route_matches_carries_the_security_headers(
    served: Served, method: str, path: str, body: object, expected: int
) -> None:
    b = Browserless(served.origin)
    with anyio.fail_after(20):
        status, headers, _ = await anyio.to_thread.run_sync(b._call, method, path, body, {})
    assert status == expected
    got = {k.lower(): v for k, v in headers.items()}
    assert got["content-security-policy"] == CSP and got["x-content-type-options"] == "nosniff"
    assert got["cache-control"] == "no-store" and got["referrer-policy"] == "no-referrer"


def test_the_nested_helper_makes_what_it_says() -> None:
    assert json.loads(nested(3)) == {"nonce": [[[]]]}
