"""`hatp inbox`: lists pending asks, shows the screen, records decisions and answers, refuses what does not fit."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from hatp_mcp.core.asks import open_question
from hatp_mcp.core.gateway import open_approval
from hatp_mcp.store.gateway_store import GatewayStore, StoredAsk
from tests.acme_org import GATEWAY_ID, directory, h, plan

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
SCHEMA = {"type": "object", "properties": {"costCenter": {"type": "string"}}, "required": ["costCenter"]}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    store = GatewayStore(tmp_path)
    rec = open_approval(plan(), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    store.create(StoredAsk(rec.ask.ask_id, rec.state, rec, None, None))
    form = open_question(
        ask_id="q-form",
        kind="form",
        address=h("carol"),
        question="Cost center?",
        directory=directory(),
        gateway=GATEWAY_ID,
        now=NOW,
        form_schema=SCHEMA,
    )
    store.create(StoredAsk("q-form", form.state, form, None, None))
    store.close()
    return tmp_path


def inbox(data: Path, *args: str) -> int:
    return main(["inbox", "--data", str(data), "--now", "2026-11-29T10:05:00Z", *args])


def test_list_shows_pending_asks_for_a_person(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert inbox(data, "list", "--as", h("carol")) == 0
    out = capsys.readouterr().out
    assert "txn-acme-0001/finance" in out and "q-form" in out
    assert inbox(data, "list", "--as", h("erin")) == 0
    assert "no pending asks" in capsys.readouterr().out


def test_show_prints_the_screen_with_agent_text_labelled(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert inbox(data, "show", "txn-acme-0001/finance") == 0
    out = capsys.readouterr().out
    assert "total: $25,000.00" in out and "[agent-written] Pay the offsite venue" in out
    assert "excluded  human://acme.com/dana  HATP-GW-5" in out


def test_a_form_answer_is_checked_against_its_schema_under_HATP_ASK_3(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox(data, "answer", "q-form", "{}", "--as", h("carol")) == 1
    assert "HATP-ASK-3" in capsys.readouterr().err
    assert inbox(data, "answer", "q-form", "not json", "--as", h("carol")) == 2
    assert inbox(data, "answer", "q-form", '{"costCenter": "CC-1"}', "--as", h("carol")) == 0
    assert "the ask is answered" in capsys.readouterr().out


def test_approve_and_reject_record_the_decision(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert inbox(data, "approve", "txn-acme-0001/finance", "--as", h("bob")) == 0
    assert inbox(data, "reject", "txn-acme-0001/finance", "--as", h("frank")) == 0
    assert "the ask is rejected" in capsys.readouterr().out


def test_an_unknown_ask_exits_2(data: Path) -> None:
    assert inbox(data, "show", "nope") == 2
