"""An organisation directory as `hatp init-org` lays it out, and making one (spec/mcp-binding.md HATP-MCP-35..37).

```
DIR/.well-known/human-card.json   the organisation's public document: its Directory's and Gateway's public keys
DIR/cards/                        Directory-signed Human Cards (`hatp card person`); empty at first
DIR/agents/                       Directory-signed agent cards (`hatp card agent`); empty at first
DIR/contacts.json                 the gateway's private contact book (0600), never in a card or a message
DIR/gateway.json                  the gateway's settings (HATP-GW-65): no delivery channel until the operator
                                  adds one; with the web inbox on, its URL and passkey relying party (localhost)
DIR/suite.json                    how `hatp serve` and `hatp mcp-config --org` start the servers: ids, ports,
                                  participants, and the third-party servers wrapped by the proxy (`wrapped`,
                                  `hatp org wrap`: each a proxy policy file, spec/proxy.md HATP-PXY-51)
DIR/data/service/                 `hatp serve`'s lock, status.json and logs/ (made by the service)
DIR/private/                      (0700) directory.private.jwk.json, gateway.private.jwk.json, agents/ (0600)
DIR/trust/                        the participants' public keys the coordinator pins (HATP-MCP-27, -37)
DIR/data/<server>/                each server's --data: its own key (made here, once), state, trust list
```

The same readers as everywhere else read it (hatp_mcp.runtime.org: the well-known, cards and agents; the gateway's
`load_org` and `load_settings`), so a directory made here is an organisation to the gateway, the Directory, the
coordinator and `hatp verify --org` alike. Every key is made here, by the operator's step, and pinned where it is
trusted: the coordinator's key in each receiver's `trusted-coordinators.json`, each tool server's key in
`trust/`; no server rewrites any of them at start (HATP-MCP-34). The directory is built beside its target and
renamed into place in one step, so it is there whole or not at all, and an organisation already there is never
overwritten (HATP-MCP-36).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from hatp_mcp.core.model.example_plan import AIRLINE, CALENDAR, HOTEL, PAYMENTS
from hatp_mcp.core.signing.keys import Keyring, PublicKeyEntry, SigningKey
from hatp_mcp.errors import HatpError
from hatp_mcp.runtime.coordinator_trust import write_trust_list
from hatp_mcp.store.files import create_file, load_or_create_key, read_json_file, replace_file
from hatp_mcp.store.pin_file import add_pins, read_pins

__all__ = [
    "DEMO_PARTICIPANTS",
    "RESERVED_NAMES",
    "WRAPPED_NAME",
    "OrgLayout",
    "Participant",
    "Suite",
    "Wrapped",
    "init_org",
    "load_suite",
    "org_keyring",
    "wrap_server",
]

# A wrapped server's name: what `hatp connect NAME` and the `hatp-NAME` entries of `hatp mcp-config` call it
WRAPPED_NAME = r"^[a-z][a-z0-9-]{0,39}$"
# The service's own children, which no wrapped server may be named as (their logs, status and bridges are by name)
RESERVED_NAMES = frozenset({"gateway", "coordinator", "directory", "journal", "service"})

# The package's demo tool servers (servers/airline.py, ...): in-memory-like inventories behind .example URIs, what
# the example plan books. A real organisation lists its own participants in suite.json instead.
DEMO_PARTICIPANTS = {"airline": AIRLINE, "hotel": HOTEL, "calendar": CALENDAR, "payments": PAYMENTS}


@dataclass(frozen=True)
class OrgLayout:
    """Where each file of an organisation directory is."""

    root: Path

    @property
    def well_known(self) -> Path:
        return self.root / ".well-known" / "human-card.json"

    @property
    def cards(self) -> Path:
        return self.root / "cards"

    @property
    def agents(self) -> Path:
        return self.root / "agents"

    @property
    def contacts(self) -> Path:
        return self.root / "contacts.json"

    @property
    def gateway_settings(self) -> Path:
        return self.root / "gateway.json"

    @property
    def suite(self) -> Path:
        return self.root / "suite.json"

    @property
    def private(self) -> Path:
        return self.root / "private"

    @property
    def directory_key(self) -> Path:
        return self.private / "directory.private.jwk.json"

    @property
    def gateway_key(self) -> Path:
        return self.private / "gateway.private.jwk.json"

    @property
    def agent_keys(self) -> Path:
        return self.private / "agents"

    @property
    def trust(self) -> Path:
        return self.root / "trust"

    def data(self, server: str) -> Path:
        return self.root / "data" / server


@dataclass(frozen=True)
class Participant:
    uri: str
    module: str  # started by the coordinator as its stdio child: python -m MODULE --data DATA
    data: Path
    keys: Path  # the pin file of its public keys (HATP-MCP-27)


@dataclass(frozen=True)
class Wrapped:
    """A third-party MCP server the service runs behind the proxy (`servers.journal_proxy --policy POLICY`): the
    policy file names its upstream (a command or a URL) and each tool's policy (spec/proxy.md HATP-PXY-51)."""

    name: str
    policy: Path
    data: Path  # the proxy's --data: its journal, key and lock
    port: int | None  # its fixed port on 127.0.0.1; None: one picked at start


