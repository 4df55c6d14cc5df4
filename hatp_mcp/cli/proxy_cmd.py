"""`hatp proxy`: the operator's side of the proxy (servers/journal_proxy.py, spec/proxy.md).

- `hatp proxy sagas --data DIR`: the sagas a proxy's journal holds open (a restart leaves them open, HATP-PXY-9),
  each with its steps, for the model or the operator to complete or roll back;
- `hatp proxy dead-letters --data DIR`: every dead letter, with the reason its step was left for a person
  (HATP-PXY-10);
- `hatp proxy shadow --data DIR`: what the proxy in shadow mode let through that its policy would have refused,
  each with the rule (HATP-PXY-40);
- `hatp proxy status --data DIR`: the policy in force and the last changed policy file refused, with the rule and
  the fix (HATP-PXY-43);
- `hatp proxy end SAGA --data DIR --policy FILE --complete|--rollback`: the operator ends an open saga while no
  proxy runs on DIR (HATP-PXY-13): completed as it stands, or rolled back through the policy's upstream;
- `hatp proxy check FILE [--data DIR] [--key FILE] [--trusted-coordinators [ID=]FILE]`: a policy file checked
  against its live upstream, as the proxy checks it at start, without serving anything (HATP-PXY-11), and its
  participant side (the key's role, the trust list there and parseable, HATP-PXY-64) without writing anything;
- `hatp proxy init --claude-config FILE --out DIR [--org DIR]`: a starter policy per server of a Claude Desktop
  config, from each server's tool annotations (destructive tools gated, approved by the organisation's approver,
  HATP-PXY-70), and a new config that runs each server through the proxy (HATP-PXY-12).

`sagas` and `dead-letters` read the journal's store as it is (`--store`, default `sqlite:DIR/journal.db`), without
changing it; a running proxy may hold it open. The sagas' records are checked by `hatp verify`, not here. `check`
and `init` start upstream servers, so they import the MCP SDK, inside their run only.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

from hatp_mcp.cli._run import EXIT_BAD_INPUT, EXIT_OK, EXIT_PROBLEMS, InputError, fail, print_json, read_json
from hatp_mcp.core.journal.machine import SagaMachine
from hatp_mcp.errors import HatpError
from hatp_mcp.store.url import StoreUrl, open_journal_store

START_BOUND = 30.0
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def add_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="proxy_command", required=True)
    for name, help_text in (
        ("sagas", "the sagas left open (a restart undoes nothing): complete or roll them back through the proxy"),
        ("dead-letters", "the steps left for a person, each with the reason"),
    ):
        q = sub.add_parser(name, help=help_text, description=help_text)
        q.add_argument("--data", required=True, help="the proxy's --data folder")
        q.add_argument("--store", help="the proxy's --store, when it is not sqlite:DATA/journal.db")
    for name, help_text in (
        ("shadow", "what shadow mode let through that the policy would have refused, with the rule"),
        ("status", "the policy in force and the last changed file refused, with the reason"),
    ):
        q = sub.add_parser(name, help=help_text, description=help_text)
        q.add_argument("--data", required=True, help="the proxy's --data folder")
    end = sub.add_parser("end", help="complete or roll back an open saga while no proxy runs on --data")
    end.add_argument("saga_id", help="the open saga (hatp proxy sagas lists them)")
    end.add_argument("--data", required=True, help="the proxy's --data folder")
    end.add_argument("--store", help="the proxy's --store, when it is not sqlite:DATA/journal.db")
    end.add_argument("--policy", required=True, help="the proxy's policy file: its upstream undoes a rollback")
    how = end.add_mutually_exclusive_group(required=True)
    how.add_argument("--complete", action="store_true", help="keep every step")
    how.add_argument("--rollback", action="store_true", help="undo the steps, last first")
    end.add_argument("--reason", default="rolled back by the operator")
    end.add_argument("--start-timeout", type=float, default=START_BOUND, metavar="SECONDS")
    check = sub.add_parser("check", help="check a policy file against its live upstream, serving nothing")
    check.add_argument("policy", help="the policy file (spec/proxy.md)")
    check.add_argument("--data", help="the proxy's --data: where its participant key and trust list are")
    check.add_argument("--key", metavar="FILE", help="the proxy's --key (the participant's key), if it has one")
    check.add_argument("--trusted-coordinators", metavar="[ID=]FILE", help="the proxy's --trusted-coordinators")
    check.add_argument("--start-timeout", type=float, default=START_BOUND, metavar="SECONDS")
    init = sub.add_parser("init", help="starter policies and a proxied config from a Claude Desktop config")
    init.add_argument("--claude-config", required=True, help="claude_desktop_config.json ({mcpServers: ...})")
    init.add_argument("--out", required=True, help="the folder to write: NAME/policy.json per server, the config")
    init.add_argument(
        "--org", help="the organisation dir: its approver becomes each gated tool's approver, and the proxy's --org"
    )
    init.add_argument("--python", default=sys.executable, help="the interpreter that has hatp-mcp installed")
    init.add_argument("--start-timeout", type=float, default=START_BOUND, metavar="SECONDS")


def _store_url(args: argparse.Namespace) -> StoreUrl:
    """Raises ValueError: a bad --store, or no journal under --data (nothing is created)."""
    if args.store:
        return StoreUrl.parse(args.store)
    path = Path(args.data) / "journal.db"
    if not path.is_file():
        raise ValueError(f"{path}: no proxy journal here; give the proxy's --data folder (or its --store)")
    return StoreUrl.sqlite(path)


async def _sagas(url: StoreUrl) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    async with open_journal_store(url) as store:
        for sid in await store.unfinished():
            stored = await store.load(sid)
            if stored is None:  # pragma: no cover - listed as unfinished, then gone
                continue
            entries = [(e["event"], e["body"]) for e in stored.events]
            machine = SagaMachine.replay(sid, entries)
            out.append(
                {
                    "sagaId": sid,
                    "name": stored.name,
                    "status": machine.status.value,
                    "recovered": any(event == "saga.recovered" for event, _ in entries),
                    "steps": [
                        {"stepId": s.step_id, "tool": s.tool, "state": s.state.value, "args": s.args}
                        for s in machine.steps
                    ],
                }
            )
    return out


async def _dead_letters(url: StoreUrl) -> list[dict[str, Any]]:
    async with open_journal_store(url) as store:
        return [{"id": row.id, **row.entry} for row in await store.dead_letters()]


def _shadow(data: Path) -> list[dict[str, Any]]:
    """The shadow log's entries, oldest first (HATP-PXY-40). Raises ValueError where no proxy keeps one."""
    from hatp_mcp.store.shadow_log import ShadowLog

    path = data / "shadow.db"
    if not path.is_file():
        raise ValueError(f"{path}: no shadow log here; give the proxy's --data folder")
    log = ShadowLog(path)
    try:
        return log.entries()
    finally:
        log.close()


