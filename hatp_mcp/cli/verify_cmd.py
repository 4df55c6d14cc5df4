"""`hatp verify RECORD.json --keys KEYRING.json|--org DIR [--evidence FILE]... [--json] [--open]`: check a
Transaction Record offline, or a saga's journal record (`type: hatp.journal`, spec/journal.md HATP-JRN-12): chain,
signatures, closure, replay.

With `--evidence FILE` (what `hatp evidence` exports from a participant's store: the votes and receipts it signed)
it also checks the record against the parties' own copies: a record cut or rewritten before a head a party signed,
or leaving out a party's answer, is refused (spec/hatp.md HATP-REC-19..22).

With `--org DIR` (an organisation dir: `.well-known/human-card.json` and `cards/*.json`) it also checks that every
human decision in the record's approvals carries that person's own proof, against the Directory-signed cards; for
an organisation made by `hatp init-org`, without `--keys`, the keyring is built from it: its coordinator's key
(bound to its id), its participants' pinned keys and its gateway's keys from the well-known document.

With `--verify-threads N` (1 to 8; default 1) the record's signatures are verified on N threads before the checks
run, into the keyring's memo of verified signatures; the checks then verify every signature themselves, in their
order, finding those in the memo: the same problems in the same order as on one thread. Faster only where a core
is free for each further thread (cryptography verifies with the interpreter lock released).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from hatp_mcp.cli._run import EXIT_OK, EXIT_PROBLEMS, InputError, fail, print_json, read_json
from hatp_mcp.core.gateway.proof import HumanKeys
from hatp_mcp.core.journal.record import is_journal_record, verify_journal
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.core.txn.anchors import EXPORT_TYPE, Anchoring
from hatp_mcp.core.txn.record import Verified, check_record, signatures_ahead
from hatp_mcp.errors import HatpError

MAX_VERIFY_THREADS = 8


def _threads(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        n = 0
    if not 1 <= n <= MAX_VERIFY_THREADS:
        raise argparse.ArgumentTypeError(f"must be a whole number from 1 to {MAX_VERIFY_THREADS}, not {text!r}")
    return n


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("record", help="the record JSON file")
    p.add_argument(
        "--keys",
        help="keyring JSON (a JWKS whose keys list their roles); with --org and no --keys, the organisation's own: "
        "its coordinator's key, its participants' pinned keys and its gateway's",
    )
    p.add_argument("--json", action="store_true", help="print {ok, problems} as JSON")
    p.add_argument("--open", action="store_true", help="accept a record that is not closed yet (in progress)")
    p.add_argument(
        "--evidence",
        metavar="FILE",
        action="append",
        default=[],
        help="votes and receipts a party kept (hatp evidence's export, a list, or one object); repeatable",
    )
    p.add_argument(
        "--verify-threads",
        metavar="N",
        type=_threads,
        default=1,
        help=f"verify the signatures on N threads ahead of the checks (1 to {MAX_VERIFY_THREADS}; default 1); the "
        "checks and their problems are the same",
    )
    p.add_argument(
        "--org",
        metavar="DIR",
        help="organisation dir (.well-known/human-card.json, cards/*.json): also check the humans' own proofs",
    )


def _humans(org: str) -> HumanKeys:
    """The human keys on an organisation's Directory-signed cards. Raises InputError."""
    from hatp_mcp.runtime.org import load_human_keys  # --org only: the organisation's files and cards

    try:
        return load_human_keys(org)
    except HatpError as exc:
        raise InputError(f"{org}: {exc.rule}: {exc.reason}") from exc
    except (OSError, ValueError) as exc:
        raise InputError(f"{org}: {exc}") from exc


def _outside(paths: list[str]) -> list[Any]:
    """The pieces of outside evidence in the `--evidence` files, in order. Raises InputError."""
    out: list[Any] = []
    for path in paths:
        doc = read_json(path)
        if isinstance(doc, dict) and doc.get("type") == EXPORT_TYPE and isinstance(doc.get("evidence"), list):
            out.extend(doc["evidence"])
        elif isinstance(doc, list):
            out.extend(doc)
        elif isinstance(doc, dict) and doc.get("type") in ("hatp.vote", "hatp.receipt"):
            out.append(doc)
        else:
            raise InputError(
                f"{path}: outside evidence is `hatp evidence`'s export ({EXPORT_TYPE}), a list of signed votes "
                "and receipts, or one of them"
            )
    return out


def _keyring(args: argparse.Namespace) -> Keyring:
    """`--keys`, else the organisation's own keyring (`--org`, org_layout.org_keyring). Raises InputError."""
    if args.keys is None:
        if args.org is None:
            raise InputError("give the keyring (--keys FILE) or the organisation that made the record (--org DIR)")
        from hatp_mcp.cli.org_layout import org_keyring  # --org only: the organisation's key and pin files

        try:
            return org_keyring(Path(args.org))
        except HatpError as exc:
            raise InputError(f"{args.org}: {exc.reason}; or give the keyring with --keys FILE") from exc
        except (OSError, ValueError) as exc:
            raise InputError(f"{args.org}: cannot build its keyring: {exc}") from exc
    ring_doc = read_json(args.keys)
    if not isinstance(ring_doc, dict):
        raise InputError(f"{args.keys}: a keyring is a JSON object with a 'keys' array")
    try:
        return Keyring.from_jwks(ring_doc)
    except ValueError as exc:
        raise InputError(f"{args.keys}: {exc}") from exc