@dataclass(frozen=True)
class Suite:
    """`suite.json`: what `hatp mcp-config --org` needs beyond the organisation's documents."""

    organization: str
    coordinator_id: str
    gateway_id: str
    gateway_mcp_port: int  # the one gateway process's MCP port on 127.0.0.1, the coordinator's link (HATP-MCP-35)
    inbox_port: int | None  # the web inbox on localhost; None: off
    participants: tuple[Participant, ...]
    # `hatp serve`'s fixed ports on 127.0.0.1 for clients that take a URL (HATP-MCP-45); None: one picked at start
    coordinator_mcp_port: int | None = None
    directory_mcp_port: int | None = None
    wrapped: tuple[Wrapped, ...] = ()


def _bad_suite(path: Path, where: str, reason: str) -> HatpError:
    return HatpError(
        "HATP-MCP-35",
        f"{path}: {reason}",
        path=where,
        fix="make the organisation with hatp init-org DIR (or fix suite.json as hatp init-org writes it)",
        code="BAD_SUITE",
    )


def load_suite(root: Path) -> Suite:
    """The suite settings of the organisation at `root`; relative paths are relative to `root`.

    Raises HatpError HATP-MCP-35 (no suite.json: not made by hatp init-org; or a malformed one)."""
    layout = OrgLayout(root)
    path = layout.suite
    try:
        doc: Any = read_json_file(path)
    except FileNotFoundError as exc:
        raise _bad_suite(path, "$", "there is no suite.json: not an organisation made by hatp init-org") from exc
    except (OSError, ValueError) as exc:
        raise _bad_suite(path, "$", f"not readable JSON: {exc}") from exc
    if not isinstance(doc, dict):
        raise _bad_suite(path, "$", "suite.json is a JSON object")

    def text(obj: Mapping[str, Any], key: str, where: str) -> str:
        value = obj.get(key)
        if not isinstance(value, str) or not value:
            raise _bad_suite(path, f"{where}.{key}", f"{key} must be a non-empty string")
        return value

    def port(obj: Mapping[str, Any], key: str, where: str) -> int:
        value = obj.get(key)
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
            raise _bad_suite(path, f"{where}.{key}", f"{key} must be a TCP port (1..65535)")
        return value

    def optional_port(obj: Mapping[str, Any], where: str) -> int | None:
        return port(obj, "mcpPort", where) if obj.get("mcpPort") is not None else None

    coordinator, gateway, parts = doc.get("coordinator"), doc.get("gateway"), doc.get("participants")
    directory = doc.get("directory", {})
    if not isinstance(directory, dict):
        raise _bad_suite(path, "$.directory", "directory is an object ({mcpPort})")
    if not isinstance(coordinator, dict) or not isinstance(gateway, dict) or not isinstance(parts, dict):
        raise _bad_suite(path, "$", "suite.json has coordinator, gateway and participants objects")
    participants = []
    for uri, p in parts.items():
        where = f"$.participants[{json.dumps(uri)}]"
        if not isinstance(p, dict):
            raise _bad_suite(path, where, "a participant is {module, data, keys}")
        participants.append(
            Participant(uri, text(p, "module", where), root / text(p, "data", where), root / text(p, "keys", where))
        )
    wrapped_doc = doc.get("wrapped", {})
    if not isinstance(wrapped_doc, dict):
        raise _bad_suite(path, "$.wrapped", "wrapped is an object: {NAME: {policy, data, mcpPort?}}")
    wrapped = []
    taken = RESERVED_NAMES | {p.module.rsplit(".", 1)[-1] for p in participants}
    for name, w in wrapped_doc.items():
        where = f"$.wrapped[{json.dumps(name)}]"
        if not isinstance(w, dict) or not re.match(WRAPPED_NAME, name) or name in taken:
            raise _bad_suite(
                path,
                where,
                f"a wrapped server is NAME ({WRAPPED_NAME}, not a server of the service's "
                "own) to {policy, data, mcpPort?}",
            )
        wrapped.append(
            Wrapped(name, root / text(w, "policy", where), root / text(w, "data", where), optional_port(w, where))
        )
    return Suite(
        organization=text(doc, "organization", "$"),
        coordinator_id=text(coordinator, "id", "$.coordinator"),
        gateway_id=text(gateway, "id", "$.gateway"),
        gateway_mcp_port=port(gateway, "mcpPort", "$.gateway"),
        inbox_port=port(gateway, "inboxPort", "$.gateway") if gateway.get("inboxPort") is not None else None,
        participants=tuple(participants),
        coordinator_mcp_port=optional_port(coordinator, "$.coordinator"),
        directory_mcp_port=optional_port(directory, "$.directory"),
        wrapped=tuple(wrapped),
    )


