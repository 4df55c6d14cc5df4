"""The proxy as a process: any MCP server's tools, each passed, journaled, marked irreversible, hidden or denied as
its policy file says (spec/proxy.md).

`python -m servers.journal_proxy --transport stdio|http [--port N] --data DIR --policy FILE`

The policy file names the upstream (a command it starts over stdio with exactly the environment the file names, or
a URL) and the policy of each tool. At start the proxy lists the upstream's tools and checks the file against
them; a file it refuses ends it with exit status 2 and one line naming the rule, the path and the fix, before its
journal is opened or anything is served.

Tools with policy `participant` make the proxy a HATP participant too (hatp/txn/* through the participant driver,
hatp_mcp/mcp/proxy_participant.py, spec/proxy.md section 3): its key and branch state under DATA/participant, the
coordinators it acts for from `--trusted-coordinators [ID=]FILE` (default DATA/trusted-coordinators.json); its
signing key `--key FILE` (owner-only, role participant) when the operator keeps it elsewhere.

A tool with policy `gate` (and budgets) needs `--org DIR` (approvals are checked against its cards) and
`--server-id ID`; with `--gateway TARGET --agent-key FILE` the proxy asks the Human Gateway itself, as that agent
(hatp_mcp/mcp/proxy_gate_cli.py, spec/proxy.md section 2).

The older form `--upstream TARGET --undo-map FILE` still works: TARGET is `http(s)://.../mcp`,
`stdio:MODULE[:DATA]` (a Python module of this repository) or `cmd:<command line>` (any stdio MCP server; split
like a shell would, never run through one); the undo map (hatp_mcp/core/journal/undo_map.py) becomes the same
policy, every tool it does not name irreversible. State and
the journal's key (role `journal`) live under --data (`--store postgresql://USER@HOST:PORT/DB`: the sagas in
PostgreSQL); on start it recovers unfinished sagas without undoing anything (policy `resume`, HATP-PXY-9): an open
saga stays open for the model to complete or roll back (`hatp proxy sagas --data DIR` lists them). One proxy
at a time runs on a --data folder (a lock, HATP-PXY-13). Over HTTP it
needs `--callers FILE` and refuses every tool call without a caller's bearer token (HATP-JRN-17); its callers
share its one current saga, so give each agent a proxy of its own.
`--shadow` (or `"shadow": true` in the file) records what hide, deny, gate and budgets would refuse in
DATA/shadow.db and forwards the call (HATP-PXY-40). A changed policy file is checked whole on the next request
and taken, or refused with the old one kept (HATP-PXY-43, 44; DATA/policy-status.json).
Never writes to stdout (the stdio wire).
"""

from __future__ import annotations

import argparse
import functools
import json
import shlex
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path

import anyio
from mcp import StdioServerParameters

from hatp_mcp.core.journal.proxy_tools import resolve_tools
from hatp_mcp.core.journal.undo_map import UndoMap
from hatp_mcp.core.model.base import parse_ts
from hatp_mcp.core.model.proxy_policy import HttpUpstream, ProxyPolicy, StdioUpstream
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.http_callers import CallerTokens, add_callers_argument, caller_middleware, read_callers
from hatp_mcp.mcp.journal_proxy import LOCK, RECOVERY_POLICY, JournalingProxy, proxy_names_free, upstream_tools
from hatp_mcp.mcp.launch import ROOT, stdio_params
from hatp_mcp.mcp.participant_server import serve_hatp
from hatp_mcp.mcp.proxy_gate_cli import add_gate_arguments, open_gate
from hatp_mcp.mcp.proxy_participant import client_caller, open_participant
from hatp_mcp.mcp.proxy_reload import PolicyWatch
from hatp_mcp.mcp.proxy_upstream import (
    START_TIMEOUT,
    Target,
    first_error,
    read_policy,
    upstream_client,
    upstream_target,
    upstream_unavailable,
)
from hatp_mcp.mcp.serve import add_server_arguments, add_trust_argument, log, quiet, serve
from hatp_mcp.runtime.clock import Clock, FakeClock, SystemClock
from hatp_mcp.runtime.journal.driver import Journal
from hatp_mcp.store.data_lock import DataLocked, data_lock
from hatp_mcp.store.shadow_log import ShadowLog
from hatp_mcp.store.step_rules import StepRules
from hatp_mcp.store.url import StoreUrl, open_journal_store
from servers._keys import load_or_create_key

__all__ = ["main", "parse_upstream"]


