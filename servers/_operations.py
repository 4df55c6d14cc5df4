"""The three kinds of operation the demo's tool servers offer, on an Inventory, for the participant wrapper.

`HoldOp` (seat, room, card authorization): dry run checks the resource is free, a hold marks it held, commit
takes it, abort frees it. `CompensateOp` (calendar event): commit creates, undo deletes. `FinalOp` (card capture):
commit takes, nothing undoes it. Every effect goes through the inventory's ledger with the branch's idempotency key
(the same key never takes, captures or undoes twice) and `lookup` reads it back (HATP-PART-10, HATP-PART-11). They
are `StoreOperation`s: when the inventory shares the participant store's database, the wrapper keeps each hold and
commit effect with its answer in one durable transaction (HATP-PART-13). The HATP rules (leases, preconditions,
first answers) are the wrapper's.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import anyio

from hatp_mcp.core.model.plan import Branch
from hatp_mcp.core.participant.branch import Lease
from hatp_mcp.runtime.participant.driver import DryRun, Performed, StoreOperation
from servers._inventory import Inventory

__all__ = ["CompensateOp", "FinalOp", "HoldOp", "ResourceKey", "resource_key"]

KeyFn = Callable[[dict[str, Any]], str]


@dataclass(frozen=True)
class ResourceKey:
    """The inventory key of a branch: its args' `fields` joined by '/' (a seat is flight/date/seat)."""

    fields: tuple[str, ...]

    def __call__(self, args: dict[str, Any]) -> str:
        return "/".join(str(args.get(f, "")) for f in self.fields)

    @property
    def format(self) -> str:
        """How a resource is named, e.g. <flight>/<date>/<seat>."""
        return "/".join(f"<{f}>" for f in self.fields)

    def fits(self, resource: str) -> bool:
        """`resource` has one non-empty part per field, none with surrounding blanks."""
        parts = resource.split("/")
        return len(parts) == len(self.fields) and all(p and p == p.strip() for p in parts)


def resource_key(*fields: str) -> ResourceKey:
    """The inventory key of a branch: its args' `fields` joined by '/'."""
    return ResourceKey(fields)


class _InventoryOp(StoreOperation):
    # TEST-ONLY fault point (--crash-after-effect): the process dies by SIGKILL right after a commit's effect is
    # written and before the participant saves its state: the window HATP-PART-11 reconciles when the inventory is
    # a database of its own, and inside the one transaction (nothing kept) when it is the store's (HATP-PART-13).
    crash_after_effect = False
    # TEST-ONLY fault point (--crash-after-hold): the process dies by SIGKILL right after a prepare's hold is
    # written, inside the transaction that would keep it with the answer and the txnId's binding (HATP-TRUST-5)
    crash_after_hold = False

    def __init__(self, inventory: Inventory, key: KeyFn) -> None:
        self.inventory = inventory
        self.database = inventory.database
        self.key = key

    def _made(self, token: str | None) -> str | None:
        if self.crash_after_effect:
            os.kill(os.getpid(), signal.SIGKILL)
        return token

    async def dry_run(self, branch: Branch, now: datetime) -> DryRun:
        resource = self.key(branch.args)
        item = self.inventory.get(resource)
        if item.state not in ("free",):
            return DryRun(refuse_code="UNAVAILABLE", refuse_reason=f"{resource} is {item.state}")
        return DryRun(versions={resource: str(item.version)}, cost=branch.amount)

    async def current(self, branch: Branch, now: datetime) -> tuple[dict[str, str], str | None]:
        resource = self.key(branch.args)
        return {resource: str(self.inventory.get(resource).version)}, None

    async def lookup(self, key: str, branch: Branch) -> Performed | None:
        done = self.inventory.effect(key, "commit")
        return Performed(done.undo_token) if done is not None else None


class HoldOp(_InventoryOp):
    def hold_now(self, txn_id: str, branch: Branch, lease: Lease) -> None:
        self.inventory.set_state(self.key(branch.args), "held", txn_id)
        if self.crash_after_hold:
            os.kill(os.getpid(), signal.SIGKILL)

    async def release_hold(self, txn_id: str, branch: Branch) -> None:
        item = self.inventory.get(self.key(branch.args))
        if item.holder == txn_id:
            self.inventory.set_state(item.resource, "free", None)

    def perform_now(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        return self._made(self.inventory.apply_effect(key, "commit", self.key(branch.args), "taken", txn_id).undo_token)


class CompensateOp(_InventoryOp):
    def perform_now(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        resource = self.key(branch.args)
        # the undo token names what to delete
        made = self.inventory.apply_effect(key, "commit", resource, "taken", txn_id, undo_token=resource)
        return self._made(made.undo_token)

    async def undo(self, txn_id: str, branch: Branch, undo_token: str | None, now: datetime, *, key: str) -> None:
        resource = undo_token or self.key(branch.args)
        mine = self.inventory.get(resource).holder == txn_id
        self.inventory.apply_effect(key, "undo", resource, "free" if mine else None, None)


class FinalOp(_InventoryOp):
    delay_seconds = 0.0  # fault injection for tests and demos (--commit-delay): a slow final step

    async def dry_run(self, branch: Branch, now: datetime) -> DryRun:
        # a card can be charged many times: only an outside block ("gone") refuses
        resource = self.key(branch.args)
        item = self.inventory.get(resource)
        if item.state == "gone":
            return DryRun(refuse_code="DECLINED", refuse_reason=f"{resource} is blocked")
        return DryRun(versions={resource: str(item.version)}, cost=branch.amount)

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        # with a delay the capture stands for a slow outside API: servers/_participant.py then keeps the inventory
        # in a database of its own, so this (not perform_now in the store's transaction) is what runs
        if self.delay_seconds:
            await anyio.sleep(self.delay_seconds)
        return self.perform_now(txn_id, branch, now, key=key)

    def perform_now(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        # a capture changes no inventory state (a card is charged many times): the ledger is the charge
        return self._made(self.inventory.apply_effect(key, "commit", self.key(branch.args), None, None).undo_token)