def org_keyring(root: Path) -> Keyring:
    """The keyring a record of this organisation's coordinator verifies with, from the organisation dir alone:
    the coordinator's key (its public half) bound to its id, each participant's pinned keys (bound to their URIs),
    and the well-known's gateway keys bound to the gateway id (HATP-SIG-6). Raises HatpError HATP-MCP-35 (not an
    organisation made by hatp init-org), ValueError (an unreadable key or pin file) or OSError."""
    layout = OrgLayout(root)
    suite = load_suite(root)
    ring = Keyring()
    coordinator = SigningKey.from_jwk(json.loads((layout.data("coordinator") / "key.jwk.json").read_text()))
    ring.add(PublicKeyEntry.from_jwk(coordinator.public_jwk(suite.coordinator_id)))
    for participant in suite.participants:
        for entry in read_pins(participant.keys).entries():
            ring.add(entry)
    well_known = json.loads(layout.well_known.read_text())
    for jwk in well_known.get("keys", []) if isinstance(well_known, dict) else []:
        if isinstance(jwk, dict) and "gateway" in (jwk.get("roles") or []):
            ring.add(PublicKeyEntry.from_jwk(jwk | {"party": str(well_known.get("gateway"))}))
    return ring


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (the operator's config names it from then on)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _json(path: Path, value: Any, mode: int = 0o644) -> None:
    if not create_file(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n", mode):
        raise FileExistsError(path)


def _exists(root: Path) -> HatpError:
    return HatpError(
        "HATP-MCP-36",
        f"{root} already exists and is not empty: an organisation there is never overwritten",
        path="$",
        fix="choose a directory that does not exist yet (or an empty one); to start again, move the old one away",
        code="ORG_EXISTS",
    )


def _build(tmp: Path, organization: str, inbox_port: int | None, gateway_port: int) -> None:
    layout = OrgLayout(tmp)
    for d in (layout.cards, layout.agents, layout.trust, layout.well_known.parent):
        d.mkdir(parents=True)
    layout.agent_keys.mkdir(parents=True, mode=0o700)
    os.chmod(layout.private, 0o700)
    directory = SigningKey.generate(["directory"])
    gateway = SigningKey.generate(["gateway"])
    _json(layout.directory_key, directory.private_jwk(), 0o600)
    _json(layout.gateway_key, gateway.private_jwk(), 0o600)
    gateway_id = f"https://{organization}/hatp/gateway"
    _json(
        layout.well_known,
        {
            "type": "hatp.well-known",
            "organization": organization,
            "directory": f"https://{organization}/hatp/directory",
            "gateway": gateway_id,
            "keys": [directory.public_jwk(), gateway.public_jwk()],
        },
    )
    _json(layout.contacts, {}, 0o600)
    # no delivery channel yet: nobody is told until the operator adds one (spec/gateway.md, Delivery)
    settings: dict[str, Any] = {"delivery": {}, "channels": {}}
    if inbox_port is not None:  # the web inbox on localhost: notices link there, passkeys are bound to it
        origin = f"http://localhost:{inbox_port}"
        settings = {"inboxUrl": origin, "passkey": {"rpId": "localhost", "origins": [origin]}} | settings
    _json(layout.gateway_settings, settings)
    coordinator_id = f"coordinator://{organization}"
    coordinator = load_or_create_key(layout.data("coordinator"), ["coordinator"])  # made once, kept (HATP-MCP-34)
    receivers = [layout.data("gateway"), *(layout.data(n) for n in DEMO_PARTICIPANTS)]
    for data in receivers:  # they act for this coordinator only (HATP-TRUST-10)
        write_trust_list(data, {coordinator_id: coordinator.public_jwk()})
    participants: dict[str, Any] = {}
    for name, uri in DEMO_PARTICIPANTS.items():
        key = load_or_create_key(layout.data(name), ["participant"])
        pins = layout.trust / f"{name}.jwks.json"
        add_pins(pins, [PublicKeyEntry.from_jwk(key.public_jwk(uri))])
        participants[uri] = {
            "module": f"servers.{name}",
            "data": str(layout.data(name).relative_to(tmp)),
            "keys": str(pins.relative_to(tmp)),
        }
    _json(
        layout.suite,
        {
            "organization": organization,
            "coordinator": {"id": coordinator_id, "mcpPort": free_port()},
            "gateway": {"id": gateway_id, "mcpPort": gateway_port, "inboxPort": inbox_port},
            "directory": {"mcpPort": free_port()},
            "participants": participants,
        },
    )


def init_org(
    root: Path,
    organization: str,
    *,
    inbox: bool = False,
    inbox_port: int | None = None,
    gateway_port: int | None = None,
) -> Path:
    """Make the organisation directory `root` (see the module docstring) for `organization` (a DNS name). The web
    inbox is off unless `inbox` (on a port free now) or `inbox_port` is given; the gateway's MCP port is
    `gateway_port` or one free now.

    Raises HatpError HATP-MCP-36 (code ORG_EXISTS: `root` exists and is not empty; nothing is written), ValueError
    (an organisation name that is no DNS name) or OSError."""
    if not organization or any(c in organization for c in "/:@ ") or "." not in organization:
        raise ValueError(f"{organization!r}: give the organisation's DNS name, e.g. example.org")
    root = root.absolute()
    if root.exists() and (not root.is_dir() or any(root.iterdir())):
        raise _exists(root)
    root.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=root.parent, prefix=f".{root.name}.init-"))
    try:
        port = inbox_port if inbox_port is not None else (free_port() if inbox else None)
        _build(tmp, organization, port, gateway_port or free_port())
        os.chmod(tmp, 0o755)
        try:
            os.rename(tmp, root)  # one step; onto an empty directory too, never onto a non-empty one
        except OSError as exc:
            if root.exists():
                raise _exists(root) from exc
            raise
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return root


