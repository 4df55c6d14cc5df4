"""`hatp inbox`: lists pending asks, shows the screen, records decisions and answers, refuses what does not fit."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from hatp_mcp.core.gateway.asks import open_question
from hatp_mcp.core.gateway.machine import open_approval
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover
from hatp_mcp.store.gateway_store import SqliteGatewayStore, StoredAsk
from hatp_mcp.store.url import StoreUrl, open_gateway_store
from tests.acme_org import GATEWAY_ID, ORG_DIR, directory, gateway_key, h, plan

NOW = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
SCHEMA = {"type": "object", "properties": {"costCenter": {"type": "string"}}, "required": ["costCenter"]}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    store = SqliteGatewayStore(tmp_path)
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


KEYS = ORG_DIR / "test-only-keys" / "humans"


def inbox(data: Path, *args: str) -> int:
    return main(["inbox", "--data", str(data), "--now", "2026-11-29T10:05:00Z", *args])


def as_(name: str, key: str | None = None) -> list[str]:
    return ["--as", h(name), "--key", str(KEYS / f"{key or name}.private.jwk.json")]


def gateway(data: Path) -> GatewayApprover:
    return GatewayApprover(
        directory=directory(),
        key=gateway_key(),
        store=SqliteGatewayStore(data),
        clock=FakeClock(datetime(2026, 11, 29, 10, 6, tzinfo=UTC)),
    )


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


@pytest.mark.anyio
async def test_a_form_answer_is_checked_against_its_schema_under_HATP_ASK_3(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox(data, "answer", "q-form", "{}", *as_("carol")) == 1
    assert "HATP-ASK-3" in capsys.readouterr().err
    assert inbox(data, "answer", "q-form", "not json", *as_("carol")) == 2
    assert inbox(data, "answer", "q-form", '{"costCenter": "CC-1"}', *as_("carol")) == 0
    assert "left for the gateway" in capsys.readouterr().out
    gw = gateway(data)
    done = await gw.current("q-form")
    assert done.state == "answered" and done.evidence is not None and done.evidence["value"] == {"costCenter": "CC-1"}
    gw.store.close()


@pytest.mark.anyio
async def test_approve_and_reject_are_signed_left_in_the_store_and_count_once_the_gateway_verifies_them(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox(data, "approve", "txn-acme-0001/finance", *as_("bob")) == 0
    assert inbox(data, "reject", "txn-acme-0001/finance", *as_("frank")) == 0
    store = SqliteGatewayStore(data)
    assert store.get("txn-acme-0001/finance").state == "pending"  # type: ignore[union-attr]
    assert [p.status for p in store.proofs("txn-acme-0001/finance")] == ["submitted", "submitted"]
    store.close()
    gw = gateway(data)
    done = await gw.current("txn-acme-0001/finance")
    assert done.state == "rejected" and done.evidence is not None
    assert [(d["approver"], d["proof"]["decision"]) for d in done.evidence["decisions"]] == [
        (h("bob"), "approve"),
        (h("frank"), "reject"),
    ]
    gw.store.close()
    capsys.readouterr()
    assert inbox(data, "show", "txn-acme-0001/finance") == 0
    assert f"proof accepted  {h('bob')} approve" in capsys.readouterr().out


@pytest.mark.anyio
async def test_a_proof_signed_with_someone_elses_key_is_refused_by_the_gateway_under_HATP_GW_20(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox(data, "approve", "txn-acme-0001/finance", *as_("bob", key="carol")) == 0
    gw = gateway(data)
    after = await gw.current("txn-acme-0001/finance")
    assert after.record is not None and after.record.decisions == []
    assert [(p.status, p.rule) for p in gw.store.proofs("txn-acme-0001/finance")] == [("refused", "HATP-GW-20")]
    gw.store.close()
    assert inbox(data, "show", "txn-acme-0001/finance") == 0
    assert "proof refused" in capsys.readouterr().out


def test_the_inbox_refuses_at_once_what_the_ask_would_refuse(data: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert inbox(data, "approve", "txn-acme-0001/finance", *as_("dana")) == 1
    assert "HATP-GW-5" in capsys.readouterr().err
    assert inbox(data, "approve", "txn-acme-0001/finance", *as_("bob")) == 0
    assert inbox(data, "approve", "txn-acme-0001/finance", *as_("bob")) == 1  # bob's first proof is waiting
    assert "HATP-GW-6" in capsys.readouterr().err


def test_deciding_needs_a_readable_key(data: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert inbox(data, "approve", "txn-acme-0001/finance", "--as", h("bob"), "--key", str(tmp_path / "none")) == 2
    assert "--key" in capsys.readouterr().err


def test_an_unknown_ask_exits_2(data: Path) -> None:
    assert inbox(data, "show", "nope") == 2


@pytest.mark.anyio
async def test_the_inbox_on_a_postgresql_store_leaves_a_decision_the_gateway_on_that_store_counts(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    url = StoreUrl("postgresql", pg_url)
    store = open_gateway_store(url)
    rec = open_approval(plan(), "finance", directory(), gateway=GATEWAY_ID, now=NOW)
    store.create(StoredAsk(rec.ask.ask_id, rec.state, rec, None, None))
    store.close()
    at = ["--now", "2026-11-29T10:05:00Z"]
    assert main(["inbox", "--store", pg_url, *at, "list", "--as", h("bob")]) == 0
    assert "txn-acme-0001/finance" in capsys.readouterr().out
    assert main(["inbox", "--store", pg_url, *at, "approve", "txn-acme-0001/finance", *as_("bob")]) == 0
    gw = GatewayApprover(
        directory=directory(),
        key=gateway_key(),
        store=open_gateway_store(url),
        clock=FakeClock(datetime(2026, 11, 29, 10, 6, tzinfo=UTC)),
    )
    await gw.current("txn-acme-0001/finance")
    assert [p.status for p in gw.store.proofs("txn-acme-0001/finance")] == ["accepted"]
    gw.store.close()
    assert main(["inbox", "--store", "postgresql://hatp@127.0.0.1:9/none", "list"]) == 2
    assert "no connection within" in capsys.readouterr().err


def test_HATP_GW_92_list_and_show_name_people_by_their_cards_and_times_in_local_and_utc_with_in_n_min(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    org = ["--org", str(ORG_DIR), "--tz", "Europe/Berlin"]
    assert main(["inbox", "--data", str(data), "--now", "2026-11-29T10:05:00Z", *org, "list"]) == 0
    listed = capsys.readouterr().out
    assert main(["inbox", "--data", str(data), "--now", "2026-11-29T10:05:00Z", *org, "show", "q-form"]) == 0
    shown = capsys.readouterr().out
    assert (
        main(["inbox", "--data", str(data), "--now", "2026-11-29T10:05:00Z", *org, "show", "txn-acme-0001/finance"])
        == 0
    )
    screen = capsys.readouterr().out
    deadline = "2026-11-29 15:00 CET / 2026-11-29 14:00 UTC (in 3 h 55 min)"  # the ask's 14:00Z, seen at 10:05Z
    assert f"decide by {deadline}" in listed and "waiting for Bob Brown (human://acme.com/bob)" in listed
    assert "2026-11-29T14:00:00Z" not in listed + screen  # no raw wire timestamp
    assert f"decide by {deadline}" in screen and "requested by Dana Diaz (human://acme.com/dana)" in screen
    assert "excluded  Dana Diaz (human://acme.com/dana)  HATP-GW-5" in screen
    assert "asked     Carol Chen (human://acme.com/carol)" in shown


def test_HATP_GW_92_without_the_organisation_the_terminal_inbox_names_people_by_address(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert inbox(data, "--tz", "UTC", "list") == 0  # (no org: the data dir is not an organisation's)
    out = capsys.readouterr().out
    assert "decide by 2026-11-29 14:00 UTC (in 3 h 55 min)" in out and "human://acme.com/bob" in out
    assert inbox(data, "--tz", "Mars/Olympus", "list") == 2


def test_HATP_GW_97_the_terminal_inbox_s_refusals_name_people_by_their_cards_and_times_in_words(
    data: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    org = ["--data", str(data), "--org", str(ORG_DIR)]
    late = main(["inbox", *org, "--now", "2026-11-29T14:05:00Z", "approve", "txn-acme-0001/finance", *as_("bob")])
    too_late = capsys.readouterr().err
    assert main(["inbox", *org, "--now", "2026-11-29T10:05:00Z", "approve", "txn-acme-0001/finance", *as_("bob")]) == 0
    capsys.readouterr()
    again = main(["inbox", *org, "--now", "2026-11-29T10:06:00Z", "approve", "txn-acme-0001/finance", *as_("bob")])
    twice = capsys.readouterr().err
    assert (late, again) == (1, 1)
    assert (
        "HATP-GW-12 at $.decideBy: Bob Brown (human://acme.com/bob) decided at 2026-11-29 14:05 UTC, after the signed"
        " deadline 2026-11-29 14:00 UTC (5 min ago)" in too_late
    )
    assert "HATP-GW-6 at $.decisions: Bob Brown (human://acme.com/bob) already decided this ask" in twice
