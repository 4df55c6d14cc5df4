"""A receiver's trusted coordinators, and a coordinator's signing of its requests (spec/mcp-binding.md
HATP-TRUST-1..12).

Receiver side: `TrustedCoordinators.admit(method, params)` proves a state-changing request came from a
coordinator of the operator-pinned trust list (hatp_mcp/core/participant/coordinator_auth.py), and keeps the
transaction bound to that coordinator and plan (hatp_mcp/store/txn_bindings.py). It is called before the
participant or the gateway reads or writes anything, so a refused request changes nothing (HATP-TRUST-8).
`load_trust_list` reads the trust list file (`--trusted-coordinators FILE`, default `DATA/trusted-coordinators.json`).

Coordinator side: `RequestSigner.sign(method, params)` returns the params with a fresh `auth`, signed at send time,
so every attempt (a retry, a replacement coordinator) is proven anew.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any

from hatp_mcp.core.participant.coordinator_auth import (
    Admitted,
    Binding,
    authorize,
    check_auth,
    check_binding,
    check_decision,
    check_epoch,
)
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry, SigningKey
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.store.files import load_or_create_key, read_json_file, replace_file
from hatp_mcp.store.txn_bindings import MemoryTxnBindings, SqliteTxnBindings, TxnBindings

__all__ = [
    "TRUST_FILE",
    "RequestSigner",
    "TrustedCoordinators",
    "load_trust_list",
    "open_trust",
    "trust_coordinator",
    "trust_list_jwks",
    "write_trust_list",
]

TRUST_FILE = "trusted-coordinators.json"  # under a receiver's --data, when no --trusted-coordinators is given


def load_trust_list(path: Path, coordinator: str | None = None) -> Keyring:
    """HATP-TRUST-10: the coordinators' public keys in `path` (a JWKS or one JWK). Every key must carry the role
    `coordinator` and the `party` (coordinator id) it speaks for; `coordinator` binds keys that name none.

    Raises ValueError naming the key that is wrong, OSError for IO."""
    doc: Any = read_json_file(path)
    jwks = doc if isinstance(doc, dict) and "keys" in doc else {"keys": [doc]}
    ring = Keyring.from_jwks(jwks)
    out = Keyring()
    for entry in ring.entries():
        if coordinator is not None:
            entry = entry.with_party(coordinator)
        if "coordinator" not in entry.roles:
            raise ValueError(f"{path}: key {entry.kid!r} lacks the role 'coordinator'")
        if entry.party is None:
            raise ValueError(
                f"{path}: key {entry.kid!r} names no 'party' (the coordinator id it speaks for); a trusted "
                "coordinator key must be bound to one coordinator (HATP-TRUST-5)"
            )
        out.add(entry)
    if len(out) == 0:
        raise ValueError(f"{path}: no keys")
    return out


def trust_list_jwks(coordinators: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """The trust list file's content: each coordinator id's public JWK, bound to that id (role coordinator)."""
    keys = []
    for party, jwk in coordinators.items():
        entry = PublicKeyEntry.from_jwk(dict(jwk)).with_party(party)
        if "coordinator" not in entry.roles:
            raise ValueError(f"the key of {party} lacks the role 'coordinator'")
        keys.append(entry.jwk())
    return {"keys": keys}


def trust_coordinator(coordinator_data: Path, coordinator: str, receivers: Iterable[Path]) -> SigningKey:
    """Set up a coordinator before anything starts: its key under `coordinator_data` (created if absent, as the
    coordinator server would on its first start), trusted as `coordinator` by every receiver's --data
    (`DATA/trusted-coordinators.json`). Returns the key. Raises OSError or ValueError."""
    key = load_or_create_key(coordinator_data, ["coordinator"])
    for data in receivers:
        write_trust_list(data, {coordinator: key.public_jwk()})
    return key


def write_trust_list(data: Path, coordinators: Mapping[str, Mapping[str, Any]]) -> Path:
    """Write `DATA/trusted-coordinators.json` (in one step) for a receiver started on `data`. Raises OSError."""
    data.mkdir(parents=True, exist_ok=True)
    path = data / TRUST_FILE
    replace_file(path, json.dumps(trust_list_jwks(coordinators)))
    return path


class TrustedCoordinators:
    """The receiver's check (HATP-TRUST-1..9). `keyring` None or empty: no coordinator is trusted (fail closed)."""

    def __init__(
        self,
        keyring: Keyring | None,
        clock: Clock,
        bindings: TxnBindings | None = None,
        *,
        where: str = f"DATA/{TRUST_FILE}",
    ) -> None:
        self.keyring = keyring if keyring is not None and len(keyring) else None
        self._clock = clock
        self.bindings: TxnBindings = bindings if bindings is not None else MemoryTxnBindings()
        self._where = where

    def admit(self, method: str, params: Mapping[str, Any], *, bind: bool = True) -> Admitted:
        """Prove `params` (as received) are a `method` request of a trusted coordinator, and bind its txnId.

        `bind=False`: check only (a prepare whose plan is not the one its digest names, which the receiver then
        refuses, binds nothing). Nothing is written unless every check passed (the epoch kept is only ever raised,
        by a request that passed every other check). With bindings that defer their writes (a participant's, kept
        with its state) the binding and epoch are visible to every later request at once and durable by `settle`,
        which the caller runs before it answers. Raises HatpError HATP-TRUST-1..7, 9 (STALE_COORDINATOR)."""
        try:
            admitted = check_auth(method, params, self.keyring, self._clock.now())
        except HatpError as exc:
            if exc.rule == "HATP-TRUST-6":
                raise HatpError(exc.rule, exc.reason, path=exc.path, code=exc.code, fix=_fix(self._where)) from exc
            raise
        if self.keyring is None:
            raise BrokenInvariant("check_auth passed a request without a keyring (it refuses one)")
        if method == "commit":
            check_decision(params, admitted, self.keyring)
        held = self.bindings.get(admitted.txn_id)
        if held is None and bind:  # the first request here for this txnId binds it (one durable insert-if-absent)
            held = self.bindings.bind(Binding(admitted.txn_id, admitted.coordinator, admitted.plan_digest))
        check_binding(admitted, held)  # bound to another coordinator or plan, perhaps by a racing first request
        if held is not None:  # fencing (HATP-TRUST-9): the highest epoch kept beside the binding, raised in one step
            check_epoch(admitted, self.bindings.advance(admitted.txn_id, admitted.epoch))
        return admitted

    def settle(self, admitted: Admitted) -> None:
        """Before the answer to an admitted request leaves: its txnId's binding and epoch are durable. Bindings kept
        with a participant's state (deferred) are usually written already, by the transaction that kept the
        request's state; else here, alone. Raises what the store raises (sqlite3.Error, HatpError HATP-TRUST-5)."""
        self.bindings.settle(admitted.txn_id)