def _status(data: Path) -> dict[str, Any]:
    """DATA/policy-status.json: the policy in force, and the last changed file refused (HATP-PXY-43). Raises
    ValueError where no proxy wrote it."""
    path = data / "policy-status.json"
    if not path.is_file():
        raise ValueError(f"{path}: no policy status here; give the --data folder of a proxy started with --policy")
    status: dict[str, Any] = json.loads(path.read_text())
    return status


def _check(path: Path, bound: float, args: argparse.Namespace) -> dict[str, Any]:
    """Each upstream tool's action under the file at `path`, checked as the proxy does at start, and its
    participant side (HATP-PXY-64) when it has one. Raises HatpError (HATP-PXY-1 to 6, 31, 38, 63 to 65)."""
    from hatp_mcp.core.journal.proxy_tools import resolve_tools
    from hatp_mcp.errors import HatpError
    from hatp_mcp.mcp.journal_proxy import proxy_names_free, upstream_tools
    from hatp_mcp.mcp.proxy_participant import check_participant
    from hatp_mcp.mcp.proxy_upstream import read_policy, upstream_target

    policy = read_policy(path)
    tools = anyio.run(_listed, upstream_target(policy, path.parent), bound)
    try:
        proxy_names_free(tools)
    except ValueError as exc:
        fix = "proxy another server: the proxy adds the saga tools under these names"
        raise HatpError("HATP-PXY-4", str(exc), path="upstream", code="NAME_CLASH", fix=fix) from None
    rules = resolve_tools(policy, upstream_tools(tools))
    out: dict[str, Any] = {"tools": {name: rule.action for name, rule in rules.items()}}
    data = Path(args.data) if args.data else None
    side = check_participant(data, policy, rules, Path(args.key) if args.key else None, args.trusted_coordinators)
    if side is not None:
        out["participant"] = side
    return out


