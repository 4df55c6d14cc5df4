"""The fuzz targets: each takes one hostile input and says `accepted` or `refused`; anything else it raises is a
crash (a traceback where a user should get a one-line error with a rule)."""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tempfile
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hatp_mcp.cli import main
from hatp_mcp.cli.org_layout import init_org
from hatp_mcp.core.model.wire import WireError, load_json, parse
from hatp_mcp.core.model.wire_models import WIRE_MODELS
from hatp_mcp.core.validate.validator import validate_document
from hatp_mcp.errors import HatpError
from hatp_mcp.mcp.wire_guard import check
from tests.factories import signed_trip_record
from tests.fuzz import servers

NOW = datetime(2026, 12, 1, 9, tzinfo=UTC)
_SCRATCH = Path(tempfile.mkdtemp(prefix="hatp-fuzz-"))  # one folder for the whole run: inputs overwrite each other
_RECORD, _RING, _ = signed_trip_record()
RECORD: dict[str, Any] = _RECORD
RECORD_KEYS: dict[str, Any] = _RING.to_jwks()
_KEYS_FILE = _SCRATCH / "keys.json"
_KEYS_FILE.write_text(json.dumps(RECORD_KEYS))
# An organisation as `hatp init-org` makes it, made once; each org target spoils one of its files in a fresh copy.
_ORG = Path(init_org(_SCRATCH / "org", "acme.example"))
_WORK = _SCRATCH / "work"
ORG_FILES = {
    "well-known": ".well-known/human-card.json",
    "directory key": "private/directory.private.jwk.json",
    "contacts": "contacts.json",
    "gateway settings": "gateway.json",
    "suite": "suite.json",
    "public key": "data/hotel/public.jwk.json",
    "pins": "trust/hotel.jwks.json",
}
# The sound document each org target's inputs are mutated from (tests/fuzz/inputs.py).
ORG_DOCS: dict[str, Any] = {name: json.loads((_ORG / rel).read_text()) for name, rel in ORG_FILES.items()}
Outcome = str  # "accepted" | "refused"


class Crash(AssertionError):
    """A target broke its contract: a traceback, or an unlabelled or multi-line error."""


def _cli(args: list[str], data: bytes, name: str = "input.json") -> Outcome:
    """Run `hatp` in process on a file holding `data`: exit 0 accepted, 1 or 2 refused with one clean line."""
    path = _SCRATCH / name
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([a.replace("{input}", str(path)) for a in args])
    if code == 0:
        return "accepted"
    if code == 2 and err.getvalue().count("\n") != 1:
        raise Crash(f"exit 2 must print exactly one line, got {err.getvalue()!r}")
    if code not in (1, 2):
        raise Crash(f"exit {code}")
    return "refused"


def _in_org(args: list[str], file: str, data: bytes) -> Outcome:
    """Run `hatp` on a fresh copy of the organisation (`{org}` in `args`) whose file `file` (ORG_FILES) holds
    `data`."""
    shutil.rmtree(_WORK, ignore_errors=True)
    shutil.copytree(_ORG, _WORK)
    return _cli([a.replace("{org}", str(_WORK)) for a in args], data, str(_WORK / ORG_FILES[file]))


def _encode(doc: Any) -> bytes:
    try:
        return json.dumps(doc, allow_nan=True).encode("utf-8", errors="surrogatepass")
    except (ValueError, RecursionError):
        return b"{}"


def cli_validate(raw: bytes) -> Outcome:
    return _cli(["validate", "{input}", "--now", "2026-12-01T09:00:00Z"], raw)


def cli_validate_json(raw: bytes) -> Outcome:
    outcome = _cli(["validate", "{input}", "--now", "2026-12-01T09:00:00Z", "--json"], raw)
    return outcome


def cli_digest(raw: bytes) -> Outcome:
    return _cli(["digest", "{input}"], raw)


def validator(doc: Any) -> Outcome:
    """validate_document on an already-parsed value: violations or a ValueError naming the kind, never a crash."""
    try:
        report = validate_document(doc, NOW)
    except ValueError:
        return "refused"
    return "accepted" if report.ok else "refused"