def run(args: argparse.Namespace) -> int:
    try:
        ring = _keyring(args)
        record = read_json(args.record)
        outside = _outside(args.evidence)
    except InputError as exc:
        return fail(str(exc))
    if not isinstance(record, dict):
        return fail(f"{args.record}: a record is a JSON object")
    if is_journal_record(record):
        if outside:  # never silently ignored: a check asked for and not made would read as passed
            return fail(
                f"{args.record}: --evidence checks a Transaction Record against its parties' answers; this is "
                "a saga's journal record, which has none"
            )
        return _journal(record, ring, args)
    try:
        humans = _humans(args.org) if args.org else None
    except InputError as exc:
        return fail(str(exc))
    ring = checking_keyring(ring, args.verify_threads)
    verify_ahead(record, ring, args.verify_threads)
    found = check_record(record, ring, require_closed=not args.open, humans=humans, evidence=outside)
    problems = found.problems
    proofs = _proofs(found, humans is not None)
    anchoring = found.anchoring
    if args.json:
        print_json(
            {
                "ok": not problems,
                "problems": [p.to_dict() for p in problems],
                "outcome": found.outcome,
                "grounds": list(found.grounds),
                "humanDecisions": found.human_decisions,
                "humanProofs": proofs,
                "anchoring": anchoring.status.value if anchoring is not None else "none",
                "anchors": _anchors(anchoring),
            }
        )
    elif problems:
        for p in problems:
            where = "record" if p.index < 0 else f"event {p.index}"
            print(f"✗ {p.rule}  {where}  {p.reason}")
    else:
        n = len(record.get("events", []))
        print(f"✓ record {record.get('txnId')} holds: {n} events, chain and signatures verified")
        if found.outcome is None:
            print("  the record is open: it has no outcome yet, so none was checked")
        else:
            print(f"  outcome {found.outcome} is justified by the record: " + "; ".join(found.grounds))
        print(f"  {_proofs_line(found, proofs)}")
        if anchoring is not None:
            print(f"  {anchoring.summary()}")
    return EXIT_PROBLEMS if problems else EXIT_OK


def checking_keyring(ring: Keyring, threads: int) -> Keyring:
    """The keyring a record is checked against: `ring`'s keys, remembering the signatures that verified only where
    threads verify them ahead (the checks then meet each again); on one thread check_record meets each signature in
    the record once, so a memo would be written and never read."""
    return Keyring(ring.entries(), remember=threads > 1)


def verify_ahead(record: dict[str, Any], ring: Keyring, threads: int, pool: ThreadPoolExecutor | None = None) -> int:
    """With `threads` > 1: verify the record's signatures on that many threads (this one and `threads` - 1 of
    `pool`'s, or of a pool made here), each a stride of them, into `ring`'s memo; the ones that verify are then
    found there by check_record, which still verifies and refuses every signature itself. Returns how many
    verified ahead (0 on one thread: nothing is done)."""
    if threads <= 1:
        return 0
    triples = signatures_ahead(record, ring)
    if pool is None:
        with ThreadPoolExecutor(max_workers=threads - 1, thread_name_prefix="hatp-verify") as own:
            return _verify_strides(ring, triples, threads, own)
    return _verify_strides(ring, triples, threads, pool)


def _verify_strides(
    ring: Keyring, triples: Sequence[tuple[PublicKeyEntry, bytes, bytes]], threads: int, pool: ThreadPoolExecutor
) -> int:
    jobs = [pool.submit(_verify_all, ring, triples[k::threads]) for k in range(1, threads)]
    done = _verify_all(ring, triples[0::threads])
    return done + sum(job.result() for job in jobs)


def _verify_all(ring: Keyring, triples: Sequence[tuple[PublicKeyEntry, bytes, bytes]]) -> int:
    return sum(ring.verify_ahead(entry, sig, message) for entry, sig, message in triples)


def _anchors(anchoring: Anchoring | None) -> dict[str, Any]:
    """HATP-REC-22: the counts behind `anchoring`, so `checked` is never a check of nothing."""
    if anchoring is None:
        return {"insideHeads": 0, "outside": 0, "outsideHeads": 0, "pinnedTo": None, "beyond": 0, "unrecorded": 0}
    return {
        "insideHeads": anchoring.inside_heads,
        "outside": anchoring.outside,
        "outsideHeads": anchoring.outside_heads,
        "pinnedTo": anchoring.pinned_to,
        "beyond": anchoring.beyond,
        "unrecorded": anchoring.unrecorded,
    }


def _proofs(found: Verified, checked: bool) -> str:
    """HATP-REC-18: `none` when there is nothing to check; never `checked` for a check that checked nothing."""
    if found.human_decisions == 0:
        return "none"
    return "checked" if checked else "not-checked"


def _proofs_line(found: Verified, proofs: str) -> str:
    if proofs == "none":
        return "no human decisions in this record"
    if proofs == "not-checked":
        return (
            f"{found.human_decisions} human decision(s): their own proofs were not checked "
            "(pass --org DIR to check them against the cards)"
        )
    return f"{found.human_decisions} human decision(s), each carrying its person's valid proof"


def _journal(record: dict[str, Any], ring: Keyring, args: argparse.Namespace) -> int:
    problems = verify_journal(record, ring, require_closed=not args.open)
    if args.json:
        print_json({"ok": not problems, "problems": [p.to_dict() for p in problems]})
    elif problems:
        for p in problems:
            where = "record" if p.index < 0 else f"event {p.index}"
            print(f"✗ {p.rule}  {where}  {p.reason}")
    else:
        events = record.get("events", [])
        last = events[-1]
        status = last["body"]["status"] if last.get("event") == "saga.closed" else "still running"
        print(f"✓ journal record {record.get('sagaId')} holds: {len(events)} events, {status}; chain, signatures and")
        print("  replay through the saga machine verified")
    return EXIT_PROBLEMS if problems else EXIT_OK