async def _listed(target: Any, bound: float) -> list[Any]:
    """The upstream's tools (HATP-PXY-4, bounded); its stderr kept in a file named by the refusal, else removed."""
    from hatp_mcp.errors import HatpError
    from hatp_mcp.mcp.proxy_upstream import list_upstream

    fd, name = tempfile.mkstemp(prefix="hatp-upstream-", suffix=".stderr")
    with os.fdopen(fd, "w") as errlog:
        try:
            tools = await list_upstream(target, bound, errlog)
        except HatpError as exc:
            exc.fix = f"check upstream.command, args and cwd (or url); its stderr is in {name}"
            raise
    os.unlink(name)
    return tools


def _end(args: argparse.Namespace) -> dict[str, Any]:
    """End one open saga as the proxy would (HATP-PXY-13). Raises HatpError (HATP-PXY-1 to 6 for the policy and
    the upstream, HATP-PXY-10 for a saga that is unknown or not open, HATP-JRN-12 for a record that does not
    verify), DataLocked while a proxy runs on --data, ValueError when the folder holds no proxy key."""
    from hatp_mcp.mcp.journal_proxy import LOCK
    from hatp_mcp.mcp.proxy_upstream import read_policy, upstream_target
    from hatp_mcp.store.data_lock import data_lock

    data = Path(args.data)
    url = _store_url(args)
    if not (data / "key.jwk.json").is_file():
        raise ValueError(f"{data}: no proxy key here (key.jwk.json); give the proxy's --data folder")
    path = Path(args.policy).absolute()
    policy = read_policy(path)
    target = upstream_target(policy, path.parent)
    with data_lock(data, LOCK), open(os.devnull, "w") as errlog:
        return anyio.run(_ended, args, data, url, policy, target, errlog)


async def _ended(
    args: argparse.Namespace, data: Path, url: StoreUrl, policy: Any, target: Any, errlog: Any
) -> dict[str, Any]:
    from hatp_mcp.mcp.journal_proxy import RECOVERY_POLICY, JournalingProxy, require_open, saga_status
    from hatp_mcp.mcp.proxy_upstream import upstream_client
    from hatp_mcp.runtime.journal.driver import Journal
    from hatp_mcp.store.files import load_or_create_key
    from hatp_mcp.store.step_rules import StepRules

    key = load_or_create_key(data, ["journal"])
    async with open_journal_store(url) as store:
        journal = Journal(store, key, author="journal-proxy://" + data.name, policy=RECOVERY_POLICY)
        saga = require_open(await journal.get(args.saga_id), "hatp proxy sagas --data DIR lists the open ones")
        if args.complete:
            await saga.complete()
            return await saga_status(journal, saga)
        tools = await _listed(target, args.start_timeout)  # the start bounded (HATP-PXY-4)
        rules = StepRules.open(data / "step-rules.db")  # kept by an older proxy (HATP-PXY-44)
        try:
            async with upstream_client(target, errlog) as upstream:  # (its stderr was kept by the listing's refusal)
                JournalingProxy(upstream, tools, journal, policy, step_rules=rules)  # its undos and lookups
                await saga.rollback(args.reason)
                return await saga_status(journal, saga)
        finally:
            if rules is not None:
                rules.close()


def starter_action(read_only: bool | None, destructive: bool | None) -> str:
    """A tool's starter policy from its annotations (HATP-PXY-12, 70): read-only is passed; a write the server says
    is not destructive is `irreversible` (allowed, the model told it cannot be undone); any other write, destructive
    by MCP's default, is gated: it runs only once a person approves exactly that call. Nothing is journaled: no
    undo is known."""
    if read_only:
        return "pass"
    if destructive is False:
        return "irreversible"
    return "gate"


def approver_of(org: Path | None) -> str:
    """Who approves the starter policy's gated calls (HATP-PXY-70): the organisation's finance-approver role where
    a card holds it, else another approver role, else its first person; with no organisation (or no card in it) the
    placeholder every policy check refuses until it is set (HATP-PXY-71), never an address that passes. Raises
    OSError, ValueError, HatpError for an organisation that cannot be read."""
    from hatp_mcp.core.model.proxy_policy import APPROVER_PLACEHOLDER
    from hatp_mcp.runtime.org import load_directory

    if org is None:
        return APPROVER_PLACEHOLDER
    directory, _ignored = load_directory(org)
    cards = directory.cards()
    if not cards:
        return APPROVER_PLACEHOLDER
    domain = cards[0].id.removeprefix("human://").split("/", 1)[0]
    roles = sorted({r for c in cards for r in c.roles if "approver" in r})
    if roles:
        role = "finance-approver" if "finance-approver" in roles else roles[0]
        return f"human://{domain}/role/{role}"
    return cards[0].id


