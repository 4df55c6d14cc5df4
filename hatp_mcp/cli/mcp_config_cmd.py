"""`hatp mcp-config [--data DIR] [--python PATH]`: print the Claude Desktop `mcpServers` JSON for the suite.

Every path is absolute (Claude Desktop starts servers from an unknown directory): the Python interpreter, the
repository root as the working directory, and each server's --data directory. The coordinator reaches the four
tool servers and the gateway as its own stdio children on the same --data directories (their SQLite state is
shared with the entries Claude Desktop starts, so a person deciding through the gateway's tools is seen by the
coordinator's gateway on its next poll), trusts the gateway key of the organisation's well-known document, and
pins each tool server's key to the public key that server writes under its --data (HATP-MCP-27), and holds the
agent's key to sign each plan's requester for Claude Desktop, which cannot sign (HATP-TXN-21).

It also sets up the other direction (spec/mcp-binding.md HATP-TRUST-10): the coordinator's key is made under
`DATA/coordinator` if it is not there yet (the coordinator signs with it on every start), and every tool server's
and the gateway's `DATA/<name>/trusted-coordinators.json` names it, so they act for that coordinator and no one
else. What it wrote is said on stderr; stdout is the JSON alone. Without --org it is the TEST-ONLY organisation
acme.com (spec/fixtures/org, keys from its test-only-keys/), for demos and tests, and says so on stderr.

`hatp mcp-config --org DIR [--agent NAME]` prints the block for an organisation `hatp init-org` made
(hatp_mcp.cli.org_layout), and writes nothing: every key was made and pinned by the operator's steps (init-org,
`hatp card`, `hatp trust add`) and no server rewrites one at start (HATP-MCP-34). The design (HATP-MCP-35):
- One gateway process. Claude Desktop starts the gateway (its people's and agents' tools over stdio) with
  `--mcp-port P` (suite.json `gateway.mcpPort`): the same process also serves MCP on 127.0.0.1:P, and the
  coordinator reaches it there (`--gateway http://127.0.0.1:P/mcp`) instead of starting a gateway of its own. So
  one process owns the gateway's store and its timers (escalation, reminders, delivery), and a decision made in
  its web inbox (`--inbox-port`, when suite.json `gateway.inboxPort` turns it on) wakes the coordinator's long
  poll in that same process. A second gateway on the same organisation cannot start: the port is bound before
  anything else.
  The coordinator's link is lazy (first used at a plan's first ask) and reconnects after a gateway restart, so
  the start order in Claude Desktop does not matter; a plan begun while no gateway runs is aborted with
  APPROVER_FAILED (an approver that fails never counts as a yes), to be begun again once it is up.
- The tool servers (suite.json `participants`) run only as the coordinator's stdio children, one process per
  store, each pinned to the key init-org made for it and copied into `trust/` (never its own `public.jwk.json`).
- The Directory (read only), and the journal when `DIR/journal-allow.json` exists (its allow-list of undo tools).
- Every server is `python -m servers.<name>` of the installed package (`servers` is part of it): no working
  directory and no PYTHONPATH into a checkout; the interpreter is the one given (`--python`, default this one).
- No TEST-ONLY key: an organisation whose well-known publishes one (acme.com's) is refused.
"""

from __future__ import annotations

import argparse
import secrets
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, fail, print_json
from hatp_mcp.cli.org_layout import OrgLayout, Suite, load_suite
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.coordinator_trust import TRUST_FILE, trust_coordinator
from hatp_mcp.store.files import create_file, read_json_file

__all__ = [
    "SERVERS",
    "SERVICE_SERVERS",
    "OrgParts",
    "add_arguments",
    "config",
    "coordinator_args",
    "coordinator_org_args",
    "direct_config",
    "gateway_args",
    "journal_allow",
    "org_config",
    "org_parts",
    "run",
    "service_ports",
    "trust_setup",
]

SERVERS = ("coordinator", "gateway", "directory", "airline", "hotel", "calendar", "payments")
ROOT = Path(__file__).resolve().parents[2]
TOOL_SERVERS = ("airline", "hotel", "calendar", "payments")
WELL_KNOWN = ROOT / "spec" / "fixtures" / "org" / ".well-known" / "human-card.json"  # TEST-ONLY acme.com
GATEWAY_ID = "https://acme.com/hatp/gateway"
AGENT_KEY = WELL_KNOWN.parent.parent / "test-only-keys" / "agents" / "travel-bot.private.jwk.json"
COORDINATOR_ID = "coordinator://localhost"
SERVICE_SERVERS = ("coordinator", "gateway", "directory")  # what a client reaches of `hatp serve`
RECEIVERS = (*TOOL_SERVERS, "gateway")  # they act only for the coordinator (HATP-TRUST-10)


