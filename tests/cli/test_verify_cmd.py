"""`hatp verify`, `hatp digest`, `hatp keys`: exit codes, JSON output, and one-line errors for bad input."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hatp_mcp.cli import main
from tests.factories import signed_trip_record, trip_plan_json


def write(tmp_path: Path, name: str, value: Any) -> str:
    p = tmp_path / name
    p.write_bytes(value if isinstance(value, bytes) else json.dumps(value).encode())
    return str(p)


@pytest.fixture
def files(tmp_path: Path) -> tuple[str, str, dict[str, Any]]:
    record, ring, _ = signed_trip_record()
    return write(tmp_path, "record.json", record), write(tmp_path, "keys.json", ring.to_jwks()), record


def test_verify_exits_0_on_a_sound_record(files: Any, capsys: pytest.CaptureFixture[str]) -> None:
    rec, keys, _ = files
    assert main(["verify", rec, "--keys", keys]) == 0
    out = capsys.readouterr().out
    assert "holds" in out and "outcome COMMITTED is justified by the record: every branch voted yes" in out
    assert "1 human decision(s): their own proofs were not checked" in out


def test_verify_exits_1_and_lists_each_problem_as_json(tmp_path: Path, files: Any, capsys: Any) -> None:
    _, keys, record = files
    del record["events"][2]
    rec = write(tmp_path, "cut.json", record)
    assert main(["verify", rec, "--keys", keys, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is False
    assert {"index": 2, "rule": "HATP-REC-1"} in [{k: p[k] for k in ("index", "rule")} for p in out["problems"]]
    assert all(set(p) == {"index", "rule", "reason"} for p in out["problems"])


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"{not json", "not JSON"),
        (b"\xff\xfe\x00", "not UTF-8"),
        (b"[" * 100 + b"]" * 100, "nested deeper"),
        (b"[1, 2]", "a record is a JSON object"),
    ],
)
def test_unreadable_records_exit_2_with_one_line(
    tmp_path: Path, files: Any, capsys: Any, content: bytes, needle: str
) -> None:
    _, keys, _ = files
    rec = write(tmp_path, "bad.json", content)
    assert main(["verify", rec, "--keys", keys]) == 2
    err = capsys.readouterr().err
    assert needle in err and err.count("\n") == 1 and "Traceback" not in err


def test_a_missing_file_and_a_bad_keyring_exit_2(tmp_path: Path, files: Any, capsys: Any) -> None:
    rec, _, _ = files
    assert main(["verify", str(tmp_path / "nope.json"), "--keys", rec]) == 2
    bad_ring = write(tmp_path, "ring.json", {"keys": [{"kty": "OKP", "crv": "Ed25519", "kid": "k", "x": "!"}]})
    assert main(["verify", rec, "--keys", bad_ring]) == 2
    assert "keys[0]" in capsys.readouterr().err


def test_digest_prints_the_plan_digest_and_refuses_unknown_fields(tmp_path: Path, capsys: Any) -> None:
    from hatp_mcp.core.model.plan import Plan

    plan = trip_plan_json()
    assert main(["digest", write(tmp_path, "plan.json", plan)]) == 0
    assert capsys.readouterr().out.strip() == Plan.model_validate(plan).digest()
    plan["branches"][1]["extra"] = 1
    assert main(["digest", write(tmp_path, "bad.json", plan)]) == 2
    err = capsys.readouterr().err
    assert "HATP-OBJ-3" in err and "branches[1].extra" in err and "bad.json" in err


def test_keys_new_writes_a_0600_private_key_and_never_overwrites(tmp_path: Path, capsys: Any) -> None:
    out = tmp_path / "coord.jwk"
    assert main(["keys", "new", "--out", str(out), "--role", "coordinator"]) == 0
    public = json.loads(capsys.readouterr().out)
    assert "d" not in public and public["roles"] == ["coordinator"]
    assert stat.S_IMODE(os.stat(out).st_mode) == 0o600
    assert json.loads(out.read_text())["kid"] == public["kid"]
    assert main(["keys", "new", "--out", str(out)]) == 2
    assert main(["keys", "ring", str(out)]) == 0
    ring = json.loads(capsys.readouterr().out)
    assert ring["keys"][0]["kid"] == public["kid"] and "d" not in ring["keys"][0]


def test_the_console_script_runs_as_a_real_process(files: Any) -> None:
    rec, keys, _ = files
    done = subprocess.run(
        [sys.executable, "-m", "hatp_mcp.cli", "verify", rec, "--keys", keys, "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert (out["ok"], out["problems"], out["outcome"], out["humanProofs"]) == (True, [], "COMMITTED", "not-checked")


def test_HATP_REC_18_with_no_human_decisions_verify_says_so_and_never_claims_they_are_proven(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from tests.acme_org import ORG_DIR
    from tests.records import rechain

    record, ring, keys = signed_trip_record(outcome="ABORTED")
    begin, close = record["events"][0], record["events"][-1]
    asked = {**begin, "event": "abort.requested", "body": {"reason": "plans changed", "by": "agent://acme.com/b"}}
    abort = {**begin, "event": "decision", "body": {"decision": "abort", "reason": "ABORT_REQUESTED: plans changed"}}
    aborted = rechain(record, [begin, asked, abort, close], keys["coordinator"])
    rec, ring_file = write(tmp_path, "aborted.json", aborted), write(tmp_path, "keys.json", ring.to_jwks())
    assert main(["verify", rec, "--keys", ring_file, "--org", str(ORG_DIR)]) == 0
    out = capsys.readouterr().out
    assert "no human decisions in this record" in out and "valid proof" not in out
    assert "outcome ABORTED is justified by the record: aborted because the agent agent://acme.com/b asked" in out
    assert main(["verify", rec, "--keys", ring_file, "--org", str(ORG_DIR), "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert (found["humanProofs"], found["humanDecisions"], found["outcome"]) == ("none", 0, "ABORTED")
    # an open record: no outcome to check, and the summary says so
    opened = rechain(record, [begin], keys["coordinator"])
    assert main(["verify", write(tmp_path, "open.json", opened), "--keys", ring_file, "--open"]) == 0
    assert "it has no outcome yet, so none was checked" in capsys.readouterr().out


def test_keys_ring_binds_a_key_to_the_party_it_speaks_for_HATP_SIG_6(tmp_path: Path, capsys: Any) -> None:
    hotel = tmp_path / "hotel.jwk"
    assert main(["keys", "new", "--out", str(hotel), "--role", "participant"]) == 0
    capsys.readouterr()
    assert main(["keys", "ring", f"mcp://hotel.example/hatp={hotel}"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["keys"]
    assert entry["party"] == "mcp://hotel.example/hatp" and "d" not in entry
    assert main(["keys", "ring", str(hotel)]) == 0
    assert "party" not in json.loads(capsys.readouterr().out)["keys"][0]


@pytest.mark.parametrize("value", [1.5, 2**60, "\ud800"])
@pytest.mark.parametrize("where", ["body", "evidence"])
def test_a_value_without_a_canonical_form_in_an_event_is_a_problem_not_a_traceback_HATP_CANON_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object, where: str
) -> None:
    record, ring, _ = signed_trip_record()
    event = next(e for e in record["events"] if e.get("evidence"))
    (event["body"] if where == "body" else event["evidence"])["x"] = value
    rec = tmp_path / "record.json"
    rec.write_text(json.dumps(record))
    keys = write(tmp_path, "keys.json", ring.to_jwks())
    assert main(["verify", str(rec), "--keys", keys, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)  # --json prints its answer: never nothing
    assert out["ok"] is False
    # the event itself (a body) or the evidence it carries (a vote) is refused, naming the rule
    assert any("HATP-CANON-2" in (p["rule"], *p["reason"].split(": ")) for p in out["problems"])


@pytest.mark.anyio
async def test_verify_with_org_alone_builds_the_keyring_from_the_organisation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A record of an organisation made by hatp init-org verifies with `--org DIR` and no keyring file: the
    coordinator's key, the participants' pinned keys and the gateway's, each bound to its party, come from DIR."""
    import json as json_module

    import anyio

    from demo.trip_world import build_world, trip_plan
    from hatp_mcp.cli.org_layout import OrgLayout, init_org, load_suite
    from hatp_mcp.core.signing.keys import SigningKey
    from hatp_mcp.core.txn.data import Config
    from hatp_mcp.runtime.clock import FakeClock
    from hatp_mcp.runtime.coordinator.service import TxnService

    root = init_org(tmp_path / "org", "example.org")
    layout, suite = OrgLayout(root), load_suite(root)

    def key_of(server: str) -> SigningKey:
        return SigningKey.from_jwk(json_module.loads((layout.data(server) / "key.jwk.json").read_text()))

    keys = {name: key_of(name) for name in ("coordinator", "airline", "hotel", "calendar", "payments")}
    keys["gateway"] = SigningKey.from_jwk(json_module.loads(layout.gateway_key.read_text()))
    clock = FakeClock()
    world = build_world(clock, keys=keys)
    world.seat.sold_out = True  # the seat votes no: a closed, ABORTED record
    svc = TxnService(
        key=keys["coordinator"],
        keyring=world.keyring,
        participants=world.participants,
        approver=world.approver,
        log=world.log,
        clock=clock,
        config=Config(coordinator=suite.coordinator_id),
    )
    with anyio.fail_after(10):
        async with svc.running():
            await svc.begin(trip_plan(clock.now(), "txn-org-verify", approvals=[]))  # no gateway involved
            done = await svc.wait("txn-org-verify")
    assert done.outcome == "ABORTED" and done.record is not None
    record = tmp_path / "record.json"
    record.write_text(json_module.dumps(done.record))
    capsys.readouterr()
    assert main(["verify", str(record), "--org", str(root), "--json"]) == 0, capsys.readouterr()
    assert json_module.loads(capsys.readouterr().out)["ok"] is True
    other = init_org(tmp_path / "other", "example.net")  # another organisation's keys do not verify it
    assert main(["verify", str(record), "--org", str(other)]) == 1
    assert main(["verify", str(record)]) == 2
    assert "--keys FILE" in capsys.readouterr().err