def _init(args: argparse.Namespace) -> int:
    from mcp import StdioServerParameters

    from hatp_mcp.errors import HatpError

    doc = read_json(args.claude_config)
    servers = doc.get("mcpServers") if isinstance(doc, dict) else None
    if not isinstance(servers, dict):
        raise InputError(f"{args.claude_config}: no mcpServers object (Claude Desktop's config format)")
    out = Path(args.out).absolute()
    python = str(Path(args.python).absolute())
    org = Path(args.org).absolute() if args.org else None
    try:
        approver = approver_of(org)
    except (OSError, ValueError, HatpError) as exc:
        raise InputError(f"--org {args.org}: not an organisation folder ({exc})") from None
    config: dict[str, Any] = {}
    summary: dict[str, Any] = {}
    problems = 0
    for name, entry in servers.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("command"), str) or not _NAME.match(name):
            print(f"hatp: {name}: not a stdio server entry with a plain name: kept as it was", file=sys.stderr)
            config[name] = entry
            problems += 1
            continue
        folder = out / name
        if (folder / "policy.json").exists():
            raise InputError(f"{folder / 'policy.json'} exists: init never overwrites a policy; choose another --out")
        env = {str(k): str(v) for k, v in (entry.get("env") or {}).items()}
        argv = [str(a) for a in entry.get("args") or []]
        target = StdioServerParameters(command=entry["command"], args=argv, env=env, cwd=str(Path.cwd()))
        try:
            tools = anyio.run(_listed, target, args.start_timeout)
        except HatpError as exc:
            print(f"hatp: {name}: {exc.one_line()}: kept as it was", file=sys.stderr)
            config[name] = entry
            problems += 1
            continue
        policy = _starter(folder, entry["command"], argv, env, tools, approver)
        config[name] = {
            "command": python,
            "args": [
                *("-m", "servers.journal_proxy", "--transport", "stdio"),
                *("--data", str(folder / "data"), "--policy", str(folder / "policy.json")),
                *(("--org", str(org)) if org is not None else ()),
            ],
        }
        summary[name] = {t: p["policy"] for t, p in policy["tools"].items()}
    out.mkdir(parents=True, exist_ok=True)
    (out / "claude_desktop_config.json").write_text(json.dumps({**doc, "mcpServers": config}, indent=2) + "\n")
    print_json(summary)
    return EXIT_PROBLEMS if problems else EXIT_OK


