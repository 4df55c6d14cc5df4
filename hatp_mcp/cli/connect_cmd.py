"""`hatp connect SERVER --org DIR [--token-file FILE]`: the stdio bridge to one server of the organisation's service.

For clients that start a command (Claude Desktop, the MCP Inspector's CLI): it relays the client's stdio MCP to
the server's streamable HTTP endpoint in `hatp serve` (hatp_mcp.mcp.bridge). When no service of the organisation
runs (nobody holds its lock) it starts one, detached in a session of its own, and waits (bounded) for it to say
it is ready: a bridge that exits ends nothing, so a transaction begun through one bridge is seen committed through
the next (HATP-MCP-41). `--token-file` names a 0600 file whose bearer token every request carries (HATP-MCP-46).
SERVER is gateway, coordinator, directory, journal or a third-party server the organisation wraps behind the proxy
(`hatp org wrap`, HATP-MCP-58), which, like the coordinator, gets the organisation's client token. Exit 0 when the
client closes stdin; 1 when the service cannot start or the server is not ready in time (said on stderr, which the
client logs); 2 for a bad call. The MCP SDK loads while the service starts (hatp_mcp.mcp.bridge.load_sdk).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, fail
from hatp_mcp.cli.mcp_config_cmd import client_token_file, org_parts
from hatp_mcp.cli.org_layout import load_suite
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.mcp.bridge import TokenFileError, load_sdk, read_token, relay
from hatp_mcp.runtime.service.supervisor import LOCK_FILE, SERVICE_READY, STATUS_FILE, service_folder
from hatp_mcp.store.data_lock import held_by

__all__ = ["ServiceUnavailable", "add_arguments", "ensure_service", "run"]

SERVERS = ("coordinator", "gateway", "directory", "journal")
STATUS_POLL = 0.2  # another process's readiness, read from its status file: it has no other channel to us


class ServiceUnavailable(RuntimeError):
    """The service could not be started, or the server is not ready in time; the message says why."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("server", help=f"which server of the service to reach: {', '.join(SERVERS)} or a wrapped one")
    p.add_argument("--org", required=True, help="the organisation dir made by hatp init-org")
    p.add_argument("--agent", help="when it starts the service: the agent the coordinator signs plans as")
    p.add_argument("--token-file", help="a 0600 file holding this client's bearer token")
    p.add_argument("--python", default=sys.executable, help="the interpreter that has hatp-mcp installed")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the service to be ready")


def _status(folder: Path) -> dict[str, Any]:
    try:
        value = json.loads((folder / STATUS_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return value if isinstance(value, dict) else {}


def _start(root: Path, python: str, agent: str | None, folder: Path) -> subprocess.Popen[bytes]:
    """`hatp serve` detached: its own session (a signal to the client's group does not reach it), no stdin, its
    stderr appended to DIR/data/service/serve.log, its stdout a pipe for the one readiness line."""
    folder.mkdir(parents=True, exist_ok=True)
    cmd = [python, "-m", "hatp_mcp.cli", "serve", "--org", str(root), "--python", python]
    if agent is not None:
        cmd += ["--agent", agent]
    with (folder / "serve.log").open("ab") as log:
        return subprocess.Popen(
            cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log, start_new_session=True
        )


async def _started(process: subprocess.Popen[bytes]) -> bool:
    """Whether the service we started said it is ready (False: it exited first)."""
    if process.stdout is None:
        raise BrokenInvariant("the service was started with its stdout piped and has none")
    try:
        while True:
            line = await anyio.to_thread.run_sync(process.stdout.readline, abandon_on_cancel=True)
            if not line:
                return False
            if line.decode(errors="replace").strip() == SERVICE_READY:
                return True
    finally:
        process.stdout.close()


async def ensure_service(root: Path, server: str, python: str, agent: str | None, within: float) -> str:
    """The URL of `server` in the organisation's service, starting the service when none runs. Raises
    ServiceUnavailable."""
    folder = service_folder(root)
    with anyio.move_on_after(within):
        if held_by(folder / LOCK_FILE) is None:
            process = _start(root, python, agent, folder)
            if not await _started(process):
                code = await anyio.to_thread.run_sync(process.wait)
                if held_by(folder / LOCK_FILE) is None:  # not another bridge's service starting at the same time
                    tail = (folder / "serve.log").read_text(errors="replace").strip().splitlines()[-1:]
                    raise ServiceUnavailable(
                        f"the service of {root} could not start (exit {code}): {' '.join(tail)}; "
                        f"its log: {folder / 'serve.log'}"
                    )
        while True:
            child = _status(folder).get("children", {}).get(server, {})
            if child.get("state") == "ready" and isinstance(child.get("url"), str):
                return str(child["url"])
            if child.get("state") == "failed":  # died too often: the service left it down
                raise ServiceUnavailable(
                    f"{server} of the service of {root} failed and is left down; see "
                    f"{folder / 'logs' / (server + '.log')}, then restart the service"
                )
            if server not in _status(folder).get("children", {server: None}):
                raise ServiceUnavailable(f"the service of {root} runs no {server}")
            await anyio.sleep(STATUS_POLL)
    state = _status(folder).get("children", {}).get(server, {}).get("state", "not started")
    raise ServiceUnavailable(
        f"{server} of the service of {root} is not ready after {within:g}s (it is {state}); see "
        f"{folder / 'logs' / (server + '.log')}"
    )


def run(args: argparse.Namespace) -> int:
    root = Path(args.org).expanduser().absolute()
    if not (root / "suite.json").exists():
        return fail(f"{root}: not an organisation made by hatp init-org (no suite.json)", EXIT_BAD_INPUT)
    wrapped = args.server not in SERVERS  # then a third-party server suite.json wraps (HATP-MCP-58)
    if wrapped:
        try:
            names = sorted(w.name for w in load_suite(root).wrapped)
        except HatpError as exc:
            return fail(exc.one_line(), EXIT_BAD_INPUT)
        if args.server not in names:
            known = ", ".join([*SERVERS, *names])
            return fail(f"{args.server!r} is no server of the service of {root}: one of {known}", EXIT_BAD_INPUT)
    try:
        if args.token_file:
            token: str | None = read_token(Path(args.token_file).expanduser())
        elif args.server in ("coordinator", "gateway") or wrapped:  # HATP-MCP-49, HATP-GW-89: the org's client token
            token = read_token(client_token_file(org_parts(root, args.agent)))
        else:
            token = None
    except TokenFileError as exc:
        return fail(str(exc), EXIT_BAD_INPUT)
    except (HatpError, OSError) as exc:
        return fail(f"the client token: {exc}", EXIT_BAD_INPUT)

    python = str(Path(args.python).absolute())

    async def bridge() -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, load_sdk)  # while the service starts, if it must
            url = await ensure_service(root, args.server, python, args.agent, args.timeout)
        await relay(url, token)

    try:
        anyio.run(bridge)
    except ServiceUnavailable as exc:
        return fail(str(exc), EXIT_PROBLEMS)
    except KeyboardInterrupt:
        pass
    return EXIT_OK
