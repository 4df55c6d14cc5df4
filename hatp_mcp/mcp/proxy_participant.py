"""The proxy as a HATP participant (spec/proxy.md section 3): each upstream tool with policy `participant` becomes
an operation of hatp_mcp.runtime.participant.driver.ParticipantRuntime, served by `serve_hatp` on the proxy's own
MCP server. The driver does every protocol part (signed votes and receipts, the trust list, durable state before
each answer, first answers repeated); this module only says what each tier's callbacks do upstream:

- prepare (a dry run): the branch's args checked against the upstream tool's `inputSchema`, and the file's
  precondition read, its answer's digest the version the vote signs (HATP-PXY-33, 34);
- commit: the upstream call (a `hold` tier's `confirm`), with the branch's idempotency key in `_meta`, its result
  kept before the answer (HATP-PXY-35);
- compensate: the undo call built by the file's expressions over `{"args", "result"}` (HATP-PXY-36);
- hold: the tool itself at prepare, `release` at abort (HATP-PXY-37).

It must not decide any protocol question itself.
"""

from __future__ import annotations

import hashlib
import json
import stat
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, cast

import mcp.types as types
from jmespath.exceptions import JMESPathError
from jsonschema import validators  # type: ignore[import-untyped]
from jsonschema.exceptions import SchemaError  # type: ignore[import-untyped]
from mcp import MCPError
from mcp.types import RequestParamsMeta

from hatp_mcp.core.journal.proxy_tools import ToolRule, UpstreamTool, build_arguments, call_document
from hatp_mcp.core.model.plan import Branch
from hatp_mcp.core.model.proxy_policy import (
    ParticipantIdentity,
    ParticipantOperation,
    ProxyPolicy,
    UndoCall,
    compiled,
)
from hatp_mcp.core.participant.branch import Lease
from hatp_mcp.core.signing.canonical import canonical, digest_bytes
from hatp_mcp.core.signing.keys import SigningKey
from hatp_mcp.errors import BrokenInvariant, HatpError
from hatp_mcp.mcp.errors import CONNECTION_CLOSED, REQUEST_TIMEOUT
from hatp_mcp.mcp.extension import HatpSettings, OperationInfo
from hatp_mcp.mcp.journal_proxy import result_document
from hatp_mcp.mcp.journal_server import KEY_META
from hatp_mcp.runtime.clock import Clock
from hatp_mcp.runtime.coordinator_trust import TRUST_FILE, TrustedCoordinators, load_trust_list, open_trust
from hatp_mcp.runtime.participant.driver import ParticipantRuntime
from hatp_mcp.runtime.participant.operation import DryRun, EffectInDoubt, Operation, Performed
from hatp_mcp.store.files import create_file, load_or_create_key, read_json_file
from hatp_mcp.store.participant_state import SqliteParticipantStore
from hatp_mcp.store.private_files import read_private
from hatp_mcp.store.txn_bindings import SqliteTxnBindings

__all__ = [
    "PARTICIPANT_DIR",
    "CallUpstream",
    "KeptResults",
    "ProxyParticipant",
    "UpstreamOperation",
    "check_participant",
    "client_caller",
    "open_participant",
    "participant_key",
    "participant_operations",
    "participant_settings",
]

# Under the proxy's --data: the participant's own key, branch state and kept upstream results (HATP-PXY-38).
PARTICIPANT_DIR = "participant"
MAX_LEASE_SECONDS = 900
MAX_HOLD_SECONDS = 24 * 3600

CallUpstream = Callable[[str, dict[str, Any], str | None], Awaitable[types.CallToolResult]]
"""Call an upstream tool: (name, arguments, the idempotency key sent in `_meta`, or None)."""


def client_caller(upstream: Any) -> CallUpstream:
    """`CallUpstream` over an MCP client (`mcp.Client`)."""

    async def call(name: str, arguments: dict[str, Any], key: str | None) -> types.CallToolResult:
        meta = cast(RequestParamsMeta, {KEY_META: key}) if key is not None else None
        result: types.CallToolResult = await upstream.call_tool(name, arguments, meta=meta)
        return result

    return call