def _starter(
    folder: Path, command: str, argv: list[str], env: dict[str, str], tools: list[Any], approver: str
) -> dict[str, Any]:
    """Write `folder/policy.json` (a gated tool approved by `approver`, for the action `NAME.TOOL`) and, for each
    variable of the server's env, an owner-only file `env/NAME` the policy names (a key cannot be told from a
    setting, so no value is copied into the policy)."""
    folder.mkdir(parents=True, exist_ok=True)
    named: dict[str, Any] = {}
    if env:
        (folder / "env").mkdir(mode=0o700, exist_ok=True)
    for var, value in env.items():
        fd = os.open(folder / "env" / var, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(value)
        named[var] = {"file": f"env/{var}"}
    per_tool: dict[str, Any] = {}
    for t in tools:
        a = t.annotations
        action = starter_action(a.read_only_hint if a else None, a.destructive_hint if a else None)
        per_tool[t.name] = {"policy": action}
        if action == "gate":  # HATP-PXY-70: who approves, and for what
            per_tool[t.name]["gate"] = {"address": approver, "action": f"{folder.name}.{t.name}"}
    policy = {
        "upstream": {"command": command, "args": argv, "env": named, "cwd": str(Path.cwd())},
        "default": "deny",
        "tools": per_tool,
    }
    (folder / "policy.json").write_text(json.dumps(policy, indent=2) + "\n")
    (folder / "README.md").write_text(starter_readme(folder.name, tools, approver))
    return policy


def starter_readme(name: str, tools: list[Any], approver: str) -> str:
    """`DIR/NAME/README.md` beside a starter policy: how to edit it, and how to make a tool a transaction participant
    (HATP-PXY-64). `init` offers no participant entry itself: which undo, lookup or hold tools fit is the user's
    call, and an entry must name them."""
    writes = [t for t in tools if not (t.annotations and t.annotations.read_only_hint)]
    reads = [t.name for t in tools if t.annotations and t.annotations.read_only_hint]
    example = writes[0].name if writes else "TOOL"
    from hatp_mcp.core.model.proxy_policy import APPROVER_PLACEHOLDER

    marked = sorted(t.name for t in writes if t.annotations and t.annotations.idempotent_hint)
    gated = [t.name for t in writes if not (t.annotations and t.annotations.destructive_hint is False)]
    if APPROVER_PLACEHOLDER in approver:
        who = (
            f"Each gate's `address` is `{approver}`, which names nobody: the proxy and `hatp proxy check` refuse the "
            "file (HATP-PXY-71) until you set it to who approves, a person (`human://ORG/NAME`) or a role "
            "(`human://ORG/role/ROLE`), and run the proxy with `--org DIR` (`hatp proxy init --org DIR` fills both)."
        )
    else:
        who = f"Each gate's `address` is `{approver}`, taken from the organisation given with `--org`; change it there."
    return f"""# The starter policy of {name}

`policy.json` was written by `hatp proxy init` from the server's tool annotations: read-only tools `pass`, a write
the server marks not destructive `irreversible`, every other write `gate`: it runs only once a person approves
exactly that call ({", ".join(gated) or "none here"}). Nothing is journaled, since no undo is known. Edit it, then
check it against the live server with `hatp proxy check policy.json` (spec/proxy.md).

## Who approves

{who} Each gate's `action` (`{name}.TOOL`) is what the approvers' cards' authority must cover. A tool you give an
undo can be `journal` instead; one you trust, `pass` or `irreversible`.

## A tool as a transaction participant

`init` never makes a tool a participant: you choose the calls that undo it and tell whether it happened. To let a
HATP coordinator commit `{example}` in a transaction, name the proxy's participant identity and give the tool
policy `participant` (tiers: `compensate` with an `undo`, `final`, or `hold` with the server's own `confirm` and
`release` tools):

    "participant": {{"uri": "mcp://{name}.example/hatp"}},
    "tools": {{
      "{example}": {{"policy": "participant", "participant": {{
        "tier": "compensate",
        "undo": {{"tool": "UNDO_TOOL", "arguments": {{"ARG": "result.FIELD"}}}},
        "lookup": {{"tool": "READ_TOOL", "arguments": {{"ARG": "args.FIELD"}}, "happened": "EXPRESSION"}}}}}}
    }}

Arguments are JMESPath expressions over `{{"args": <the call's arguments>, "result": <its result>}}`. A `lookup`
(a read tool{": " + ", ".join(reads[:6]) if reads else ""}) says after a crash whether the call happened; it is
required unless the server marks the tool `idempotentHint` (here: {", ".join(marked) or "none of its writes"}).
Run the proxy with `--trusted-coordinators FILE` (the coordinators it acts for) and optionally `--key FILE` (its
own signing key, mode 0600), and check all of it with `hatp proxy check policy.json --data DATA
--trusted-coordinators FILE`.
"""


def run(args: argparse.Namespace) -> int:
    from hatp_mcp.errors import HatpError as Refusal

    if args.proxy_command == "check":
        try:
            print_json(_check(Path(args.policy).absolute(), args.start_timeout, args))
        except Refusal as exc:
            return fail(exc.one_line(), EXIT_BAD_INPUT)
        return EXIT_OK
    if args.proxy_command == "end":
        from hatp_mcp.store.data_lock import DataLocked

        try:
            ended = _end(args)
        except DataLocked as exc:
            return fail(f"HATP-PXY-13: {exc}: a proxy runs on {args.data}; end the saga through its saga tools")
        except Refusal as exc:
            return fail(exc.one_line())
        except (OSError, ValueError) as exc:
            return fail(str(exc))
        print_json(ended)
        return EXIT_PROBLEMS if ended["status"] == "ROLLBACK_FAILED" else EXIT_OK
    if args.proxy_command == "shadow":
        try:
            print_json(_shadow(Path(args.data)))
        except (OSError, ValueError) as exc:
            return fail(str(exc))
        return EXIT_OK
    if args.proxy_command == "status":
        try:
            status = _status(Path(args.data))
        except (OSError, ValueError) as exc:
            return fail(str(exc))
        print_json(status)
        return EXIT_PROBLEMS if "refused" in status else EXIT_OK
    if args.proxy_command == "init":
        try:
            return _init(args)
        except InputError as exc:
            return fail(str(exc))
        except OSError as exc:
            return fail(f"cannot write under {args.out}: {exc}")
    try:
        url = _store_url(args)
        if args.proxy_command == "sagas":
            print_json(anyio.run(_sagas, url))
        else:
            print_json(anyio.run(_dead_letters, url))
    except (OSError, ValueError) as exc:
        return fail(str(exc))
    except HatpError as exc:
        return fail(exc.one_line())
    return EXIT_OK