def wire_models(doc: Any) -> Outcome:
    """Every wire model parses a hostile value or refuses it with HATP-OBJ-3; its digest never crashes either."""
    outcome = "refused"
    for model in WIRE_MODELS.values():
        try:
            obj = parse(model, doc)
        except WireError as exc:
            if exc.rule != "HATP-OBJ-3":
                raise Crash(f"{model.__name__}: {exc.rule}") from exc
            continue
        outcome = "accepted"
        try:
            obj.digest()
        except HatpError:
            pass  # refused with a rule: a clean outcome
    return outcome


def loader(raw: bytes) -> Outcome:
    try:
        load_json(raw)
    except WireError:
        return "refused"
    return "accepted"


def mcp_wire(raw: bytes) -> Outcome:
    verdict = check(raw)
    if verdict is None:
        return "accepted"
    error = verdict["error"]
    if not (isinstance(error["code"], int) and error["data"]["rule"].startswith("HATP-")):
        raise Crash(f"unlabelled refusal {verdict!r}")
    return "refused"


def cli_verify(raw: bytes) -> Outcome:
    """`hatp verify` on a hostile record, against the keyring of the sound record it was mutated from."""
    return _cli(["verify", "{input}", "--keys", str(_KEYS_FILE), "--json"], raw, "record.json")


def cli_timeline(raw: bytes) -> Outcome:
    """`hatp timeline` on a hostile record: drawn with its problems (exit 1) or refused in one line."""
    return _cli(["timeline", "{input}", "--keys", str(_KEYS_FILE), "--out", str(_SCRATCH / "t.html")], raw, "rec.json")


def cli_trust_add_pins(raw: bytes) -> Outcome:
    key = _ORG / ORG_FILES["public key"]
    return _cli(["trust", "add", "{input}", f"mcp://hotel.example/hatp={key}"], raw, "pins.json")


def cli_trust_add_key(raw: bytes) -> Outcome:
    return _in_org(["trust", "add", "{org}/trust/new.jwks.json", "mcp://hotel.example/hatp={input}"], "public key", raw)


def cli_keys_ring(raw: bytes) -> Outcome:
    return _cli(["keys", "ring", "{input}"], raw, "ring.json")


def _card(file: str) -> Callable[[bytes], Outcome]:
    def run(raw: bytes) -> Outcome:
        args = ["card", "person", "--org", "{org}", "alice", "--display", "Alice", "--email", "alice@acme.example"]
        return _in_org(args, file, raw)

    return run


def cli_enrol_code(raw: bytes) -> Outcome:
    return _in_org(
        ["enrol", "code", "--org", "{org}", "--human", "human://acme.example/alice"], "gateway settings", raw
    )


def cli_mcp_config(raw: bytes) -> Outcome:
    return _in_org(["mcp-config", "--org", "{org}"], "suite", raw)


# name -> (the target, which strategy feeds it: see INPUTS in test_fuzz.py)
TARGETS: dict[str, tuple[Callable[[Any], Outcome], str]] = {
    "hatp validate (plans)": (cli_validate, "plan-bytes"),
    "hatp validate --json (sagas)": (cli_validate_json, "saga-bytes"),
    "hatp digest": (cli_digest, "plan-bytes"),
    "validate_document": (validator, "plan"),
    "wire models": (wire_models, "json"),
    "load_json": (loader, "plan-bytes"),
    "MCP wire guard": (mcp_wire, "message"),
    "hatp verify --json": (cli_verify, "record-bytes"),
    "hatp timeline": (cli_timeline, "record-bytes"),
    "hatp trust add (pin file)": (cli_trust_add_pins, "org:pins"),
    "hatp trust add (key file)": (cli_trust_add_key, "org:public key"),
    "hatp keys ring": (cli_keys_ring, "org:pins"),
    "hatp card person (well-known)": (_card("well-known"), "org:well-known"),
    "hatp card person (directory key)": (_card("directory key"), "org:directory key"),
    "hatp card person (contacts)": (_card("contacts"), "org:contacts"),
    "hatp enrol code (gateway.json)": (cli_enrol_code, "org:gateway settings"),
    "hatp mcp-config --org (suite.json)": (cli_mcp_config, "org:suite"),
    "participant hatp/* methods": (servers.participant_method, "participant-call"),
    "gateway hatp/* methods": (servers.gateway_method, "gateway-call"),
    "coordinator hatp/* methods": (servers.coordinator_method, "coordinator-call"),
    "agent tools": (servers.tool, "tool-call"),
}