def _fix(where: str) -> str:
    return (
        "restart the server with --trusted-coordinators FILE (a JWKS of the coordinators' public keys, each with "
        f"role 'coordinator' and the 'party' id it speaks for), or put that file at {where}"
    )


class RequestSigner:
    """The coordinator's side (HATP-TRUST-11): a fresh auth for each request it sends."""

    def __init__(
        self, key: SigningKey, coordinator: str, clock: Clock, epoch_of: Callable[[str], int | None] | None = None
    ) -> None:
        if "coordinator" not in key.roles:
            raise ValueError(f"key {key.kid} may sign as {list(key.roles)}, not as 'coordinator'")
        self.key = key
        self.coordinator = coordinator
        self._clock = clock
        self._epoch_of = epoch_of  # txnId -> the lease epoch this coordinator holds it at (TxnLeases.epoch)

    def sign(self, method: str, params: Mapping[str, Any]) -> dict[str, Any]:
        """`params` with `auth` for `method` (prepare, quote, commit, abort, compensate, renew, tighten), naming the
        coordinator's epoch for the transaction when it holds one (HATP-TRUST-9)."""
        txn_id = params.get("txnId")
        epoch = self._epoch_of(txn_id) if self._epoch_of is not None and isinstance(txn_id, str) else None
        return authorize(method, params, self.key, self.coordinator, self._clock.now(), epoch=epoch)


def open_trust(data: Path, flag: str | None, clock: Clock, bindings: TxnBindings | None = None) -> TrustedCoordinators:
    """A server's trust list (HATP-TRUST-10): `flag` (`--trusted-coordinators [ID=]FILE`; `ID=` binds the file's
        keys to that coordinator id), else `DATA/trusted-coordinators.json` when present, else none: the server
        starts and refuses every state-changing request (HATP-TRUST-6). Bindings are kept in `bindings`, by default
    `DATA/coordinators.db`.

        Raises ValueError (a bad trust list) or OSError."""
    where = str(data / TRUST_FILE)
    keyring: Keyring | None = None
    if flag is not None:
        party, sep, file = flag.partition("=") if "=" in flag else ("", "", flag)
        keyring = load_trust_list(Path(file), party if sep else None)
    elif (data / TRUST_FILE).exists():
        keyring = load_trust_list(data / TRUST_FILE)
    data.mkdir(parents=True, exist_ok=True)
    kept = bindings if bindings is not None else SqliteTxnBindings(data / "coordinators.db")
    return TrustedCoordinators(keyring, clock, kept, where=where)
