"""`hatp digest`: a plan's digest, and one clean line (exit 1) for a plan that has no canonical form."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hatp_mcp.cli import main
from hatp_mcp.core.model.plan import Plan

FIXTURES = Path(__file__).resolve().parents[2] / "spec" / "fixtures" / "hatp"


def test_the_digest_of_a_valid_plan_is_printed(capsys: pytest.CaptureFixture[str]) -> None:
    path = FIXTURES / "trip.valid.json"
    assert main(["digest", str(path)]) == 0
    assert capsys.readouterr().out.strip() == Plan.model_validate(json.loads(path.read_text())).digest()


@pytest.mark.parametrize(
    ("value", "said"),
    [(31.5, "float 31.5 is not allowed"), (2**64, "outside +-(2**53 - 1)"), ("\ud800", "lone surrogate")],
)
def test_a_plan_without_a_canonical_form_exits_1_with_one_line_naming_the_path_HATP_CANON_2(
    value: object, said: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plan = json.loads((FIXTURES / "trip.valid.json").read_text())
    plan["branches"][0]["args"]["x"] = value
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan))
    assert main(["digest", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "HATP-CANON-2 at $.branches[0].args.x" in err and said in err
