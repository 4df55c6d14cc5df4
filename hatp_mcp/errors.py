"""The one error base of hatp-mcp.

Every refusal names the rule id it enforces (from spec/), the JSON path it concerns and what to do instead.
Core code raises these; the MCP binding and the CLI translate them at exactly one point each. This module must
not import anything beyond the standard library.
"""

from __future__ import annotations

__all__ = ["BrokenInvariant", "HatpError", "TransportFailed"]


class HatpError(Exception):
    """A refusal with a rule id, a JSON path, a reason and a fix.

    `code` is the stable machine name (e.g. ``PRECONDITION_CHANGED``) used on the wire; it defaults to the rule.
    """

    def __init__(
        self,
        rule: str,
        reason: str,
        *,
        path: str = "",
        fix: str = "",
        code: str | None = None,
        data: dict[str, object] | None = None,
    ) -> None:
        self.rule = rule
        self.reason = reason
        self.path = path
        self.fix = fix
        self.code = code or rule
        self.data = dict(data or {})
        super().__init__(self.one_line())

    def one_line(self) -> str:
        where = f" at {self.path}" if self.path else ""
        fix = f" Fix: {self.fix}" if self.fix else ""
        return f"{self.rule}{where}: {self.reason}{fix}"

    def to_dict(self) -> dict[str, object]:
        out: dict[str, object] = {"rule": self.rule, "code": self.code, "reason": self.reason}
        if self.path:
            out["path"] = self.path
        if self.fix:
            out["fix"] = self.fix
        if self.data:
            out["data"] = self.data
        return out


class TransportFailed(HatpError):
    """The call got no answer: a timeout, a closed connection or an unreachable server (HATP-MCP-6).

    It says nothing about what the server did. The caller treats it as "unknown", asks again (every hatp/* call
    is idempotent on its txnId and branchId) or, for a commit, records the branch as in doubt.
    """


class BrokenInvariant(RuntimeError):
    """A state the code itself rules out was reached: a bug to report, never a refusal of the caller's input.

    Raised where an `assert` would stand: an assert is stripped by `python -O`, and where it stays it ends a
    request with a bare AssertionError. The message names what was expected and where it should have been made so.
    """
