"""Two `servers.gateway` processes on one store, started at once on a pinned clock past a person's SLA (issues #15,
#17): on one SQLite gateway.db (one machine, one data dir) and on one PostgreSQL database (each process its own
data dir, as on two machines). Exactly one of them escalates frank's missed SLA (one timer step, one owner), carol
is told exactly once over her chat webhook, and the outbox logs her ask once (spec/gateway.md HATP-GW-76..79).

The ask is opened in the store by an in-process gateway at 10:00; both processes run `--now 12:01` (frank's SLA
ran out at 12:00). A gateway process is ready only once its first timer round and first delivery step are done, so
once both are ready each has had its go at the same due timer and the same notice."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import ExitStack
from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from hatp_mcp.mcp.launch import HttpProcess, launch_http
from hatp_mcp.runtime.clock import FakeClock
from hatp_mcp.runtime.gateway.driver import GatewayApprover, RecordingNotifier
from hatp_mcp.store.url import StoreUrl, open_delivery_queue, open_gateway_store
from tests.acme_org import ORG_DIR, agent_keys, directory, gateway_key, h, plan
from tests.postgres_cluster import Cluster
from tests.runtime.gateway.delivery.receivers import Hook, webhook_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.anyio]

FRANK = "human://acme.com/frank"  # SLA 2 h (due 12:00), then his delegate carol (chat)
ASK = "txn-two-gw-1/finance"
OPENED = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
PAST_SLA = "2026-11-29T12:01:00Z"


@pytest.fixture
def hooks() -> Iterator[dict[str, Hook]]:
    with ExitStack() as stack:
        yield {kind: stack.enter_context(webhook_receiver(f"{kind}-secret")) for kind in ("sms", "chat")}


def org_with_webhooks(tmp: Path, hooks: dict[str, Hook]) -> Path:
    org = tmp / "org"
    shutil.copytree(ORG_DIR, org)
    settings = {
        "inboxUrl": "http://localhost:8400",
        "channels": {
            "chat": {"url": hooks["chat"].url, "secret": {"env": "HATP_TEST_CHAT_SECRET"}},
            "sms": {"url": hooks["sms"].url, "secret": {"env": "HATP_TEST_SMS_SECRET"}, "from": "+15550100"},
        },
    }
    (org / "gateway.json").write_text(json.dumps(settings))
    return org


async def open_ask(url: StoreUrl) -> None:
    """The ask, opened at 10:00 by a gateway that then stopped (its notice to frank left to the inbox)."""
    store = open_gateway_store(url)
    try:
        gw = GatewayApprover(
            directory=directory(),
            key=gateway_key(),
            store=store,
            clock=FakeClock(OPENED),
            notifier=RecordingNotifier(),
            agents=agent_keys(),
            owner="opener",
        )
        await gw.ask(plan(address=FRANK, txn_id=ASK.split("/")[0]), "finance")
    finally:
        store.close()


async def two_gateways_at_once(org: Path, datas: list[Path], store: list[str]) -> list[list[str]]:
    """Start both gateway processes at once, wait until both are ready (their first rounds done), stop them;
    returns each one's stderr lines."""
    env = {**os.environ, "HATP_TEST_CHAT_SECRET": "chat-secret", "HATP_TEST_SMS_SECRET": "sms-secret"}
    ready = [anyio.Event(), anyio.Event()]
    stop = anyio.Event()
    procs: list[HttpProcess | None] = [None, None]

    async def one(i: int) -> None:
        extra = ["--org", str(org), "--now", PAST_SLA, "--owner", f"gw-{i + 1}", *store]
        async with launch_http("servers.gateway", datas[i], extra=extra, env=env, ready_timeout=60) as proc:
            procs[i] = proc
            ready[i].set()
            await stop.wait()

    with anyio.fail_after(120):
        async with anyio.create_task_group() as tg:
            tg.start_soon(one, 0)
            tg.start_soon(one, 1)
            await ready[0].wait()
            await ready[1].wait()
            stop.set()
    return [p.lines if p is not None else [] for p in procs]


def check_once(url: StoreUrl, hooks: dict[str, Hook], logs: list[list[str]]) -> None:
    store, queue = open_gateway_store(url), open_delivery_queue(url)
    try:
        stored = store.get(ASK)
        steps = store.timer_steps(ASK)
        told = [(r, k) for a, k, r, _m in store.sent() if a == ASK and k == "ask"]
        rows = {d.notice.key: d for d in queue.all()}
    finally:
        store.close()
        queue.close()
    assert stored is not None and stored.record is not None
    assert [(s.human, s.status) for s in stored.record.seats] == [(FRANK, "excluded"), (h("carol"), "asked")]
    assert len(steps) == 1 and steps[0].timer == f"sla {FRANK}" and steps[0].owner in ("gw-1", "gw-2")
    assert told == [(FRANK, "ask"), (h("carol"), "ask")]  # frank at routing; carol once, by the escalating process
    carol = f"{ASK}|{h('carol')}|ask"
    assert hooks["chat"].keys == [carol] and hooks["sms"].keys == []  # one delivery, nothing else pushed
    assert rows[carol].state == "sent" and rows[carol].sent_via == "chat"
    for i, lines in enumerate(logs):
        assert any(f"owned as 'gw-{i + 1}'" in line for line in lines), lines


async def test_HATP_GW_76_HATP_GW_78_two_gateway_processes_on_one_sqlite_file_escalate_and_notify_once(
    tmp_path: Path, hooks: dict[str, Hook]
) -> None:
    org, data = org_with_webhooks(tmp_path, hooks), tmp_path / "data"
    data.mkdir()
    url = StoreUrl.sqlite(data / "gateway.db")
    await open_ask(url)
    logs = await two_gateways_at_once(org, [data, data], [])
    check_once(url, hooks, logs)


async def test_HATP_GW_76_HATP_GW_78_two_gateway_processes_on_one_postgresql_escalate_and_notify_once(
    tmp_path: Path, hooks: dict[str, Hook], postgres: Cluster
) -> None:
    org, database = org_with_webhooks(tmp_path, hooks), postgres.new_database()
    url = StoreUrl("postgresql", database)
    await open_ask(url)
    logs = await two_gateways_at_once(org, [tmp_path / "machine-1", tmp_path / "machine-2"], ["--store", database])
    check_once(url, hooks, logs)
