"""What the runner checks and who it is: the server under test (a command it starts over stdio, or a URL) and the
runner's own coordinator identity, which that server must trust (HATP-TRUST-1/2, 10).

The runner acts as a coordinator with a key of its own (`DIR/key.jwk.json`, created on first use) and writes the
trust list naming it (`DIR/trusted-coordinators.json`: a JWKS, role coordinator, party `RUNNER_ID`). A `--command`
may hold the placeholder `{trust}`, replaced by that file's path, so the server starts trusting the runner; a
server reached by URL must have been started with that file (run `hatp conformance participant --keys DIR` once
without a target to write it). The command is the operator's own, split like a shell would (shlex) and never run
through a shell.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import BrokenInvariant
from hatp_mcp.runtime.coordinator_trust import TRUST_FILE, write_trust_list
from hatp_mcp.store.files import load_or_create_key

__all__ = ["RUNNER_ID", "TRUST_PLACEHOLDER", "Identity", "Target", "open_identity"]

RUNNER_ID = "coordinator://hatp-conformance"
TRUST_PLACEHOLDER = "{trust}"


@dataclass(frozen=True)
class Identity:
    """The runner's coordinator key, the id it signs as, and the trust list file that names it."""

    key: SigningKey
    coordinator: str
    trust_file: Path


def open_identity(directory: Path) -> Identity:
    """The runner's key under `directory` (created on first use) and its trust list written beside it.
    Raises OSError or ValueError."""
    key = load_or_create_key(directory, ["coordinator"])
    path = write_trust_list(directory, {RUNNER_ID: key.public_jwk()})
    if path.name != TRUST_FILE:
        raise BrokenInvariant(f"the runner's trust list was written as {path.name}, not {TRUST_FILE}")
    return Identity(key, RUNNER_ID, path)


@dataclass(frozen=True)
class Target:
    """A server under test: `command` (argv, placeholders filled) started as a stdio child, or `url`."""

    command: tuple[str, ...] | None = None
    url: str | None = None

    @classmethod
    def from_command(cls, command: str, trust_file: Path) -> Target:
        """Raises ValueError for a command that is empty or cannot be split."""
        argv = tuple(a.replace(TRUST_PLACEHOLDER, str(trust_file)) for a in shlex.split(command))
        if not argv:
            raise ValueError("it is empty")
        return cls(command=argv)

    def describe(self) -> str:
        return shlex.join(self.command) if self.command is not None else str(self.url)

    @property
    def speaks_stdio(self) -> bool:
        return self.command is not None

    def stdio_parameters(self) -> StdioServerParameters:
        if self.command is None:
            raise BrokenInvariant("a target without a command has no stdio parameters")
        # the operator's own environment and directory: a server started by hand would see the same
        return StdioServerParameters(
            command=self.command[0], args=list(self.command[1:]), env=dict(os.environ), cwd=os.getcwd()
        )

    @asynccontextmanager
    async def connect(self, errlog: TextIO) -> AsyncIterator[Client]:
        """One MCP client session on the server (a fresh stdio child for a command). The child's stderr goes to
        `errlog`."""
        if self.command is not None:
            async with Client(stdio_client(self.stdio_parameters(), errlog=errlog)) as client:
                yield client
        else:
            if self.url is None:
                raise BrokenInvariant("a target names neither a command nor a url")
            async with Client(self.url) as client:
                yield client
