"""The proxy's policy file, picked up again while it serves (spec/proxy.md HATP-PXY-42, 43).

`PolicyWatch` is awaited at the start of every request (tools/list and tools/call): it reads the file and, when its
content differs from the policy in force and from the last one refused, checks it whole (the file's own rules,
HATP-PXY-1 and 3; the same upstream; every tool against the upstream's tools listed anew, HATP-PXY-4 to 6, 20,
23: `JournalingProxy.apply`) and puts it in force, or refuses it whole and keeps the old one.

Why on each request and not on a timer: a change is seen by the very next request it could affect, with no task
and no clock to run beside the server (and nothing to wait for in a test); the price is one read of a small file
per request. Why the content and not the modification time: a time's granularity can hide a quick second write;
a digest cannot.

Each outcome is one line on stderr and the file DATA/policy-status.json (`hatp proxy status --data DIR`): the
digest in force and since when, and the last refusal with its rule, path, reason and fix. Neither holds a value
the policy takes from the environment or a file (HATP-PXY-2): the upstream is never restarted, so nothing of it
is read again.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

from hatp_mcp.core.model.base import format_ts
from hatp_mcp.core.model.proxy_policy import load_policy
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.journal_proxy import JournalingProxy
from hatp_mcp.runtime.clock import Clock

__all__ = ["STATUS_FILE", "PolicyWatch"]

STATUS_FILE = "policy-status.json"


class PolicyWatch:
    """Reloads `path` into `proxy` when its content changes; `data` holds the status file; `log` takes the lines
    for stderr."""

    def __init__(self, path: Path, proxy: JournalingProxy, data: Path, clock: Clock, log: Callable[[str], None]):
        self.path = path
        self.proxy = proxy
        self.data = data
        self.clock = clock
        self.log = log
        self._lock = anyio.Lock()
        # (not yet known: the file may have changed since the proxy read it; the first request checks it, and
        # a file whose policy is the one in force is taken without a word)
        self._in_force = ""
        self._refused: str | None = None
        self._status: dict[str, Any] = {
            "policyFile": str(path),
            "inForce": {"sha256": _digest(path.read_bytes()), "since": format_ts(clock.now())},
        }
        self._write()

    async def __call__(self) -> None:
        """Check the file once; never raises for what the file holds (a refusal is logged and kept)."""
        async with self._lock:  # (one reload at a time: a request waits for the policy it will be handled by)
            try:
                raw = self.path.read_bytes()
            except OSError as exc:
                seen = f"unreadable:{type(exc).__name__}"
                if seen != self._refused:
                    self._refuse(
                        seen,
                        HatpError(
                            "HATP-PXY-43",
                            f"cannot read the policy file {self.path} ({exc.strerror or type(exc).__name__})",
                            path="",
                            code="BAD_POLICY",
                            fix="put the policy file back; the policy read last stays in force",
                        ),
                    )
                return
            seen = _digest(raw)
            if seen in (self._in_force, self._refused):
                return
            try:
                policy = self._read(raw)
                if policy == self.proxy.policy:  # the same policy (another spelling, or the one read at start)
                    self._in_force, self._refused = seen, None
                    self._status = {"policyFile": str(self.path), "inForce": {"sha256": seen, "since": self._now()}}
                    self._write()
                    return
                tools = (await self.proxy.upstream.list_tools()).tools
                self.proxy.apply(policy, tools)  # whole or not at all
            except HatpError as exc:
                self._refuse(seen, exc)
                return
            except ValueError as exc:  # a saga tool's name taken by the upstream, shadow mode without a log
                self._refuse(seen, HatpError("HATP-PXY-43", str(exc), code="BAD_POLICY", fix="change the file"))
                return
            except Exception as exc:  # the upstream did not list its tools: nothing changes
                why = HatpError(
                    "HATP-PXY-43",
                    f"the upstream did not list its tools for the check ({type(exc).__name__})",
                    path="upstream",
                    code="UPSTREAM_UNAVAILABLE",
                    fix="save the file again once the upstream answers",
                )
                self._refuse(seen, why)
                return
            self._in_force, self._refused = seen, None
            self._status = {"policyFile": str(self.path), "inForce": {"sha256": seen, "since": self._now()}}
            self._write()
            self.log(f"journal-proxy: the policy file changed: the new policy is in force (sha256 {seen[:12]})")

    def _read(self, raw: bytes) -> Any:
        """The file's policy, over the same upstream. Raises HatpError HATP-PXY-1, 3, 44 (`UPSTREAM_CHANGED`)."""
        try:
            doc = json.loads(raw)
        except ValueError as exc:
            raise HatpError(
                "HATP-PXY-1",
                f"the policy file {self.path.name} is not JSON ({exc})",
                code="BAD_POLICY",
                fix="write the policy file as one JSON object",
            ) from None
        policy = load_policy(doc, f"policy file {self.path.name}")
        if policy.upstream != self.proxy.policy.upstream:
            raise HatpError(
                "HATP-PXY-43",
                "the upstream (its command, arguments, environment, folder, url or headers) changed: the running "
                "upstream cannot take it",
                path="upstream",
                code="UPSTREAM_CHANGED",
                fix="restart the proxy for another upstream; a reload changes the tools' policies only",
            )
        return policy

    def _refuse(self, seen: str, exc: HatpError) -> None:
        self._refused = seen
        refusal: dict[str, Any] = {"at": self._now(), "rule": exc.rule, "code": exc.code, "reason": exc.reason}
        if seen.startswith("unreadable:") is False:
            refusal["sha256"] = seen
        if exc.path:
            refusal["path"] = exc.path
        if exc.fix:
            refusal["fix"] = exc.fix
        self._status["refused"] = refusal
        self._write()
        self.log(f"journal-proxy: the changed policy file is refused, the policy before it stays: {exc.one_line()}")

    def _now(self) -> str:
        return format_ts(self.clock.now())

    def _write(self) -> None:
        """DATA/policy-status.json, replaced whole (a reader never sees half of it)."""
        fd, tmp = tempfile.mkstemp(dir=self.data, prefix=".policy-status-")
        with os.fdopen(fd, "w") as f:
            json.dump(self._status, f, indent=2)
        os.replace(tmp, self.data / STATUS_FILE)


def _digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()
