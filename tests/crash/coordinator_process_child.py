"""A `servers.coordinator` process that stops at a crash point, for the SIGKILL takeover tests.

`python -m tests.crash.coordinator_process_child [servers.coordinator arguments] --pause-at POINT`. It is the real
coordinator server (its own argument parsing, links, store and service) with two observation points: after each
durable write of its PostgreSQL log it prints `STEP n durable write [record events]`, and after each commit a
participant server answered (durable there, not yet recorded here: HATP-TXN-4 lets a receipt's record wait for the
next forced write) it prints `STEP n commit answered URI`, both on stderr, where the test's launcher reads them.
POINT is `write:EVENT` (the first durable write holding a record event EVENT) or `commit:N` (the N-th commit
answered). At that point it prints `PAUSED` and blocks its event loop, so the parent can SIGKILL it there, with
exactly what the point had made durable and nothing after it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Sequence
from typing import Any

from hatp_mcp.mcp.server_links import LinkedParticipant
from hatp_mcp.store.postgresql.txn_log import PostgresTxnLog
from hatp_mcp.store.txn_log import Pending
from servers.coordinator import main as coordinator_main


class CrashPoint:
    def __init__(self, spec: str) -> None:
        kind, _, arg = spec.partition(":")
        if kind not in ("write", "commit") or not arg:
            raise SystemExit(f"--pause-at write:EVENT or commit:N, not {spec!r}")
        self.kind, self.arg = kind, arg
        self.steps = 0
        self.commits = 0

    def step(self, what: str, reached: bool) -> None:
        self.steps += 1
        print(f"STEP {self.steps} {what}", file=sys.stderr, flush=True)
        if reached:
            print("PAUSED", file=sys.stderr, flush=True)
            threading.Event().wait()  # the parent kills this process here

    def written(self, batch: Sequence[Pending]) -> None:
        names = [str(e.payload.get("event")) for p in batch if p.error is None for e in p.entries if e.kind == "event"]
        self.step(f"durable write {names}", self.kind == "write" and self.arg in names)

    def committed(self, uri: str) -> None:
        self.commits += 1
        self.step(f"commit answered {uri}", self.kind == "commit" and self.commits == int(self.arg))


def install(point: CrashPoint) -> None:
    """Observe the real log's durable writes and the real links' commit answers (the classes servers.coordinator
    uses), without changing what they do."""
    write = PostgresTxnLog._write
    commit = LinkedParticipant.commit

    async def observed_write(self: PostgresTxnLog, batch: Sequence[Pending]) -> None:
        await write(self, batch)
        point.written(batch)

    async def observed_commit(self: LinkedParticipant, req: Any) -> Any:
        result = await commit(self, req)
        point.committed(self.uri)
        return result

    PostgresTxnLog._write = observed_write  # type: ignore[method-assign]
    LinkedParticipant.commit = observed_commit  # type: ignore[method-assign]


def main(argv: list[str]) -> int:
    """`--pause-at POINT` may stand anywhere among the coordinator's own arguments (launchers put theirs first)."""
    if "--pause-at" not in argv[:-1]:
        raise SystemExit("usage: coordinator_process_child [servers.coordinator arguments] --pause-at POINT")
    at = argv.index("--pause-at")
    install(CrashPoint(argv[at + 1]))
    return coordinator_main(argv[:at] + argv[at + 2 :])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