def trust_setup(data: Path, names: tuple[str, ...]) -> list[Path]:
    """HATP-TRUST-10: the coordinator's key (kept if present) trusted by each receiver among `names`. Returns the
    trust lists written. Raises OSError or ValueError."""
    receivers = [data / n for n in names if n in RECEIVERS]
    if not receivers:
        return []
    trust_coordinator(data / "coordinator", COORDINATOR_ID, receivers)
    return [r / TRUST_FILE for r in receivers]


def coordinator_args(data: Path) -> list[str]:
    """How the coordinator reaches the suite: each tool server and the gateway as a stdio child on its --data."""
    args = [f"--participant=mcp://{n}.example/hatp=stdio:servers.{n}:{(data / n).absolute()}" for n in TOOL_SERVERS]
    # each server's own public key, written under its --data on its first start, is the one its evidence must carry
    args += [
        f"--participant-keys=mcp://{n}.example/hatp={(data / n / 'public.jwk.json').absolute()}" for n in TOOL_SERVERS
    ]
    gateway = f"stdio:servers.gateway:{(data / 'gateway').absolute()}"
    org = ["--org", str(WELL_KNOWN.parent.parent)]  # each person's signed decision is checked against the cards
    # Claude Desktop cannot sign: the coordinator it starts holds the agent's (TEST-ONLY) key and signs each plan
    # as the agent its Directory-signed card names, for the person the card names (HATP-TXN-21)
    agent = ["--agent-key", str(AGENT_KEY)]
    gw = ["--gateway", gateway, "--gateway-keys", str(WELL_KNOWN), "--gateway-id", GATEWAY_ID]
    return [*args, *gw, *org, *agent, "--id", COORDINATOR_ID]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", default=str(Path.home() / ".hatp"), help="parent of each server's data directory")
    p.add_argument("--python", default=sys.executable, help="the interpreter that has hatp-mcp installed")
    p.add_argument("--only", action="append", choices=SERVERS, help="include only these servers (repeatable)")
    p.add_argument("--org", help="an organisation dir made by hatp init-org: its block, one gateway, no test keys")
    p.add_argument("--agent", help="with --org: the agent (private/agents/NAME) the coordinator signs plans as")
    p.add_argument(
        "--direct",
        action="store_true",
        help="with --org: the block whose servers the client itself starts over stdio (no service)",
    )


def config(data: Path, python: str, names: tuple[str, ...] = SERVERS) -> dict[str, Any]:
    servers: dict[str, Any] = {}
    for name in names:
        servers[f"hatp-{name}"] = {
            "command": str(Path(python).absolute()),
            "args": ["-m", f"servers.{name}", "--transport", "stdio", "--data", str((data / name).absolute())]
            + (coordinator_args(data) if name == "coordinator" else [])
            + (["--no-signing-tools"] if name == "gateway" else []),  # the chat app cannot sign (HATP-MCP-57)
            "cwd": str(ROOT),
            "env": {"PYTHONPATH": str(ROOT)},
        }
    return {"mcpServers": servers}


def _refuse(reason: str, fix: str, path: str = "$") -> HatpError:
    return HatpError("HATP-MCP-35", reason, path=path, fix=fix, code="BAD_SUITE")


def _agent_key(layout: OrgLayout, agent: str | None) -> Path:
    keys = sorted(layout.agent_keys.glob("*.private.jwk.json"))
    if agent is not None:
        keys = [k for k in keys if k.name == f"{agent}.private.jwk.json"]
    if len(keys) != 1:
        found = ", ".join(k.name.removesuffix(".private.jwk.json") for k in keys) or "none"
        raise _refuse(
            f"the coordinator signs plans as one agent of the organisation (HATP-TXN-21); agents found: {found}",
            "add one: hatp card agent --org DIR NAME --acts-for PERSON (or choose with --agent NAME)",
        )
    return keys[0]


def _require(path: Path, what: str, fix: str) -> str:
    if not path.exists():
        raise _refuse(f"{path} is missing: {what}", fix)
    return str(path)


@dataclass(frozen=True)
class OrgParts:
    """What every server of an organisation is started with, checked once (see org_parts)."""

    layout: OrgLayout
    suite: Suite
    well_known: str
    gateway_key: str
    agent_key: str


