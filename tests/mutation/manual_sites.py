"""Check sites tests/mutation/sites.py cannot find from the rule id they report, named by hand.

rule id -> [(file, the exact source of the test of the `if` that is the check)]: the runner switches that `if` off
(its test becomes False). Keep this short: a check that reports its rule id is found without it.
"""

from __future__ import annotations

MANUAL_SITES: dict[str, list[tuple[str, str]]] = {}

# file -> {the name a check reports instead of the rule id: the rule id}
ALIASES: dict[str, dict[str, str]] = {
    "hatp_mcp/core/validate/saga.py": {
        "pivot-ordering": "HATP-SAGA-2",
        "class-coherence": "HATP-SAGA-3",
        "mandate": "HATP-SAGA-4",
        "undo-ttl": "HATP-SAGA-5",
        "key-integrity": "HATP-SAGA-6",
    },
}
