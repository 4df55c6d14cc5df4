"""The child process of the journal's crash tests: runs (or recovers) the return of item #882 with a durable
journal (SQLite under WORKDIR, or the store URL in WORKDIR/store.url: PostgreSQL) and a durable shop (an fsynced
effects file).

`python tests/crash/journal_child.py WORKDIR run|recover [PAUSE_AT]`. It counts steps: each durable journal
append, and each shop effect (durable at the shop, not yet in the journal: the call went out, its result is not
written). After each it prints `STEP n what`; at step PAUSE_AT it prints `PAUSED` and stops there, so the parent
can SIGKILL it at exactly that point. `run` marks the item returned, refunds it, fails to print the label and
rolls back; `recover` opens the journal on the same store, which recovers what the killed run left (HATP-JRN-10).
It prints `DONE <status>`, writes record.json and keyring.json, then `STEPS n`.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import anyio

from hatp_mcp.core.signing.keys import Keyring, SigningKey
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.journal.driver import Journal, SagaError
from hatp_mcp.store.journal_store import JournalStore
from hatp_mcp.store.url import StoreUrl, open_journal_store
from tests.journal_shop import Shop

SAGA = "saga-crash-882"  # or the id in WORKDIR/saga.id (runs sharing one PostgreSQL database)


def key(workdir: Path) -> SigningKey:
    path = workdir / "journal.jwk.json"
    if not path.exists():
        path.write_text(json.dumps(SigningKey.generate(["journal"], kid="journal-crash").private_jwk()))
    return SigningKey.from_jwk(json.loads(path.read_text()))


async def main(workdir: Path, mode: str, pause_at: int) -> int:
    steps = 0

    def step(what: str) -> None:
        nonlocal steps
        steps += 1
        print(f"STEP {steps} {what}", flush=True)
        if steps == pause_at:
            print("PAUSED", flush=True)
            threading.Event().wait()  # the parent kills us here, with what the step did on disk

    named = workdir / "store.url"
    url = StoreUrl.parse(named.read_text().strip()) if named.exists() else StoreUrl.sqlite(workdir / "journal.db")
    async with open_journal_store(url, on_durable=lambda n: step(f"journal append {n}")) as store:
        await saga_882(workdir, mode, store, step)
    print(f"STEPS {steps}", flush=True)
    return 0


async def saga_882(workdir: Path, mode: str, store: JournalStore, step: Callable[[str], None]) -> None:
    named = workdir / "saga.id"
    saga_id = named.read_text().strip() if named.exists() else SAGA
    shop = Shop(workdir / "effects.log", on_effect=lambda what: step(f"shop did {what}"))
    tools = shop.tools()
    journal = Journal(store, key(workdir), tools=tools.values(), clock=SystemClock())
    async with journal:
        if mode == "run":
            try:
                async with journal.saga("return-882", saga_id) as saga:
                    await saga.run(tools["mark_returned"], {"item": "882"})
                    await saga.run(tools["refund"], {"item": "882", "usd": "40.00"})
                    await saga.run(tools["label"], {"item": "882"})
            except SagaError as exc:
                print(f"DONE {exc.status.value}", flush=True)
        else:
            for recovered, status in journal.recovered.items():
                print(f"DONE {status.value} {recovered}", flush=True)
        record = await journal.record(saga_id)
    (workdir / "record.json").write_text(json.dumps(record))
    ring = Keyring()
    ring.add_signer(key(workdir))
    (workdir / "keyring.json").write_text(json.dumps(ring.to_jwks()))


if __name__ == "__main__":
    pause = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    sys.exit(anyio.run(main, Path(sys.argv[1]), sys.argv[2], pause))