def org_parts(root: Path, agent: str | None = None) -> OrgParts:
    """The checked parts of the organisation at `root`. Reads only. Raises HatpError HATP-MCP-35 (not an
    organisation made by hatp init-org, a TEST-ONLY key, no agent, a missing key or pin)."""
    layout = OrgLayout(root.absolute())
    suite = load_suite(layout.root)
    well_known = _require(layout.well_known, "the well-known document", "make the organisation with hatp init-org")
    if b"test-only" in Path(well_known).read_bytes():
        raise _refuse(
            f"{well_known} publishes a TEST-ONLY key: the acme.com test organisation is for demos and tests",
            "make your own: hatp init-org DIR --name example.org",
        )
    init = "it is made by hatp init-org; make the organisation again (init-org DIR2) or restore the file"
    gateway_key = _require(layout.gateway_key, "the gateway's key", init)
    _require(layout.data("coordinator") / "key.jwk.json", "the coordinator's key", init)
    for p in suite.participants:
        _require(p.keys, f"the pinned keys of {p.uri}", f"pin them: hatp trust add {p.keys} {p.uri}=KEYFILE")
    return OrgParts(layout, suite, well_known, gateway_key, str(_agent_key(layout, agent)))


def gateway_args(parts: OrgParts) -> list[str]:
    """The gateway's arguments beside its transport: its store, the organisation, its key, the web inbox."""
    suite = parts.suite
    return [
        *("--data", str(parts.layout.data("gateway")), "--org", str(parts.layout.root), "--key", parts.gateway_key),
        *(("--inbox-port", str(suite.inbox_port)) if suite.inbox_port is not None else ()),
    ]


def coordinator_org_args(parts: OrgParts, participants: dict[str, str], gateway_url: str) -> list[str]:
    """The coordinator's arguments beside its transport: `participants` maps each participant's uri to its
    target (a stdio child or a URL)."""
    links = []
    for p in parts.suite.participants:
        links += [f"--participant={p.uri}={participants[p.uri]}", f"--participant-keys={p.uri}={p.keys}"]
    return [
        *("--data", str(parts.layout.data("coordinator")), *links),
        *("--gateway", gateway_url, "--gateway-keys", parts.well_known, "--gateway-id", parts.suite.gateway_id),
        *("--org", str(parts.layout.root), "--agent-key", parts.agent_key, "--id", parts.suite.coordinator_id),
    ]


def agent_name(parts: OrgParts) -> str:
    """The organisation's agent the coordinator signs plans as (private/agents/NAME.private.jwk.json)."""
    return Path(parts.agent_key).name.removesuffix(".private.jwk.json")


def agent_id(parts: OrgParts) -> str:
    """The agent's address, from its Directory-signed card (agents/NAME.json). Raises HatpError HATP-MCP-35 when
    the card is missing or names no id."""
    card = parts.layout.agents / f"{agent_name(parts)}.json"
    try:
        doc = read_json_file(card)
    except (OSError, ValueError) as exc:
        raise _refuse(f"{card}: the agent's card cannot be read ({exc})", "make it: hatp card agent --org DIR") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("id"), str):
        raise _refuse(f"{card}: the agent's card names no id", "make it again: hatp card agent --org DIR")
    return str(doc["id"])


def client_token_file(parts: OrgParts) -> Path:
    """The service's client token (HATP-MCP-49): DIR/private/clients/NAME.token for the organisation's agent, a
    bearer token made once (0600, in a 0700 folder; the first writer wins), which the bridge sends and the
    coordinator's callers file holds only the digest of. Raises OSError for IO."""
    path = parts.layout.private / "clients" / f"{agent_name(parts)}.token"
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    create_file(path, secrets.token_urlsafe(32) + "\n")
    return path


def journal_allow(parts: OrgParts) -> Path | None:
    allow = parts.layout.root / "journal-allow.json"
    return allow if allow.exists() else None


