"""A minimal HTTP client for the web inbox with a cookie jar and the page's CSRF token, standing in for a browser
(the software authenticator, tests/passkey_authenticator.py, stands in for its passkey). Test code only."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import anyio
import anyio.to_thread

from hatp_mcp.core.gateway.passkey import unb64u
from tests.acme_org import h
from tests.web.inbox_fixture import Served

__all__ = ["Browserless", "signed_in"]


class Browserless:
    """A minimal HTTP client with a cookie jar, run on a worker thread (the server shares this event loop)."""

    def __init__(self, origin: str) -> None:
        self.origin = origin
        self.cookies: dict[str, str] = {}
        self.csrf = ""

    def _call(self, method: str, path: str, body: Any, headers: dict[str, str]) -> tuple[int, dict[str, str], str]:
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.origin + path, data=data, method=method)
        req.add_header("Cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()))
        req.add_header("Content-Type", "application/json")
        for k, v in headers.items():
            req.add_header(k, v)
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                status, hdrs, text = resp.status, dict(resp.headers), resp.read().decode()
                cookies = resp.headers.get_all("Set-Cookie") or []
        except urllib.error.HTTPError as exc:
            status, hdrs, text = exc.code, dict(exc.headers), exc.read().decode()
            cookies = exc.headers.get_all("Set-Cookie") or []
        for c in cookies:
            name, _, rest = c.partition("=")
            value = rest.split(";", 1)[0].strip('"')
            if value and "max-age=0" not in c.lower():
                self.cookies[name] = value
            else:
                self.cookies.pop(name, None)
        if "csrf-token content=" in text:
            self.csrf = text.split('csrf-token content="', 1)[1].split('"', 1)[0]
        return status, hdrs, text

    async def get(self, path: str) -> tuple[int, dict[str, str], str]:
        return await anyio.to_thread.run_sync(self._call, "GET", path, None, {})

    async def post(
        self, path: str, body: Any, *, origin: str | None = None, csrf: str | None = None
    ) -> tuple[int, dict[str, Any]]:
        headers = {
            "Origin": self.origin if origin is None else origin,
            "X-CSRF-Token": self.csrf if csrf is None else csrf,
        }
        status, _h, text = await anyio.to_thread.run_sync(self._call, "POST", path, body, headers)
        return status, json.loads(text) if text else {}


async def signed_in(s: Served) -> Browserless:
    """Bob, signed in with his software passkey."""
    b = Browserless(s.origin)
    await b.get("/")
    status, options = await b.post("/signin/options", {})
    assert status == 200
    credential = s.bob.credential_json(unb64u(options["challenge"]), origin=s.origin)
    status, who = await b.post("/signin", {"nonce": options["nonce"], "credential": credential})
    assert (status, who) == (200, {"human": h("bob")})
    await b.get("/")
    return b