class KeptResults:
    """The upstream's answers a later phase builds from (a commit's for its undo, a hold's for its confirm and
    release), one file each under `folder`, written once and durably before the phase answers (HATP-PXY-35)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)

    def _path(self, key: str, phase: str) -> Path:
        return self.folder / f"{hashlib.sha256(key.encode()).hexdigest()}.{phase}.json"

    def keep(self, key: str, phase: str, value: Any) -> None:
        """Raises OSError. A second answer for the same key and phase leaves the first (a retry's is the same)."""
        create_file(self._path(key, phase), json.dumps({"result": value}), 0o600)

    def get(self, key: str, phase: str) -> tuple[bool, Any]:
        """(whether an answer was kept, the answer)."""
        path = self._path(key, phase)
        if not path.exists():
            return False, None
        doc = read_json_file(path)
        return True, doc.get("result") if isinstance(doc, dict) else None


def _refuse(rule: str, code: str, why: str) -> DryRun:
    """A dry run's no vote, its reason naming the rule."""
    return DryRun(refuse_code=code, refuse_reason=f"{rule}: {why}"[:1000])


def _text(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


@dataclass
class UpstreamOperation(Operation):
    """One participant tool: the callbacks of its tier, as calls to the upstream."""

    tool: UpstreamTool
    spec: ParticipantOperation
    call: CallUpstream
    kept: KeptResults
    idempotent: bool = False  # the upstream marks the call a commit sends idempotentHint (HATP-PXY-65)

    @property
    def tier(self) -> str:
        return self.spec.tier

    def _args_problem(self, args: Mapping[str, Any]) -> str | None:
        """Why `args` are not valid for the upstream tool's inputSchema (HATP-PXY-33), or None."""
        schema = dict(self.tool.input_schema)
        try:
            cls = validators.validator_for(schema)
            cls.check_schema(schema)
        except SchemaError as exc:
            return f"the upstream's inputSchema of {self.tool.name} is not a JSON Schema: {exc.message}"
        errors = sorted(cls(schema).iter_errors(dict(args)), key=lambda e: list(e.absolute_path))
        if not errors:
            return None
        first = errors[0]
        where = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first.absolute_path)
        return f"args{where}: {first.message}"[:500]

    async def dry_run(self, branch: Branch, now: datetime) -> DryRun:
        problem = self._args_problem(branch.args)
        if problem is not None:  # the call could not succeed: a no vote, and nothing is sent upstream
            return _refuse("HATP-PXY-33", "ARGUMENTS_UNFIT", problem)
        pre = self.spec.precondition
        if pre is None:
            return DryRun()
        try:  # the read's answer, digested, is the version the vote signs
            built = build_arguments(
                pre.arguments,
                {"args": dict(branch.args)},
                what=f"the precondition of {self.tool.name}",
                path=f"tools.{self.tool.name}.participant.precondition.arguments",
            )
        except HatpError as exc:
            return _refuse("HATP-PXY-34", "PRECONDITION_UNREADABLE", exc.one_line())
        failure: str | None = None
        try:
            answer = await self._send(pre.tool, built, None, "HATP-PXY-34")
        except HatpError as exc:  # refused or unanswered: a no vote stating the upstream's reason (HATP-PXY-60)
            answer, failure = None, exc.reason
        if failure is not None:
            return _refuse("HATP-PXY-34", "PRECONDITION_UNREADABLE", f"{pre.tool} failed: {failure}")
        try:
            seen = compiled(pre.version).search(call_document(branch.args, answer))
        except JMESPathError as exc:
            return _refuse("HATP-PXY-34", "PRECONDITION_UNREADABLE", f"the version of {pre.tool}'s answer: {exc}")
        return DryRun(versions={pre.tool: digest_bytes(canonical(seen, allow_floats=True))})

    async def _send(self, name: str, arguments: dict[str, Any], key: str | None, rule: str) -> Any:
        """The call's result document (HATP-PXY-60). Raises HatpError `rule` (`UPSTREAM_REFUSED`) when the upstream
        refused it (an isError result or a JSON-RPC error: it answered, and did nothing), EffectInDoubt `rule`
        (`UPSTREAM_NO_ANSWER`) when no answer came (a timeout, a lost connection: it may have done it)."""
        try:
            result = await self.call(name, arguments, key)
        except MCPError as exc:
            if exc.code not in (REQUEST_TIMEOUT, CONNECTION_CLOSED):  # HATP-PXY-62: answered, so refused
                raise HatpError(
                    rule,
                    f"the upstream refused {name}: JSON-RPC error {exc.code}: {exc.message[:500]}",
                    code="UPSTREAM_REFUSED",
                    fix="see the upstream's answer; nothing was done upstream by this call",
                ) from None
            raise self._no_answer(name, rule, exc.message) from None
        except Exception as exc:  # a lost connection (the SDK raises groups); cancellation is not an Exception
            raise self._no_answer(name, rule, type(exc).__name__) from None
        if result.is_error:  # HATP-PXY-60: an isError answer is a refusal, never a result to keep
            raise HatpError(
                rule,
                f"the upstream refused {name}: {_text(result)[:500] or 'isError'}",
                code="UPSTREAM_REFUSED",
                fix="see the upstream's answer; nothing was done upstream by this call",
            )
        return result_document(result)

    @staticmethod
    def _no_answer(name: str, rule: str, why: str) -> EffectInDoubt:
        return EffectInDoubt(
            rule,
            f"no answer from the upstream for {name} ({why[:200]}): it may or may not have been done",
            code="UPSTREAM_NO_ANSWER",
            fix="the coordinator asks again with the same key; look at the upstream by hand if it stays in doubt",
        )

    def _built(self, call: UndoCall, args: Mapping[str, Any], result: Any, member: str) -> dict[str, Any]:
        """Raises HatpError HATP-PXY-7 (`ARGUMENT_NOT_FOUND`): never sent with an argument missing."""
        return build_arguments(
            call.arguments,
            call_document(args, result),
            what=f"the {member} of {self.tool.name}",
            path=f"tools.{self.tool.name}.participant.{member}.arguments",
        )

    async def place_hold(self, txn_id: str, branch: Branch, lease: Lease) -> None:
        key = f"{txn_id}:{branch.branch_id}"
        found, _ = self.kept.get(key, "hold")
        if found:  # the hold was placed before (a lapsed lease placed again): the upstream holds it already
            return
        done = await self._send(self.tool.name, dict(branch.args), key, "HATP-PXY-37")
        self.kept.keep(key, "hold", done)

    async def release_hold(self, txn_id: str, branch: Branch) -> None:
        key = f"{txn_id}:{branch.branch_id}"
        found, held = self.kept.get(key, "hold")
        if not found or self.spec.release is None:
            return
        built = self._built(self.spec.release, branch.args, held, "release")
        await self._send(self.spec.release.tool, built, key, "HATP-PXY-37")

    async def perform(self, txn_id: str, branch: Branch, now: datetime, *, key: str) -> str | None:
        if self.spec.tier == "hold":
            if self.spec.confirm is None:
                raise BrokenInvariant(f"{self.tool.name}: a hold-tier participant without confirm passed the checks")
            found, held = self.kept.get(key, "hold")
            if not found:
                raise HatpError(
                    "HATP-PXY-37", "no hold was kept for this branch", code="HOLD_LOST", fix="prepare the branch again"
                )
            built = self._built(self.spec.confirm, branch.args, held, "confirm")
            self.kept.keep(key, "commit", await self._send(self.spec.confirm.tool, built, key, "HATP-PXY-37"))
            return None
        self.kept.keep(key, "commit", await self._send(self.tool.name, dict(branch.args), key, "HATP-PXY-35"))
        return None

    async def undo(self, txn_id: str, branch: Branch, undo_token: str | None, now: datetime, *, key: str) -> None:
        call = self.spec.undo
        if call is None:
            raise BrokenInvariant(f"{self.tool.name}: a compensate-tier participant without undo passed the checks")
        found, done = self.kept.get(key, "commit")
        if not found:
            raise HatpError(
                "HATP-PXY-36",
                f"no result of {self.tool.name} was kept for this branch: its undo cannot be built",
                code="NOTHING_TO_UNDO",
                fix="look at the upstream by hand; the proxy keeps each commit's result under DATA/participant",
            )
        await self._send(call.tool, self._built(call, branch.args, done, "undo"), key, "HATP-PXY-36")

    async def lookup(self, key: str, branch: Branch) -> Performed | None:
        """HATP-PXY-39: a kept result says it happened; else the file's lookup, if any; else None (sent again, with
        the same idempotency key in `_meta`) only for a call the upstream marks idempotent (HATP-PXY-65). Raises
        HatpError HATP-PXY-39 / EffectInDoubt HATP-PXY-65 (`IN_DOUBT`) when it cannot tell."""
        if self.kept.get(key, "commit")[0]:
            return Performed()
        look = self.spec.lookup
        if look is None:
            if self.idempotent:
                return None
            raise EffectInDoubt(
                "HATP-PXY-65",
                f"the commit of {self.tool.name} was under way when the proxy stopped, the upstream does not mark it "
                "idempotentHint and the file names no lookup: it is not sent again",
                code="IN_DOUBT",
                fix=f"look at the upstream by hand; give tools.{self.tool.name}.participant a lookup",
            )
        built = build_arguments(
            look.arguments,
            {"args": dict(branch.args)},
            what=f"the lookup of {self.tool.name}",
            path=f"tools.{self.tool.name}.participant.lookup.arguments",
        )
        happened = None
        try:
            answer = await self._send(look.tool, built, key, "HATP-PXY-39")
            happened = compiled(look.happened).search(call_document(branch.args, answer))
        except (HatpError, JMESPathError):  # refused, unanswered, or not of the shape the expression reads
            happened = None
        if happened is None:
            raise HatpError(
                "HATP-PXY-39",
                f"the lookup of {self.tool.name} cannot tell whether the commit happened",
                code="IN_DOUBT",
                fix="the coordinator retries; look at the upstream by hand if it stays in doubt",
            )
        if happened:
            self.kept.keep(key, "commit", None)
            return Performed()
        return None


def participant_operations(
    rules: Mapping[str, ToolRule], tools: Mapping[str, UpstreamTool], call: CallUpstream, kept: KeptResults
) -> dict[str, UpstreamOperation]:
    """Each participant tool's operation, by the operation name plans give it."""
    out: dict[str, UpstreamOperation] = {}
    for name, rule in rules.items():
        if rule.action != "participant":
            continue
        if rule.participant is None:
            raise BrokenInvariant(f"{name}: policy participant without a participant passed the checks")
        spec = rule.participant
        sent = tools[spec.confirm.tool if spec.tier == "hold" and spec.confirm is not None else name]
        op = UpstreamOperation(tools[name], spec, call, kept, sent.idempotent_hint)
        out[spec.operation or name] = op
    return out


def participant_settings(
    identity: ParticipantIdentity, operations: Mapping[str, UpstreamOperation], key: Mapping[str, Any]
) -> HatpSettings:
    """The advertisement (HATP-PXY-32): role participant, each operation with its tier, the participant's key."""
    return HatpSettings(
        roles=["participant"],
        operations={
            name: OperationInfo(
                op.tier,
                MAX_LEASE_SECONDS if op.tier == "hold" else None,
                MAX_HOLD_SECONDS if op.tier == "hold" else None,
                identity.max_call_seconds,
            )
            for name, op in operations.items()
        },
        keys=[dict(key)],
    )


def _key_file(path: Path) -> SigningKey:
    """The private JWK in an owner-only file (HATP-PXY-63), checked on the file opened, so the file read is the file
    checked. Raises HatpError HATP-PXY-63 (`KEY_FILE_UNREADABLE`, `KEY_FILE_OPEN`)."""
    try:
        mode, raw = read_private(path)
    except OSError as exc:
        raise HatpError(
            "HATP-PXY-63",
            f"cannot open the participant key {path} ({exc.strerror})",
            path="--key",
            code="KEY_FILE_UNREADABLE",
            fix="name the participant's private JWK file (`hatp keys new --out FILE --role participant` writes one)",
        ) from None
    if raw is None:
        raise HatpError(
            "HATP-PXY-63",
            f"the participant key {path} has mode {stat.S_IMODE(mode):04o}: others than its owner may use it",
            path="--key",
            code="KEY_FILE_OPEN",
            fix=f"chmod 600 {path} (a regular file only its owner may read or write)",
        )
    try:
        return SigningKey.from_jwk(json.loads(raw))
    except (ValueError, UnicodeDecodeError, TypeError, KeyError):
        raise HatpError(
            "HATP-PXY-63",
            f"the participant key {path} is not a private Ed25519 JWK",
            path="--key",
            code="KEY_FILE_UNREADABLE",
            fix="name the participant's private JWK file",
        ) from None


def participant_key(data: Path, key_file: Path | None = None, *, write: bool = True) -> SigningKey | None:
    """The participant's signing key (HATP-PXY-38, 63): `key_file` (`--key FILE`, an owner-only private JWK, its
    public half written to `DATA/participant/public.jwk.json` for the coordinator to pin), else
    `DATA/participant/key.jwk.json` (made on first start). With `write` False nothing is made or written (a check):
    None when the default key is not made yet. Raises HatpError HATP-PXY-38 (`WRONG_KEY_ROLE`), HATP-PXY-63;
    ValueError (HATP-MCP-34), OSError."""
    home = data / PARTICIPANT_DIR
    if key_file is None:
        where = home / "key.jwk.json"
        if not write and not where.exists():
            return None
        key = load_or_create_key(home, ["participant"]) if write else SigningKey.from_jwk(read_json_file(where))
    else:
        key = _key_file(key_file)
        where = key_file
    if "participant" not in key.roles:  # never the journal's key, nor one made for another role
        raise HatpError(
            "HATP-PXY-38",
            f"{where} has roles {sorted(key.roles)}, not participant: votes and receipts are signed "
            "with the participant's own key",
            path="--key" if key_file is not None else "participant",
            code="WRONG_KEY_ROLE",
            fix="name a key of role participant with --key (`hatp keys new --out FILE --role participant`)"
            if key_file is not None
            else f"move {where} and public.jwk.json away: the proxy makes a participant key there",
        )
    if key_file is not None and write:
        home.mkdir(parents=True, exist_ok=True)
        public = home / "public.jwk.json"
        if not create_file(public, json.dumps(key.public_jwk()), 0o644):
            kept = read_json_file(public)
            if not isinstance(kept, dict) or kept.get("kid") != key.kid:
                raise HatpError(
                    "HATP-PXY-63",
                    f"{public} is the public half of another key than {key_file} ({key.kid})",
                    path="--key",
                    code="KEY_MISMATCH",
                    fix=f"move {public} away (and re-pin the new key at the coordinators), or name the key it halves",
                )
    return key


def check_participant(
    data: Path | None,
    policy: ProxyPolicy,
    rules: Mapping[str, ToolRule],
    key_file: Path | None = None,
    trusted_coordinators: str | None = None,
) -> dict[str, Any] | None:
    """The participant side of a policy checked without serving or writing anything (`hatp proxy check`,
    HATP-PXY-64): the key the proxy would sign with is of role participant (HATP-PXY-38, 63) and the trust list it
    would act on is there and parses (HATP-TRUST-10). None when no tool has policy `participant`. Raises HatpError
    HATP-PXY-64 (`DATA_NEEDED`, `NO_TRUST_LIST`, `BAD_TRUST_LIST`, `BAD_KEY`), HATP-PXY-38, HATP-PXY-63."""
    identity = policy.participant
    if identity is None or not any(r.action == "participant" for r in rules.values()):
        return None
    if data is None and (key_file is None or trusted_coordinators is None):
        raise HatpError(
            "HATP-PXY-64",
            "the file has participant tools: their key and trust list live under the proxy's --data",
            path="participant",
            code="DATA_NEEDED",
            fix="give --data DIR (the proxy's), or both --key FILE and --trusted-coordinators [ID=]FILE",
        )
    home = data if data is not None else Path(".")
    try:
        key = participant_key(home, key_file, write=False)
    except ValueError as exc:
        raise HatpError(
            "HATP-PXY-64", str(exc)[:500], path="participant", code="BAD_KEY", fix="see HATP-PXY-38"
        ) from None
    if trusted_coordinators is not None:
        party, sep, file = (
            trusted_coordinators.partition("=") if "=" in trusted_coordinators else ("", "", trusted_coordinators)
        )
        where, bound = Path(file), party if sep else None
    elif data is not None and (data / TRUST_FILE).exists():
        where, bound = data / TRUST_FILE, None
    else:
        raise HatpError(
            "HATP-PXY-64",
            f"no trust list: neither --trusted-coordinators nor {home / TRUST_FILE}; the participant would refuse "
            "every coordinator's request (HATP-TRUST-6)",
            path="participant",
            code="NO_TRUST_LIST",
            fix="give the coordinators' keys with --trusted-coordinators [ID=]FILE (`hatp trust add` writes one)",
        )
    try:
        ring = load_trust_list(where, bound)
    except (OSError, ValueError) as exc:
        raise HatpError(
            "HATP-PXY-64",
            f"the trust list {where} cannot be used: {exc}"[:600],
            path="participant",
            code="BAD_TRUST_LIST",
            fix="a JWKS of coordinator keys, each with role coordinator and its party (HATP-TRUST-10)",
        ) from None
    return {
        "uri": identity.uri,
        "key": key.kid if key is not None else f"made on first start at {home / PARTICIPANT_DIR / 'key.jwk.json'}",
        "trustedCoordinators": sorted({e.party or "" for e in ring.entries()}),
    }


@dataclass(frozen=True)
class ProxyParticipant:
    """What `serve_hatp` needs of the proxy as a participant: its runtime, advertisement and trust list."""

    runtime: ParticipantRuntime
    settings: HatpSettings
    trust: TrustedCoordinators


@contextmanager
def open_participant(
    data: Path,
    policy: ProxyPolicy,
    rules: Mapping[str, ToolRule],
    tools: Sequence[UpstreamTool],
    call: CallUpstream,
    clock: Clock,
    trusted_coordinators: str | None = None,
    key_file: Path | None = None,
) -> Iterator[ProxyParticipant | None]:
    """The proxy's participant side, or None when no tool has policy `participant` (HATP-PXY-38): its own key
    (role participant) and branch state under `DATA/participant`, apart from the journal's; its trust list from
    `trusted_coordinators` (`--trusted-coordinators [ID=]FILE`), else `DATA/trusted-coordinators.json`, else none
    (every state-changing request refused, HATP-TRUST-6); its key `key_file` when given (HATP-PXY-63). Raises
    OSError, ValueError, HatpError (HATP-PXY-38, 63, HATP-STORE-1/3)."""
    identity = policy.participant
    if identity is None or not any(r.action == "participant" for r in rules.values()):
        yield None
        return
    home = data / PARTICIPANT_DIR
    key = participant_key(data, key_file)
    if key is None:
        raise BrokenInvariant("participant_key made no key while allowed to write")
    operations = participant_operations(rules, {t.name: t for t in tools}, call, KeptResults(home / "results"))
    store = SqliteParticipantStore(home / "state.db")
    bindings = SqliteTxnBindings(store.database)
    try:
        trust = open_trust(data, trusted_coordinators, clock, bindings)
        runtime = ParticipantRuntime(
            identity.uri,
            key,
            dict(operations),
            store,
            clock,
            max_lease_seconds=MAX_LEASE_SECONDS,
            max_horizon_seconds=MAX_HOLD_SECONDS,
        )
        yield ProxyParticipant(runtime, participant_settings(identity, operations, key.public_jwk()), trust)
    finally:
        bindings.close()
        store.close()
