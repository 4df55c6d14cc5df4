"""`hatp serve --org DIR [--agent NAME]`: the organisation's servers as one supervised local service.

It runs the organisation's gateway (with its web inbox when suite.json turns it on), its Directory, its tool servers
(suite.json `participants`) and its coordinator (and the journal when DIR/journal-allow.json exists), then each
third-party server suite.json wraps behind the proxy (`hatp org wrap`, HATP-MCP-58), as children over streamable
HTTP on 127.0.0.1, wired as `hatp mcp-config --org` wires them (the same keys, stores and trust lists). The
gateway, the Directory, the tool servers and the journal start side by side; the coordinator only once the gateway
and every tool server are ready, so the gateway is up before a coordinator that could begin a trip against it
(HATP-MCP-44) and the tool servers before the coordinator that reaches them at its start; a proxy once the gateway
is ready. A cold start (the first bridge of a stopped service waits for it) thus takes its longest chain.
Transactions, asks and sagas then live in the service, not in any client's process: a client that opens a session
per call, or quits, ends nothing (HATP-MCP-41).

The supervisor (hatp_mcp.runtime.service) restarts a child that dies, bounded and with backoff (HATP-MCP-43), and
keeps DIR/data/service/: the lock (one service per organisation store, HATP-MCP-42), status.json (each child's
state, pid, port, URL and restarts) and logs/<child>.log. SIGINT or SIGTERM stop every child and exit 0. Once
every child is ready it prints `HATP_SERVICE_READY` on stdout (a bridge that started it waits for that line).
Exit 1: a child could not start (named, with why: a port taken, an exit before ready); 2: another service holds
the lock (its pid is said), or the organisation is unusable.

`--install [--enable]` starts nothing: it writes a systemd user unit that runs this command
(hatp_mcp/cli/serve_unit.py, HATP-MCP-61).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable, Mapping
from pathlib import Path

import anyio

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, fail
from hatp_mcp.cli.mcp_config_cmd import (
    OrgParts,
    agent_id,
    client_token_file,
    coordinator_org_args,
    gateway_args,
    journal_allow,
    org_parts,
    service_ports,
)
from hatp_mcp.cli.org_layout import Wrapped
from hatp_mcp.cli.serve_unit import install_unit
from hatp_mcp.core.model.proxy_policy import load_policy
from hatp_mcp.core.txn.data import Config
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.clock import SystemClock
from hatp_mcp.runtime.service.supervisor import (
    LOCK_FILE,
    READY_PREFIX,
    SERVICE_READY,
    ChildSpec,
    StartFailed,
    Supervisor,
    service_folder,
)
from hatp_mcp.store.data_lock import DataLock, DataLocked
from hatp_mcp.store.files import read_json_file

__all__ = ["add_arguments", "child_specs", "proxy_args", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--org", required=True, help="an organisation dir made by hatp init-org")
    p.add_argument("--agent", help="the agent (private/agents/NAME) the coordinator signs plans as")
    p.add_argument("--python", default=sys.executable, help="the interpreter that has hatp-mcp installed")
    p.add_argument("--poll-seconds", type=int, help="the coordinator polls a pending approval this often")
    p.add_argument("--retry-seconds", type=int, help="the coordinator retries an in-doubt commit this often")
    p.add_argument(
        "--undo-attempts",
        type=int,
        help="the coordinator sends an undo that stays in doubt at most this often, then offers it for recovery",
    )
    p.add_argument(
        "--install",
        action="store_true",
        help="write a systemd user unit that runs this service (Restart=on-failure) and say how to enable it",
    )
    p.add_argument("--enable", action="store_true", help="with --install: also enable and start the unit")


def _http(python: str, module: str, port: int, args: list[str]) -> list[str]:
    return [python, "-m", module, "--transport", "http", "--port", str(port), "--parent-watch", *args]


def _url(port: int) -> str:
    return f"http://127.0.0.1:{port}/mcp"


def proxy_args(parts: OrgParts, wrapped: Wrapped, gateway_url: str) -> list[str]:
    """The proxy's arguments beside its transport for a wrapped server: its data and policy, and, when the policy
    gates a tool or sets a budget, the organisation whose cards approve, its gateway and the agent it acts as
    (spec/proxy.md section 2). A policy that cannot be read is left for the proxy to refuse at its start."""
    args = ["--data", str(wrapped.data), "--policy", str(wrapped.policy)]
    try:
        policy = load_policy(read_json_file(wrapped.policy))
    except (HatpError, OSError, ValueError):
        return args
    if policy.budgets or any(t.policy == "gate" for t in policy.tools.values()):
        org = str(parts.layout.root)
        args += ["--org", org, "--gateway", gateway_url, "--agent-key", parts.agent_key]
    return args


def child_specs(
    parts: OrgParts, python: str, coordinator_extra: list[str] | None = None, callers: Path | None = None
) -> list[ChildSpec]:
    """The service's children: gateway, Directory, tool servers, coordinator (, journal), then the wrapped
    third-party servers' proxies (HATP-MCP-58), each serving only the callers the coordinator serves. Each names
    the children it needs ready before it starts (HATP-MCP-44): the coordinator the gateway and the tool servers,
    a proxy the gateway; the others nothing."""
    suite, root = parts.suite, str(parts.layout.root)
    ports = service_ports(suite)
    proof = ["--callers", str(callers)] if callers is not None else []  # HATP-MCP-49, HATP-GW-89: the org's client
    gateway = [*gateway_args(parts), *proof]
    specs = [
        ChildSpec("gateway", lambda _p, port: _http(python, "servers.gateway", port, gateway), ports["gateway"], ()),
        ChildSpec(
            "directory",
            lambda _p, port: _http(python, "servers.directory", port, ["--org", root]),
            ports["directory"],
            (),
        ),
    ]
    names: dict[str, str] = {}

    def tool_server(module: str, data: str) -> Callable[[Mapping[str, int], int], list[str]]:
        return lambda _p, port: _http(python, module, port, ["--data", data])

    for p in suite.participants:
        name = p.module.rsplit(".", 1)[-1]
        names[p.uri] = name
        specs.append(ChildSpec(name, tool_server(p.module, str(p.data)), needs=()))

    def coordinator(ready: Mapping[str, int], port: int) -> list[str]:
        links = {uri: _url(ready[name]) for uri, name in names.items()}
        args = coordinator_org_args(parts, links, _url(ready["gateway"]))
        return _http(python, "servers.coordinator", port, [*args, *proof, *(coordinator_extra or [])])

    specs.append(ChildSpec("coordinator", coordinator, ports["coordinator"], ("gateway", *names.values())))
    allow = journal_allow(parts)
    if allow is not None:
        journal = ["--data", str(parts.layout.data("journal")), "--allow", str(allow)]
        specs.append(ChildSpec("journal", lambda _p, port: _http(python, "servers.journal", port, journal), needs=()))

    def proxy(wrapped: Wrapped) -> Callable[[Mapping[str, int], int], list[str]]:
        def command(ready: Mapping[str, int], port: int) -> list[str]:
            # over HTTP the proxy serves only callers proven by their token (HATP-JRN-17): the organisation's client
            proof = ["--callers", str(callers)] if callers is not None else []
            return _http(
                python, "servers.journal_proxy", port, [*proxy_args(parts, wrapped, _url(ready["gateway"])), *proof]
            )

        return command

    for w in suite.wrapped:
        specs.append(ChildSpec(w.name, proxy(w), w.port or 0, ("gateway",)))
    return specs


def service_callers(parts: OrgParts, folder: Path) -> Path:
    """HATP-MCP-49, HATP-GW-89: the coordinator's and the gateway's callers file in the service folder, naming the
    organisation's agent by the digest of its client token (made when missing). Raises HatpError HATP-MCP-35,
    OSError."""
    from hatp_mcp.mcp.bridge import read_token  # the MCP binding's; only a running service needs them
    from hatp_mcp.mcp.http_callers import write_callers

    token = read_token(client_token_file(parts))
    folder.mkdir(parents=True, exist_ok=True)
    return write_callers(folder / "callers.json", {agent_id(parts): token})


async def _serve(supervisor: Supervisor) -> None:
    """Raises StartFailed (unwrapped from the task group's exception group)."""
    try:
        await _serve_until_signal(supervisor)
    except BaseExceptionGroup as group:
        found, _rest = group.split(StartFailed)
        failed: BaseException | None = found
        while isinstance(failed, BaseExceptionGroup):
            failed = failed.exceptions[0]
        if failed is not None:
            raise failed from None
        raise


async def _serve_until_signal(supervisor: Supervisor) -> None:
    """Until SIGINT or SIGTERM, which may come while the children are still starting too."""
    async with anyio.create_task_group() as tg:

        async def stop_on_signal() -> None:
            with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    tg.cancel_scope.cancel()
                    return

        tg.start_soon(stop_on_signal)
        await tg.start(supervisor.run)
        print(SERVICE_READY, flush=True)
        for name, child in supervisor.status()["children"].items():
            print(f"hatp serve: {name} ready at {child['url']}", file=sys.stderr, flush=True)


def run(args: argparse.Namespace) -> int:
    root = Path(args.org).expanduser().absolute()
    try:
        if args.undo_attempts is not None:
            Config(undo_attempts=args.undo_attempts)  # HATP-TXN-33: refused before anything is started
        parts = org_parts(root, args.agent)
    except HatpError as exc:
        return fail(exc.one_line(), EXIT_BAD_INPUT)
    except OSError as exc:
        return fail(f"{args.org}: {exc.strerror or exc}", EXIT_BAD_INPUT)
    if args.install or args.enable:  # a unit that runs this very command; nothing is started here
        return install_unit(root, str(Path(args.python).absolute()), args.agent, args.enable, os.environ)
    folder = service_folder(root)
    clock = SystemClock()
    lock = DataLock(folder / LOCK_FILE)
    try:
        lock.acquire(clock.now().isoformat())
    except DataLocked as exc:
        return fail(
            f"cannot start: a service of this organisation is already running: {exc} (HATP-MCP-42); stop it first, "
            "or use it as it is",
            EXIT_BAD_INPUT,
        )
    try:
        extra = [f"--poll-seconds={args.poll_seconds}"] if args.poll_seconds else []
        extra += [f"--retry-seconds={args.retry_seconds}"] if args.retry_seconds else []
        extra += [f"--undo-attempts={args.undo_attempts}"] if args.undo_attempts is not None else []
        try:
            callers = service_callers(parts, folder)
        except (HatpError, OSError) as exc:
            return fail(f"cannot start: the client token: {exc}", EXIT_BAD_INPUT)
        specs = child_specs(parts, str(Path(args.python).absolute()), extra, callers)
        supervisor = Supervisor(specs, folder, clock, READY_PREFIX)
        print(f"hatp serve: {root}: logs in {folder / 'logs'}, status in {supervisor.status_file}", file=sys.stderr)
        try:
            anyio.run(_serve, supervisor)
        except StartFailed as exc:
            return fail(
                f"cannot start: {exc} (HATP-MCP-44); nothing was started: no transaction can begin without it. "
                f"Its log: {supervisor.log_file(exc.child)}",
                EXIT_PROBLEMS,
            )
        except KeyboardInterrupt:
            pass
        return EXIT_OK
    finally:
        lock.release()
