"""Hostile files given to the file-reading subcommands (issue #35 item 7): each ends with one line naming the file
and the rule, exit 2 where the file could not be read or used (HATP-MCP-52), and never a traceback; `--json`
callers get JSON. tests/fuzz/targets.py runs the same subcommands on many more such files."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from hatp_mcp.cli.org_layout import init_org
from tests.factories import signed_trip_record

DEEP = b"[" * 3_000 + b"]" * 3_000


@pytest.fixture(scope="module")
def made_org(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return Path(init_org(tmp_path_factory.mktemp("org") / "org", "acme.example"))


def org_copy(made_org: Path, tmp_path: Path) -> Path:
    import shutil

    return Path(shutil.copytree(made_org, tmp_path / "org"))


def one_line(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and "Traceback" not in err, err
    return out, err


def _well_known_not_ed25519(org: Path) -> None:
    path = org / ".well-known" / "human-card.json"
    doc = json.loads(path.read_text())
    doc["keys"][0] |= {"kty": "EC", "crv": "P-256"}
    path.write_text(json.dumps(doc))


CARD_CASES: dict[str, tuple[Callable[[Path], None], str]] = {
    "the Directory key file is []": (
        lambda o: (o / "private/directory.private.jwk.json").write_text("[]"),
        "HATP-MCP-52",
    ),
    "the well-known document is []": (lambda o: (o / ".well-known/human-card.json").write_text("[]"), "HATP-MCP-52"),
    "its first key is not Ed25519": (_well_known_not_ed25519, "HATP-CARD-3"),
    "the contact book is []": (lambda o: (o / "contacts.json").write_text("[]"), "HATP-MCP-52"),
}


@pytest.mark.parametrize("case", sorted(CARD_CASES))
def test_HATP_MCP_52_card_person_on_a_hostile_org_file_is_one_line_with_its_rule(
    made_org: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    org = org_copy(made_org, tmp_path)
    spoil, rule = CARD_CASES[case]
    spoil(org)
    code = main(["card", "person", "--org", str(org), "alice", "--display", "Alice", "--email", "a@acme.example"])
    _out, err = one_line(capsys)
    assert code == 2 and rule in err
    assert not (org / "cards" / "alice.json").exists()  # nothing written


def test_HATP_MCP_52_enrol_code_with_an_inbox_url_that_is_no_string_is_one_line(
    made_org: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    org = org_copy(made_org, tmp_path)
    settings = json.loads((org / "gateway.json").read_text()) | {"inboxUrl": 5}
    (org / "gateway.json").write_text(json.dumps(settings))
    code = main(["enrol", "code", "--org", str(org), "--human", "human://acme.example/alice"])
    _out, err = one_line(capsys)
    assert code == 2 and "HATP-MCP-52" in err and "$.inboxUrl" in err


def test_HATP_MCP_52_trust_add_on_a_pin_file_nested_3000_deep_is_one_line(
    made_org: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "pins.json").write_bytes(DEEP)
    key = made_org / "data" / "hotel" / "public.jwk.json"
    code = main(["trust", "add", str(tmp_path / "pins.json"), f"mcp://hotel.example/hatp={key}"])
    _out, err = one_line(capsys)
    assert code == 2 and "HATP-OBJ-2" in err


def test_HATP_MCP_52_mcp_config_on_a_suite_nested_3000_deep_is_one_line(
    made_org: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    org = org_copy(made_org, tmp_path)
    (org / "suite.json").write_bytes(b'{"a":' * 3_000 + b"1" + b"}" * 3_000)
    code = main(["mcp-config", "--org", str(org)])
    _out, err = one_line(capsys)
    assert code == 1 and "HATP-MCP-35" in err and "HATP-OBJ-2" in err  # an organisation problem, named


@pytest.mark.parametrize(
    "spoil", [{"events": [1]}, {"events": None}, {"plan": "a string"}, {"events": "x"}, {"txnId": "\udfff"}]
)
def test_HATP_MCP_52_timeline_draws_a_hostile_record_with_its_problems_and_no_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spoil: dict[str, object]
) -> None:
    record, ring, _ = signed_trip_record()
    (tmp_path / "record.json").write_text(json.dumps(record | spoil))
    (tmp_path / "keys.json").write_text(json.dumps(ring.to_jwks()))
    out_file = tmp_path / "timeline.html"
    argv = ["timeline", str(tmp_path / "record.json"), "--keys", str(tmp_path / "keys.json"), "--out", str(out_file)]
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 1 and err == "" and "problem(s)" in out  # read, and wrong: drawn with its problems
    assert "hatp verify:" in out_file.read_text()


@pytest.mark.parametrize(("content", "rule"), [(b'{"saga": 1e400}', "HATP-OBJ-4"), (None, "HATP-MCP-52")])
def test_HATP_MCP_52_validate_json_on_a_file_it_cannot_read_prints_json(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: bytes | None, rule: str
) -> None:
    path = tmp_path / "saga.json"
    if content is not None:
        path.write_bytes(content)
    code = main(["validate", str(path), "--json"])
    out, err = one_line(capsys)
    answer = json.loads(out)
    assert code == 2 and answer["ok"] is False and answer["error"]["rule"] == rule and rule in err