def _not_wrappable(name: str, reason: str, fix: str, path: str = "name") -> HatpError:
    return HatpError("HATP-MCP-58", reason, path=path, fix=fix, code="BAD_WRAP")


def wrap_server(root: Path, name: str, policy: Path, port: int | None = None) -> Wrapped:
    """Add the third-party server `name`, run behind the proxy with the policy file `policy`, to the organisation
    at `root`'s suite.json (HATP-MCP-58): its proxy's --data is DIR/data/NAME and its port `port` or one free
    now. The policy is read and checked as the proxy reads it (HATP-PXY-1, -3) before anything is written, and
    suite.json is replaced in one step. A policy inside the organisation is named relative to it.

    Raises HatpError HATP-MCP-58 (a name that is not a server name or is taken), HATP-MCP-35 (not an
    organisation), HATP-PXY-1/3 (the policy file), OSError."""
    from hatp_mcp.core.model.proxy_policy import load_policy  # only this step reads a policy

    root = root.absolute()
    suite = load_suite(root)
    taken = RESERVED_NAMES | {p.module.rsplit(".", 1)[-1] for p in suite.participants}
    if not re.match(WRAPPED_NAME, name):
        raise _not_wrappable(
            name, f"{name!r} is not a server name ({WRAPPED_NAME})", "give a short lower-case name, e.g. memory"
        )
    if name in taken or any(w.name == name for w in suite.wrapped):
        raise _not_wrappable(
            name,
            f"{name!r} is already a server of this organisation's service",
            "give the wrapped server another name (hatp mcp-config --org DIR lists the names taken)",
        )
    policy = policy.expanduser().absolute()
    try:
        doc = read_json_file(policy)
    except (OSError, ValueError) as exc:
        raise HatpError(
            "HATP-PXY-1",
            f"cannot read the policy file {policy}: {exc}",
            code="BAD_POLICY",
            fix="give a readable JSON policy file (hatp proxy init writes starter ones from a Claude Desktop config)",
        ) from None
    load_policy(doc, f"policy file {policy.name}")
    layout = OrgLayout(root)
    data = layout.data(name)
    if data.exists() and any(data.iterdir()):
        raise _not_wrappable(
            name,
            f"{data} already holds data: another server's journal is never taken over",
            "give the wrapped server another name, or move that folder away",
        )
    suite_doc = read_json_file(layout.suite)
    entry: dict[str, Any] = {
        "policy": str(policy.relative_to(root)) if policy.is_relative_to(root) else str(policy),
        "data": str(data.relative_to(root)),
        "mcpPort": port if port is not None else free_port(),
    }
    suite_doc.setdefault("wrapped", {})[name] = entry
    replace_file(layout.suite, json.dumps(suite_doc, indent=2, ensure_ascii=False) + "\n")
    return next(w for w in load_suite(root).wrapped if w.name == name)
