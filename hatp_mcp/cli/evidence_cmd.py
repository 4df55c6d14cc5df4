"""`hatp evidence --store URL --txn ID`: export the votes and receipts a participant kept for one transaction, as
it signed them, so anyone can check the coordinator's record against them (`hatp verify --evidence FILE`,
spec/hatp.md HATP-REC-21). Reads the participant's store (`sqlite:DATA/state.db` or a PostgreSQL URL); writes
nothing.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from hatp_mcp.cli._run import EXIT_OK, fail, print_json
from hatp_mcp.core.txn.anchors import EXPORT_TYPE
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.participant.driver import kept_evidence
from hatp_mcp.store.url import StoreUrl, open_participant_store


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--store", required=True, help="the participant's state: sqlite:PATH (DATA/state.db) or a URL")
    p.add_argument("--txn", required=True, help="the transaction id")


def run(args: argparse.Namespace) -> int:
    try:
        url = StoreUrl.parse(args.store)
        if url.backend == "sqlite" and not Path(url.target).is_file():  # never create an empty store
            return fail(f"{args.store}: no such participant store")
        store = open_participant_store(url)
    except (HatpError, OSError, ValueError) as exc:
        return fail(f"{args.store}: {exc}")
    try:
        evidence = kept_evidence(store, args.txn)
    finally:
        store.close()
    print_json({"type": EXPORT_TYPE, "txnId": args.txn, "evidence": evidence})
    return EXIT_OK
