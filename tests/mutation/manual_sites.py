"""Check sites tests/mutation/sites.py cannot find from the rule id they report, named by hand.

rule id -> [(file, the source of a condition in an `if` that is the check, what it becomes with the check
off)]: `False` for an `if` that refuses, `True` for one that lets through. Keep this short: a check that reports its
rule id is found without it.
"""

from __future__ import annotations

MANUAL_SITES: dict[str, list[tuple[str, str, str]]] = {
    # begin validates the plan: the coordinator refuses it (as HATP-TXN-1) when the validator reports anything
    "HATP-MCP-20": [("hatp_mcp/core/txn/machine.py", "violations", "False")],
    # the approval deadline's timer aborts while a requirement is not yet approved (the abort names no rule id)
    "HATP-TXN-7": [
        ("hatp_mcp/core/txn/timers.py", 'any(t.approvals.status.get(r.id) != "yes" for r in t.plan.approvals)', "False")
    ],
    # a lost hold is placed again (its `else` branch): with the check off it is given up as lapsed instead
    "HATP-TXN-8": [("hatp_mcp/core/txn/phase2.py", "t.state in (T.IN_DOUBT,) or irreversible_done(t)", "True")],
    # before a commit step a short lease is renewed: with the check off no lease is renewed before committing
    "HATP-TXN-9": [
        (
            "hatp_mcp/core/txn/commit.py",
            "expires is None or (expires <= now + timedelta(seconds=need) and expires < h.horizons.get(b, expires))",
            "False",
        )
    ],
    # a replacement commits only on a logged commit decision: with the check off it presumes commit, not abort
    "HATP-TXN-12": [("hatp_mcp/core/txn/phase2.py", 'decision == "commit"', "True")],
    # the inbox lists a person's own asks only: with the filter off it lists every ask
    "HATP-GW-72": [
        (
            "hatp_mcp/web/inbox.py",
            'any(seat.human == human and seat.status in ("asked", "decided") for seat in s.record.seats)',
            "True",
        )
    ],
}

# file -> {the name a check reports instead of the rule id: the rule id}
ALIASES: dict[str, dict[str, str]] = {
    "hatp_mcp/core/validate/saga_rules.py": {
        "pivot-ordering": "HATP-SAGA-2",
        "class-coherence": "HATP-SAGA-3",
        "mandate": "HATP-SAGA-4",
        "undo-ttl": "HATP-SAGA-5",
        "key-integrity": "HATP-SAGA-6",
    },
}
