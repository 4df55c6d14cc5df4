"""The organisation's gateway settings for delivery (`ORG/gateway.json`, HATP-GW-65) and the secrets they name.

```json
{"inboxUrl": "https://approvals.acme.example",
 "delivery": {"attemptsPerChannel": 3, "backoffSeconds": 30, "maxBackoffSeconds": 600,
              "remindBeforeSeconds": 900, "sendTimeoutSeconds": 10, "concurrentSends": 8},
 "channels": {"email": {"host": "smtp.acme.example", "port": 587, "from": "approvals@acme.example",
                        "starttls": true, "username": "hatp", "password": {"env": "HATP_SMTP_PASSWORD"}},
              "chat": {"url": {"file": "/etc/hatp/chat-webhook-url"}, "secret": {"env": "HATP_CHAT_SECRET"}},
              "sms": {"url": "https://sms.example/v1/messages", "from": "+15550100",
                      "secret": {"file": "/etc/hatp/sms.secret"}}}}
```

A secret (a password, a signing secret, a webhook URL that is itself a credential) is never written in the file:
it is `{"env": NAME}` (an environment variable of the gateway process) or `{"file": PATH}` (a file of mode 0600 or
stricter, owned by the gateway's user); a literal string where a secret goes, a group- or world-readable file, an
unset variable or an empty secret is refused at start, naming the rule and the JSON path. Nothing in a plan, an
ask or a tool call is ever read as a setting. Pure parsing plus the two reads (environment, file) a secret needs.
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hatp_mcp.errors import HatpError
from hatp_mcp.store.private_files import read_private

__all__ = ["DeliverySettings", "EmailSettings", "GatewaySettings", "WebhookSettings", "load_settings", "read_secret"]

SETTINGS_FILE = "gateway.json"


def _bad(path: str, reason: str, fix: str) -> HatpError:
    return HatpError("HATP-GW-65", reason, path=path, fix=fix, code="BAD_SETTINGS")


def read_secret(ref: Any, path: str, env: Mapping[str, str] | None = None) -> str:
    """The secret `ref` names (`{"env": NAME}` or `{"file": PATH}`). Raises HatpError HATP-GW-65."""
    env = os.environ if env is None else env
    if isinstance(ref, str):
        raise _bad(path, "a secret is written in the settings file", 'name it instead: {"env": NAME} or {"file": PATH}')
    if not isinstance(ref, dict) or len(ref) != 1 or not ({"env", "file"} & set(ref)):
        raise _bad(path, 'a secret is {"env": NAME} or {"file": PATH}', "name an environment variable or a 0600 file")
    if "env" in ref:
        value = env.get(str(ref["env"]), "")
        if not value:
            raise _bad(path, f"environment variable {ref['env']} is unset or empty", "set it for the gateway process")
        return value
    file = Path(str(ref["file"]))
    try:
        mode, raw = read_private(file, lambda m: not m & (stat.S_IRWXG | stat.S_IRWXO))
        if raw is None:
            raise _bad(path, f"{file} is readable by others (mode {stat.S_IMODE(mode):o})", f"chmod 600 {file}")
        value = raw.decode().strip()
    except OSError as exc:
        raise _bad(path, f"cannot read {file}: {exc.strerror}", "create it with mode 0600") from exc
    if not value:
        raise _bad(path, f"{file} is empty", "write the secret into it")
    return value


@dataclass(frozen=True)
class EmailSettings:
    host: str
    port: int
    sender: str
    starttls: bool = False
    username: str | None = None
    password: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class WebhookSettings:
    """A signed webhook (chat in the Slack incoming-webhook shape, sms to a provider): body signed with HMAC-SHA256
    over `v1:{timestamp}:{body}` (HATP-GW-66)."""

    url: str = field(repr=False)  # may itself be a credential (a Slack webhook URL is)
    secret: str = field(repr=False)
    sender: str | None = None


@dataclass(frozen=True)
class DeliverySettings:
    attempts_per_channel: int = 3
    backoff_seconds: float = 30.0
    max_backoff_seconds: float = 600.0
    remind_before_seconds: float = 900.0
    send_timeout_seconds: float = 10.0
    concurrent_sends: int = 8  # HATP-GW-83: attempts in flight at once, different people's


@dataclass(frozen=True)
class GatewaySettings:
    inbox_url: str = "http://localhost:8400"
    delivery: DeliverySettings = DeliverySettings()
    email: EmailSettings | None = None
    chat: WebhookSettings | None = None
    sms: WebhookSettings | None = None


# gateway.json's `delivery` members: the DeliverySettings field each sets (its default is the field's), and
# whether it is a whole number
_DELIVERY_KEYS = {
    "attemptsPerChannel": ("attempts_per_channel", True),
    "backoffSeconds": ("backoff_seconds", False),
    "maxBackoffSeconds": ("max_backoff_seconds", False),
    "remindBeforeSeconds": ("remind_before_seconds", False),
    "sendTimeoutSeconds": ("send_timeout_seconds", False),
    "concurrentSends": ("concurrent_sends", True),
}


def _positive(raw: Mapping[str, Any], key: str, default: float, path: str, whole: bool = False) -> Any:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float) or value <= 0 or (whole and value != int(value)):
        raise _bad(f"{path}.{key}", f"{key} must be a positive {'integer' if whole else 'number'}", "fix the value")
    return int(value) if whole else float(value)


def parse_settings(raw: Any, env: Mapping[str, str] | None = None) -> GatewaySettings:
    """Settings from the parsed JSON document. Raises HatpError HATP-GW-65."""
    if not isinstance(raw, dict):
        raise _bad(
            "$",
            "the gateway settings are a JSON object",
            "write an object with inboxUrl, delivery and channels members",
        )
    unknown = set(raw) - {"inboxUrl", "delivery", "channels", "passkey"}  # passkey: runtime/org.py
    if unknown:
        raise _bad(f"$.{sorted(unknown)[0]}", f"unknown setting {sorted(unknown)[0]!r}", "remove it")
    inbox = raw.get("inboxUrl", "http://localhost:8400")
    if not isinstance(inbox, str) or not inbox.startswith(("http://", "https://")):
        raise _bad("$.inboxUrl", "inboxUrl is an http(s) URL", "give the URL people open the inbox at")
    d = raw.get("delivery", {})
    if not isinstance(d, dict):
        raise _bad(
            "$.delivery", "delivery is an object", "write delivery as an object of retry bounds, or leave it out"
        )
    unknown = set(d) - set(_DELIVERY_KEYS)
    if unknown:  # a misspelt bound must not silently become the default
        name = sorted(unknown)[0]
        raise _bad(
            f"$.delivery.{name}", f"unknown delivery setting {name!r}", f"use one of {', '.join(_DELIVERY_KEYS)}"
        )
    defaults = DeliverySettings()
    delivery = DeliverySettings(
        **{
            field: _positive(d, key, getattr(defaults, field), "$.delivery", whole)
            for key, (field, whole) in _DELIVERY_KEYS.items()
        }
    )
    channels = raw.get("channels", {})
    if not isinstance(channels, dict) or set(channels) - {"email", "chat", "sms"}:
        raise _bad("$.channels", "channels holds email, chat and sms only", "remove the others")
    email = None
    if "email" in channels:
        e, p = channels["email"], "$.channels.email"
        if not isinstance(e, dict) or not isinstance(e.get("host"), str) or not isinstance(e.get("from"), str):
            raise _bad(p, "email needs host and from", "give the SMTP host and the sender address")
        email = EmailSettings(
            host=e["host"],
            port=_positive(e, "port", 25, p, whole=True),
            sender=e["from"],
            starttls=bool(e.get("starttls", False)),
            username=e.get("username"),
            password=read_secret(e["password"], f"{p}.password", env) if "password" in e else None,
        )
    hooks: dict[str, WebhookSettings] = {}
    for kind in ("chat", "sms"):
        if kind in channels:
            w, p = channels[kind], f"$.channels.{kind}"
            if not isinstance(w, dict) or "url" not in w or "secret" not in w:
                raise _bad(p, f"{kind} needs url and secret", 'give the URL and {"env": NAME} for the secret')
            url = w["url"] if isinstance(w["url"], str) else read_secret(w["url"], f"{p}.url", env)
            if not url.startswith(("http://", "https://")):
                raise _bad(f"{p}.url", "the webhook URL is http(s)", "fix the URL")
            hooks[kind] = WebhookSettings(url, read_secret(w["secret"], f"{p}.secret", env), w.get("from"))
    return GatewaySettings(inbox, delivery, email, hooks.get("chat"), hooks.get("sms"))


def load_settings(org_dir: str | Path, env: Mapping[str, str] | None = None) -> GatewaySettings | None:
    """`ORG/gateway.json`, or None when the organisation has none (nothing is pushed; the inbox still works).
    Raises HatpError HATP-GW-65 (also for a file that is not JSON)."""
    file = Path(org_dir) / SETTINGS_FILE
    if not file.exists():
        return None
    try:
        raw = json.loads(file.read_text())
    except (OSError, ValueError) as exc:
        raise _bad("$", f"{file} is not readable JSON: {exc}", "fix the file") from exc
    return parse_settings(raw, env)
