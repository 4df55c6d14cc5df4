"""The organisation's delivery settings (HATP-GW-65): secrets only from environment variables or 0600 files, never
written in the file; every refusal names the rule and the JSON path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.gateway.delivery.settings import load_settings, parse_settings

CHAT = {"url": "https://hooks.example/T/B", "secret": {"env": "HATP_CHAT_SECRET"}}


def test_HATP_GW_65_secrets_come_from_the_environment_or_a_0600_file(tmp_path: Path) -> None:
    secret = tmp_path / "sms.secret"
    secret.write_text("sms-signing-secret\n")
    secret.chmod(0o600)
    doc = {
        "inboxUrl": "https://approvals.acme.example",
        "delivery": {"attemptsPerChannel": 4, "backoffSeconds": 10},
        "channels": {
            "chat": CHAT,
            "sms": {"url": "https://sms.example/v1", "from": "+15550100", "secret": {"file": str(secret)}},
            "email": {"host": "smtp.acme.example", "port": 587, "from": "a@acme.example", "starttls": True},
        },
    }
    (tmp_path / "gateway.json").write_text(json.dumps(doc))
    s = load_settings(tmp_path, env={"HATP_CHAT_SECRET": "chat-signing-secret"})
    assert s is not None and s.chat is not None and s.sms is not None and s.email is not None
    assert (s.chat.secret, s.sms.secret, s.sms.sender) == ("chat-signing-secret", "sms-signing-secret", "+15550100")
    assert (s.delivery.attempts_per_channel, s.delivery.backoff_seconds, s.email.port) == (4, 10.0, 587)
    assert "signing-secret" not in repr(s)  # never printed with the settings
    assert load_settings(tmp_path / "nowhere") is None


@pytest.mark.parametrize(
    ("secret", "env", "path", "words"),
    [
        ("literal-secret", {}, "$.channels.chat.secret", "written in the settings file"),
        ({"env": "HATP_CHAT_SECRET"}, {}, "$.channels.chat.secret", "unset or empty"),
        ({"vault": "x"}, {}, "$.channels.chat.secret", '{"env": NAME} or {"file": PATH}'),
    ],
)
def test_HATP_GW_65_a_secret_in_the_file_or_one_that_cannot_be_read_is_refused(
    secret: object, env: dict[str, str], path: str, words: str
) -> None:
    with pytest.raises(HatpError) as refused:
        parse_settings({"channels": {"chat": {"url": "https://hooks.example/T/B", "secret": secret}}}, env=env)
    assert (refused.value.rule, refused.value.code, refused.value.path) == ("HATP-GW-65", "BAD_SETTINGS", path)
    assert words in refused.value.reason


def test_HATP_GW_65_a_secret_file_others_can_read_is_refused_and_an_unknown_setting_too(tmp_path: Path) -> None:
    secret = tmp_path / "chat.secret"
    secret.write_text("s")
    secret.chmod(0o640)
    with pytest.raises(HatpError) as readable:
        parse_settings({"channels": {"chat": {"url": "https://h.example", "secret": {"file": str(secret)}}}})
    assert readable.value.path == "$.channels.chat.secret" and "mode 640" in readable.value.reason
    with pytest.raises(HatpError) as unknown:
        parse_settings({"channels": {"chat": CHAT}, "planOverrides": {}}, env={"HATP_CHAT_SECRET": "x"})
    assert (unknown.value.rule, unknown.value.path) == ("HATP-GW-65", "$.planOverrides")


def test_HATP_GW_65_a_misspelt_delivery_bound_is_refused_not_silently_the_default() -> None:
    with pytest.raises(HatpError) as unknown:
        parse_settings({"delivery": {"concurentSends": 2}})
    assert (unknown.value.rule, unknown.value.path) == ("HATP-GW-65", "$.delivery.concurentSends")
    assert "concurrentSends" in unknown.value.fix


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "8"])
def test_HATP_GW_83_concurrent_sends_is_a_positive_whole_number(bad: object) -> None:
    assert parse_settings({"delivery": {"concurrentSends": 3}}).delivery.concurrent_sends == 3
    assert parse_settings({}).delivery.concurrent_sends == 8
    with pytest.raises(HatpError) as refused:
        parse_settings({"delivery": {"concurrentSends": bad}})
    assert (refused.value.rule, refused.value.path) == ("HATP-GW-65", "$.delivery.concurrentSends")