def direct_config(root: Path, python: str, agent: str | None = None) -> dict[str, Any]:
    """The block for the organisation at `root` whose servers the client itself starts over stdio (see the module
    docstring). Reads only. Raises HatpError HATP-MCP-35 (as org_parts)."""
    parts = org_parts(root, agent)
    layout, suite = parts.layout, parts.suite
    exe = str(Path(python).absolute())

    def entry(module: str, args: list[str]) -> dict[str, Any]:
        return {"command": exe, "args": ["-m", module, "--transport", "stdio", *args]}

    participants = {p.uri: f"stdio:{p.module}:{p.data}" for p in suite.participants}
    gateway_url = f"http://127.0.0.1:{suite.gateway_mcp_port}/mcp"
    servers: dict[str, Any] = {
        "hatp-gateway": entry(
            "servers.gateway", [*gateway_args(parts), "--mcp-port", str(suite.gateway_mcp_port), "--no-signing-tools"]
        ),
        "hatp-coordinator": entry("servers.coordinator", coordinator_org_args(parts, participants, gateway_url)),
        "hatp-directory": entry("servers.directory", ["--org", str(layout.root)]),
    }
    allow = journal_allow(parts)
    if allow is not None:
        servers["hatp-journal"] = entry(
            "servers.journal", ["--data", str(layout.data("journal")), "--allow", str(allow)]
        )
    for w in suite.wrapped:  # the proxy in front of a third-party server, over stdio (HATP-MCP-58)
        servers[f"hatp-{w.name}"] = entry("servers.journal_proxy", ["--data", str(w.data), "--policy", str(w.policy)])
    return {"mcpServers": servers}


def org_config(root: Path, python: str, agent: str | None = None) -> dict[str, Any]:
    """The block for the organisation at `root` served by `hatp serve` (HATP-MCP-45): `mcpServers`, for clients
    that start a command, runs `hatp connect NAME` (the stdio bridge, which starts the service when it is not
    running); `httpServers`, for clients that take a URL, names each server's streamable HTTP endpoint on
    127.0.0.1 (a server whose port suite.json leaves to the service has none: use its bridge). Reads only.
    Raises HatpError HATP-MCP-35 (as org_parts)."""
    parts = org_parts(root, agent)
    exe = str(Path(python).absolute())
    root_arg = str(parts.layout.root)
    wrapped = {w.name: w.port or 0 for w in parts.suite.wrapped}  # the proxies of third-party servers (HATP-MCP-58)
    names = [*SERVICE_SERVERS, *(("journal",) if journal_allow(parts) is not None else ()), *wrapped]
    bridges: dict[str, Any] = {}
    urls: dict[str, Any] = {}
    ports = service_ports(parts.suite) | wrapped
    for name in names:
        args = ["-m", "hatp_mcp.cli", "connect", name, "--org", root_arg]
        if agent is not None:
            args += ["--agent", agent]
        bridges[f"hatp-{name}"] = {"command": exe, "args": args}
        if ports.get(name):
            urls[f"hatp-{name}"] = {"type": "http", "url": f"http://127.0.0.1:{ports[name]}/mcp"}
            if name in ("coordinator", "gateway") or name in wrapped:  # HATP-MCP-49, HATP-MCP-59, HATP-GW-89
                urls[f"hatp-{name}"]["tokenFile"] = str(parts.layout.private / "clients" / f"{agent_name(parts)}.token")
    return {"mcpServers": bridges, "httpServers": urls}


def service_ports(suite: Suite) -> dict[str, int]:
    """Each service child's fixed port from suite.json (0: the service picks one at start)."""
    return {
        "gateway": suite.gateway_mcp_port,
        "coordinator": suite.coordinator_mcp_port or 0,
        "directory": suite.directory_mcp_port or 0,
    }


def run(args: argparse.Namespace) -> int:
    if args.org is not None:
        if args.only:
            return fail("--only is for the test suite's block; --org prints the organisation's whole block")
        try:
            make = direct_config if args.direct else org_config
            block = make(Path(args.org).expanduser(), args.python, args.agent)
        except HatpError as exc:
            return fail(exc.one_line(), EXIT_PROBLEMS)
        except OSError as exc:
            return fail(f"{args.org}: {exc.strerror or exc}", EXIT_BAD_INPUT)
        print_json(block)
        return EXIT_OK
    print(
        "hatp mcp-config: this block uses the TEST-ONLY organisation acme.com (spec/fixtures/org and its "
        "test-only-keys/), for demos and tests only; for your own: hatp init-org DIR, then hatp mcp-config --org DIR",
        file=sys.stderr,
    )
    # by default only the servers this checkout has (the coordinator, gateway and directory land separately)
    names = tuple(args.only) if args.only else tuple(n for n in SERVERS if (ROOT / "servers" / f"{n}.py").exists())
    data = Path(args.data).expanduser()
    try:
        written = trust_setup(data.absolute(), names)
    except (OSError, ValueError) as exc:
        return fail(f"cannot set up the coordinator's trust under {data}: {exc}", EXIT_BAD_INPUT)
    for path in written:
        print(f"trusts {COORDINATOR_ID}: {path}", file=sys.stderr)
    print_json(config(data, args.python, names))
    return EXIT_OK
