"""The rules the bounded mutation run in `make test` switches off (tests/mutation/test_run.py): a fixed sample
across the coordinator, the record's verification, the gateway, the gate, the participant, the validators, the
signatures and the journal, each killed in seconds by a pure-core test. `make mutation` runs every rule."""

from __future__ import annotations

SAMPLE = (
    "HATP-TXN-2",  # coordinator: a receipt counts only from the branch participant's own key
    "HATP-REC-1",  # verify: the record's sequence
    "HATP-GW-5",  # gateway: separation of duties
    "HATP-GW-68",  # gateway: a passkey assertion from the wrong origin
    "HATP-GATE-5",  # gate: an approval for another server
    "HATP-GATE-18",  # gate: a replayed approval
    "HATP-TRUST-1",  # participant: a request without the coordinator's auth
    "HATP-PART-13",  # participant: a hold killed inside its transaction
    "HATP-VAL-3",  # validator: one final branch
    "HATP-SAGA-2",  # saga validator: pivot ordering
    "HATP-SIG-6",  # signatures: a key signs only as its party
    "HATP-JRN-8",  # journal: bounded undo retries
)
