"""tests/mutation/sites.py finds a rule's check from the id it reports and switches exactly that check off."""

from __future__ import annotations

from pathlib import Path

from tests.mutation.sites import find_sites, mutate

# A module of checks in the package's own style: each reports its rule id in one of the ways the finder knows.
CHECKS = """\
from hatp_mcp.errors import HatpError

_RULE_OF = {"HATP-GW-41": "HATP-GATE-19", "HATP-GW-42": "HATP-GATE-14"}


def _refuse(rule, reason):
    return HatpError(rule, reason)


def _stale(ts):
    return HatpError("HATP-TS-1", f"{ts} is stale")


def check(vote, now, keys):
    rule = "HATP-SIG-2"
    if vote.kid is None:  # unsigned
        raise HatpError("HATP-SIG-1", "unsigned")
    if vote.kid not in keys:
        raise _refuse(rule, "unknown key")
    elif vote.ts > now:
        raise _stale(vote.ts)
    if vote.rule == "HATP-SIG-3":
        return None
    _same("HATP-SIG-4", vote.a, vote.b)
    try:
        check_party(vote)
    except ValueError as exc:
        raise HatpError("HATP-SIG-5", str(exc)) from exc
    try:
        kid = parse(vote)
    except ValueError as exc:
        raise HatpError("HATP-SIG-6", str(exc)) from exc
    try:
        check_people(vote)
    except HatpError as exc:
        raise _refuse(_RULE_OF[exc.rule], exc.reason) from exc
    return kid


def check_finals(plan):
    finals = [b for b in plan.branches if b.tier == "final"]
    if len(finals) <= 1:
        return []
    return [HatpError("HATP-VAL-3", b.branch_id) for b in finals[1:]]
"""


def _found(tmp_path: Path) -> tuple[dict[str, list[tuple[int, str, str]]], dict[str, list[str]]]:
    (tmp_path / "hatp_mcp").mkdir()
    (tmp_path / "hatp_mcp" / "checks.py").write_text(CHECKS)
    found = find_sites(tmp_path, manual={})
    lines = CHECKS.splitlines()
    sites = {
        rule: [(s.line, s.kind, lines[s.line - 1][s.col : s.end_col] if s.line == s.end_line else "") for s in got]
        for rule, got in found.sites.items()
    }
    return sites, found.unmutable


# What the finder must see in CHECKS (rule ids live out here: a test function naming them would be credited with
# planting their violations, tests/violations_appendix.py).
EXPECTED = {
    "HATP-SIG-1": [(16, "if", "vote.kid is None")],
    "HATP-SIG-2": [(18, "if", "vote.kid not in keys")],
    "HATP-TS-1": [(20, "if", "vote.ts > now")],
    "HATP-SIG-4": [(24, "call", '_same("HATP-SIG-4", vote.a, vote.b)')],
    "HATP-SIG-5": [(28, "except", 'raise HatpError("HATP-SIG-5", str(exc)) from exc')],
    "HATP-GATE-19": [(36, "except", "raise _refuse(_RULE_OF[exc.rule], exc.reason) from exc")],
    "HATP-GATE-14": [(36, "except", "raise _refuse(_RULE_OF[exc.rule], exc.reason) from exc")],
    "HATP-VAL-3": [(44, "tail", '[HatpError("HATP-VAL-3", b.branch_id) for b in finals[1:]]')],
}
DISPATCHED = "HATP-SIG-3"  # compared against: a dispatch, not a check
UNMUTABLE = {"HATP-SIG-6": ["hatp_mcp/checks.py:32"]}  # a value the code goes on to use
UNSIGNED, VIOLATIONS, HANDLER = "HATP-SIG-1", "HATP-VAL-3", "HATP-SIG-5"


def test_a_check_is_found_from_the_rule_id_it_reports_directly_through_a_name_a_helper_or_a_map(tmp_path: Path) -> None:
    sites, unmutable = _found(tmp_path)
    assert sites == EXPECTED
    assert DISPATCHED not in sites and DISPATCHED not in unmutable
    assert unmutable == UNMUTABLE


def test_switching_a_check_off_rewrites_only_its_own_span_and_keeps_the_module_valid(tmp_path: Path) -> None:
    (tmp_path / "hatp_mcp").mkdir()
    (tmp_path / "hatp_mcp" / "checks.py").write_text(CHECKS)
    found = find_sites(tmp_path, manual={}).sites
    for rule, sites in found.items():
        text = mutate(CHECKS, sites)
        compile(text, rule, "exec")
        changed = [(a, b) for a, b in zip(CHECKS.splitlines(), text.splitlines(), strict=True) if a != b]
        assert len(changed) == len({s.line for s in sites}), rule
    assert mutate(CHECKS, found[UNSIGNED]).splitlines()[15] == "    if False:  # unsigned"  # the comment stays
    assert mutate(CHECKS, found[VIOLATIONS]).splitlines()[43] == "    return []"
    assert mutate(CHECKS, found[HANDLER]).splitlines()[27] == "        pass"


def test_the_package_reports_most_rule_ids_at_sites_the_finder_locates() -> None:
    found = find_sites()
    assert len(found.sites) >= 190
    kinds = {s.kind for sites in found.sites.values() for s in sites}
    assert {"if", "call", "except", "tail"} <= kinds