def parse_upstream(target: str) -> str | StdioServerParameters:
    """A URL, or how to start a stdio server. Raises ValueError for a target that is none of the three forms."""
    if target.startswith(("http://", "https://")):
        return target
    if target.startswith("stdio:") and target[6:]:
        module, _, data = target[6:].partition(":")
        return stdio_params(module, data or None)
    if target.startswith("cmd:") and target[4:].strip():
        argv = shlex.split(target[4:])
        return StdioServerParameters(command=argv[0], args=argv[1:], cwd=str(ROOT))
    raise ValueError(f"--upstream {target!r}: http(s)://..., stdio:MODULE[:DATA] or cmd:<command line>")


def _legacy_upstream(target: str | StdioServerParameters) -> StdioUpstream | HttpUpstream:
    if isinstance(target, str):
        return HttpUpstream(url=target)
    cwd = str(target.cwd) if target.cwd is not None else None
    return StdioUpstream(command=target.command, args=list(target.args), env=dict(target.env or {}), cwd=cwd)


def _policy(args: argparse.Namespace) -> tuple[ProxyPolicy, Target]:
    """The policy and how to reach the upstream. Raises HatpError (HATP-PXY-1/2/3, HATP-JRN-14), ValueError."""
    if args.policy is not None:
        if args.upstream is not None or args.undo_map is not None:
            raise ValueError(
                "--policy names the upstream and every tool's policy: give neither --upstream nor --undo-map"
            )
        path = Path(args.policy).resolve()
        policy = read_policy(path)
        return policy, upstream_target(policy, path.parent)
    if args.upstream is None or args.undo_map is None:
        raise ValueError("give --policy FILE (or the older --upstream TARGET with --undo-map FILE)")
    target = parse_upstream(args.upstream)
    undo_map = UndoMap.parse(json.loads(Path(args.undo_map).read_text()))
    return undo_map.policy(_legacy_upstream(target)), target


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="servers.journal_proxy", description="an MCP proxy with a policy per tool")
    add_server_arguments(p)
    p.add_argument("--policy", help="the policy file: the upstream and each tool's policy (spec/proxy.md)")
    p.add_argument("--upstream", help="(with --undo-map) http(s)://..., stdio:MODULE[:DATA] or cmd:<command line>")
    p.add_argument("--undo-map", help="(with --upstream) JSON: which upstream tool undoes which")
    p.add_argument(
        "--start-timeout",
        type=float,
        default=START_TIMEOUT,
        metavar="SECONDS",
        help=f"the bound on the upstream's start: its initialize and its tools/list (default {START_TIMEOUT:g})",
    )
    p.add_argument(
        "--shadow",
        action="store_true",
        help="record what hide, deny, gate and budgets would refuse (hatp proxy shadow) and forward the call",
    )
    add_callers_argument(p)
    add_gate_arguments(p)
    add_trust_argument(p)
    p.add_argument(
        "--key",
        metavar="FILE",
        help="the participant's private JWK (role participant, mode 0600) for the participant tools' votes and "
        "receipts; default DATA/participant/key.jwk.json, made on first start",
    )
    p.add_argument(
        "--store",
        help="the journal's sagas: sqlite:PATH (default: sqlite:DATA/journal.db) or postgresql://USER@HOST:PORT/DB",
    )
    return p


async def _run(
    args: argparse.Namespace,
    data: Path,
    store_url: StoreUrl,
    policy: ProxyPolicy,
    target: Target,
    callers: CallerTokens | None,
) -> int:
    """Serve until the client goes; the upstream's start bounded by --start-timeout (HATP-PXY-4)."""
    code: list[int] = []
    late = False
    listed = anyio.Event()

    async def bound() -> None:
        nonlocal late
        with anyio.move_on_after(args.start_timeout):
            await listed.wait()
            return
        late = True
        tg.cancel_scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(bound)
        code.append(await _serve(args, data, store_url, policy, target, callers, listed))
        tg.cancel_scope.cancel()  # (the bound, when the proxy stopped before its upstream listed its tools)
    if late:
        refusal = upstream_unavailable(f"no answer within {args.start_timeout:g}s (--start-timeout)")
        log(f"journal-proxy: cannot start: {refusal.one_line()}")
        return 2
    return code[0]


