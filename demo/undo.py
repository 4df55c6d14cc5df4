"""`make demo-undo`: the journal undoes what an agent already did, through MCP calls on real server processes.

An agent returns item #882: it marks the item returned and refunds $40 on the shop (servers.shop), registering
each step and its undo with the journal (servers.journal) first; then the label tool fails. The journal undoes
the refund and the return, last first, by calling the undo tools the agent registered on the shop over MCP, and
its signed record is verified offline. Then item #883, the same saga, but the journal's process is killed
(SIGKILL) in the middle of its rollback, while the shop's payments API is down; the journal is started again on
the same data and finishes the rollback on its own. The agent talks to the journal over HTTP with its bearer
token (HATP-JRN-17); a call without it is refused. Every process is stopped on the way out.
"""

from __future__ import annotations

import json
import sys
import tempfile
import warnings
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, MCPError

from hatp_mcp.core.journal.record import verify_journal
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry
from hatp_mcp.mcp.http_callers import bearer_client, hash_token, new_token
from hatp_mcp.mcp.journal_server import KEY_META
from hatp_mcp.mcp.launch import HttpProcess, launch_http

__all__ = ["main"]


def say(who: str, text: str) -> None:
    print(f"  {who:<10} {text}", flush=True)


async def tool(client: Client, name: str, args: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(name, args)
    if result.is_error or result.structured_content is None:
        raise SystemExit(f"demo failed: {name} answered {result.content}")
    out: dict[str, Any] = result.structured_content
    return out


async def step(
    journal: Client, shop: Client, saga: str, action: str, call: tuple[str, dict[str, Any]], undo: Any
) -> str:
    """What an agent does per step: register it (and its undo) first, make the call with its key, report."""
    added = await tool(journal, "saga_add_step", {"saga_id": saga, "action": action, "undo": undo})
    name, args = call
    result = await shop.call_tool(name, args, meta={KEY_META: added["key"]})  # type: ignore[arg-type]
    if result.is_error:
        error = " ".join(getattr(c, "text", "") for c in result.content)
        say("shop", f"{name} failed: {error}")
        await tool(journal, "saga_fail_step", {"saga_id": saga, "step_id": added["stepId"], "error": error})
        return "FAILED"
    say("shop", f"{name}({json.dumps(args)}) -> {json.dumps(result.structured_content)}")
    out = {"saga_id": saga, "step_id": added["stepId"], "output": result.structured_content}
    return str((await tool(journal, "saga_complete_step", out))["state"])


async def the_return(journal: Client, shop: Client, item: str) -> str:
    saga = str((await tool(journal, "saga_begin", {"name": f"return-{item}"}))["sagaId"])
    say("agent", f"saga {saga}: return item #{item}")
    unmark = {"server": "shop", "tool": "unmark_returned", "arguments": {"item": item}}
    reverse = {"server": "shop", "tool": "reverse_refund", "arguments": {"item": item}}
    await step(journal, shop, saga, f"mark #{item} returned", ("mark_returned", {"item": item}), unmark)
    await step(journal, shop, saga, "refund $40", ("refund", {"item": item, "usd": "40.00"}), reverse)
    await step(journal, shop, saga, "print the label", ("create_label", {"item": item}), None)
    return saga


def show(status: dict[str, Any]) -> None:
    for s in status["steps"]:
        extra = f" ({s['rollback']})" if s.get("rollback") else ""
        tries = f", {s['undoAttempts']} undo attempt(s)" if s.get("undoAttempts") else ""
        tries += f", retry at {s['retryAt']}" if s.get("retryAt") else ""
        say("journal", f"{s['stepId']} {s['action']:<20} {s['state']}{extra}{tries}")
    say("journal", f"saga {status['sagaId']}: {status['status']}")


def verify(status: dict[str, Any], data: Path) -> None:
    ring = Keyring()
    ring.add(PublicKeyEntry.from_jwk(json.loads((data / "public.jwk.json").read_text())))
    problems = verify_journal(status["record"], ring)
    if problems:
        raise SystemExit(f"demo failed: the record does not verify: {[p.to_dict() for p in problems]}")
    n = len(status["record"]["events"])
    say("verify", f"the journal record holds offline: {n} signed, chained events, replayed through the machine")


async def effects(shop: Client, item: str) -> list[str]:
    done = (await tool(shop, "effects", {}))["effects"]
    return [e["kind"] for e in done if e["item"] == item]


AGENT = "agent://acme.com/return-bot"
TOKEN = new_token()  # the agent's bearer token for the journal over HTTP (HATP-JRN-17); the journal keeps its hash


def journal_process(base: Path, allow: Path) -> AbstractAsyncContextManager[HttpProcess]:
    callers = base / "callers.json"
    callers.write_text(json.dumps({"callers": {AGENT: {"tokenSha256": hash_token(TOKEN)}}}))
    extra = ["--allow", str(allow), "--retry-base-ms", "1500", "--callers", str(callers)]
    return launch_http("servers.journal", base / "journal", extra=extra)


async def killed_mid_rollback(base: Path, allow: Path, shop: Client, item: str) -> str:
    """Part 2's first half: return `item`, let the label fail, start the rollback and SIGKILL the journal while the
    refund's undo waits for its retry. Returns the saga's id."""
    async with journal_process(base, allow) as jp:
        killed = False
        try:
            async with bearer_client(jp.url, TOKEN) as journal:
                saga = await the_return(journal, shop, item)

                async def rollback() -> None:
                    try:
                        await journal.call_tool("saga_rollback", {"saga_id": saga})
                    except Exception:  # the journal dies under this call: its answer never comes
                        return

                async with anyio.create_task_group() as tg:
                    tg.start_soon(rollback)
                    with anyio.fail_after(30):
                        async with bearer_client(jp.url, TOKEN) as watcher:
                            while True:
                                status = await tool(watcher, "saga_status", {"saga_id": saga})
                                refund = status["steps"][1]
                                if refund.get("retryAt"):  # its first undo failed; the retry is armed
                                    break
                                await anyio.sleep(0.05)
                    show(status)
                    say("", f"SIGKILL the journal (pid {jp.pid}) while the refund's undo waits for its retry")
                    jp.kill()
                    killed = True
                    tg.cancel_scope.cancel()
        except Exception:
            # Closing the agent's session to the journal it just killed may report the lost connection
            # (the SDK's HTTP transport raises the rollback's unanswered POST at the session's exit, when
            # that POST fails before the exit cancels it): expected here, and only here.
            if not killed:
                raise
    return saga


async def run(base: Path) -> None:
    allow = base / "allow.json"
    print("1. An agent returns item #882; the label fails; the journal undoes the refund and the return.")
    shop_proc: HttpProcess
    async with launch_http("servers.shop", base / "shop", extra=["--label-fails"]) as shop_proc:
        allow.write_text(json.dumps({"servers": {"shop": shop_proc.url}}))
        async with (
            journal_process(base, allow) as jp,
            bearer_client(jp.url, TOKEN) as journal,
            Client(shop_proc.url) as shop,
        ):
            say("", f"shop at {shop_proc.url}, journal at {jp.url} (allow-list: shop)")
            saga = await the_return(journal, shop, "882")
            say("agent", "saga_rollback")
            await tool(journal, "saga_rollback", {"saga_id": saga, "reason": "the label failed"})
            status = await tool(journal, "saga_status", {"saga_id": saga, "include_record": True})
            show(status)
            kinds = await effects(shop, "882")
            say("shop", f"effects on #882: {kinds}")
            if status["status"] != "ROLLED_BACK" or kinds != ["mark", "refund", "unrefund", "unmark"]:
                raise SystemExit("demo failed: the return was not undone as it should be")
            verify(status, base / "journal")
            async with Client(jp.url) as stranger:  # no token: refused before any tool runs
                try:
                    await stranger.call_tool("saga_rollback", {"saga_id": saga})
                    raise SystemExit("demo failed: an unauthenticated rollback was accepted")
                except MCPError as err:
                    data = err.data if isinstance(err.data, dict) else {}
                    say(
                        "journal",
                        f"a rollback without the agent's token is refused: {data.get('rule')} {data.get('code')}",
                    )
            try:
                await journal.call_tool("saga_add_step", {"saga_id": saga, "action": "x", "undo": "rm -rf /"})
                raise SystemExit("demo failed: a shell command was accepted as an undo")
            except MCPError as err:
                data = err.data if isinstance(err.data, dict) else {}
                say("journal", f"an undo given as a shell string is refused: {data.get('rule')} {data.get('code')}")

    print("\n2. Item #883: the journal is killed in the middle of its rollback (the payments API is down).")
    async with launch_http("servers.shop", base / "shop", extra=["--label-fails", "--undo-fails", "2"]) as shop_proc:
        allow.write_text(json.dumps({"servers": {"shop": shop_proc.url}}))
        async with Client(shop_proc.url) as shop:
            saga = await killed_mid_rollback(base, allow, shop, "883")
            async with journal_process(base, allow) as jp, bearer_client(jp.url, TOKEN) as journal:
                say("", f"the journal starts again on the same data (pid {jp.pid}) and recovers")
                with anyio.fail_after(60):
                    while True:  # its rollback runs on its own; the agent only watches
                        status = await tool(journal, "saga_status", {"saga_id": saga})
                        if status["status"] != "FAILED":
                            break
                        await anyio.sleep(0.1)
                status = await tool(journal, "saga_status", {"saga_id": saga, "include_record": True})
                show(status)
                kinds = await effects(shop, "883")
                say("shop", f"effects on #883: {kinds}")
                if status["status"] != "ROLLED_BACK" or kinds != ["mark", "refund", "unrefund", "unmark"]:
                    raise SystemExit("demo failed: the recovered rollback did not undo everything once")
                verify(status, base / "journal")
    print("\nDone: every completed step undone once, last first, by MCP calls; both records verify offline.")


def main() -> int:
    warnings.simplefilter("ignore")
    with tempfile.TemporaryDirectory(prefix="hatp-demo-undo-") as tmp:
        anyio.run(run, Path(tmp))
    return 0


if __name__ == "__main__":
    sys.exit(main())