async def _serve(
    args: argparse.Namespace,
    data: Path,
    store_url: StoreUrl,
    policy: ProxyPolicy,
    target: Target,
    callers: CallerTokens | None,
    listed: anyio.Event,
) -> int:
    key = load_or_create_key(data, ["journal"])
    async with AsyncExitStack() as stack:
        try:  # one proxy (or `hatp proxy end`) at a time on a journal (HATP-PXY-13)
            stack.enter_context(data_lock(data, LOCK))
        except DataLocked as exc:
            log(f"journal-proxy: cannot start: HATP-PXY-13: {exc}: another proxy serves this --data")
            return 2
        stdio = isinstance(target, StdioServerParameters)
        errlog = stack.enter_context((data / "upstream.stderr").open("a")) if stdio else None
        try:
            upstream = await stack.enter_async_context(upstream_client(target, errlog))
            tools = (await upstream.list_tools()).tools
        except Exception as exc:  # one line naming what failed; never the upstream's environment (HATP-PXY-2)
            log(f"journal-proxy: cannot start: {upstream_unavailable(first_error(exc)).one_line()}")
            return 2
        listed.set()
        try:  # the saga tools' names are the proxy's own
            proxy_names_free(tools)
        except ValueError as exc:
            log(f"journal-proxy: cannot start: {exc}")
            return 2
        try:  # the file against the upstream's tools, before the journal is opened or anything is served
            resolve_tools(policy, upstream_tools(tools))
        except HatpError as exc:  # HATP-PXY-4/5/6
            log(f"journal-proxy: cannot start: {exc.one_line()}")
            return 2
        try:
            store = await stack.enter_async_context(open_journal_store(store_url))
        except (HatpError, OSError, ValueError) as exc:  # HATP-STORE-1/3, unreachable, no psycopg
            log(f"journal-proxy: cannot start: {store_url}: {exc}")
            return 2
        journal = Journal(store, key, author="journal-proxy://" + data.name, policy=RECOVERY_POLICY)
        try:  # a gated tool, and budgets, need the organisation (HATP-PXY-20..24)
            gate = await stack.enter_async_context(open_gate(args, data, policy))
            shadow = ShadowLog(data / "shadow.db")  # what shadow mode lets through (HATP-PXY-40)
            stack.callback(shadow.close)
            # the rules steps were journaled with before they rode in the step's entry (HATP-PXY-44)
            step_rules = StepRules.open(data / "step-rules.db")
            if step_rules is not None:
                stack.callback(step_rules.close)
            proxy = JournalingProxy(
                upstream, tools, journal, policy, gate, shadow=shadow, shadow_mode=args.shadow, step_rules=step_rules
            )
        except (HatpError, OSError, ValueError) as exc:
            log(f"journal-proxy: cannot start: {exc.one_line() if isinstance(exc, HatpError) else exc}")
            return 2
        clock: Clock = FakeClock(parse_ts(args.now)) if args.now else SystemClock()
        try:  # the participant tools' side: its own key and state (HATP-PXY-38)
            participant = stack.enter_context(
                open_participant(
                    data,
                    policy,
                    proxy.rules,
                    upstream_tools(tools),
                    client_caller(upstream),
                    clock,
                    args.trusted_coordinators,
                    Path(args.key) if args.key else None,
                )
            )
        except (HatpError, OSError, ValueError) as exc:
            log(f"journal-proxy: cannot start: {exc.one_line() if isinstance(exc, HatpError) else exc}")
            return 2
        await journal.recover()  # nothing is undone on its own (HATP-PXY-9)
        for saga_id, status in (await proxy.reopen()).items():
            log(f"journal-proxy: saga {saga_id} is {status.value} after the restart: nothing was undone")
        if args.policy is not None:  # a changed file is checked whole and taken, or refused (HATP-PXY-42, 43)
            proxy.reload = PolicyWatch(args.policy_path, proxy, data, journal.clock, log)
        if proxy.shadowing:
            log("journal-proxy: shadow mode: hide, deny, gate and budgets recorded (hatp proxy shadow), not enforced")
        low = proxy.server()
        if participant is not None:  # hatp/txn/* for the participant tools (HATP-PXY-32)
            serve_hatp(low, participant.runtime, participant.settings, trust=participant.trust)
        if callers is not None:  # over HTTP, every tool call carries a caller's token (HATP-JRN-17)
            low.middleware.append(caller_middleware(callers))
        await serve(low, args.transport, args.port, parent_watch=args.parent_watch)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    quiet()
    if args.data is None:
        log("journal-proxy: --data DIR is required (the journal keeps its sagas and key there)")
        return 2
    if not args.start_timeout > 0:
        log(f"journal-proxy: --start-timeout {args.start_timeout:g}: give a number of seconds above 0")
        return 2
    try:
        policy, target = _policy(args)
        store = StoreUrl.parse(args.store) if args.store else StoreUrl.sqlite(Path(args.data) / "journal.db")
        callers = read_callers(args, "journaling proxy")
    except (OSError, ValueError) as exc:
        log(f"journal-proxy: cannot start: {exc}")
        return 2
    except HatpError as exc:
        log(f"journal-proxy: cannot start: {exc.one_line()}")
        return 2
    Path(args.data).mkdir(parents=True, exist_ok=True)
    args.policy_path = Path(args.policy).resolve() if args.policy is not None else None
    return anyio.run(functools.partial(_run, args, Path(args.data), store, policy, target, callers))


if __name__ == "__main__":
    raise SystemExit(main())
