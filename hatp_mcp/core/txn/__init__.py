"""The coordinator's transaction: its state machine, events and commands, mode choice and deadlines, the checks it
applies to votes, receipts and approvals, status, and the hash-chained Transaction Record with its offline
verification. The top of the core: may import every other part but the journal; nothing in core imports it.

The machine is data: `machine.TRANSITIONS`, the exact `(state, step) -> state`, decides every state change; the
phase functions compute what to send and name each step (`events.Step`), never setting a state. Top first (each
imports only those below it):

- machine.py: the state machine at a glance: `TRANSITIONS`, `ACCEPTS` and `handle`, which sends each event to its
  phase;
- phase1.py: phase 1: prepare and quote votes, the approvers' answers, and the decision to commit;
- phase2.py: phase 2's answers (renew, commit, abort, compensate) and a replacement coordinator's start;
- resume.py: whether a replacement's record waits only for a human, and taking the approving phase up again;
- timers.py: what each timer does when it fires; a timer re-armed or cancelled since does nothing;
- commit.py: carrying out a commit decision in commit order, a commit in doubt, and recovery after it;
- deadlines.py: the approval deadline and the holds' leases: when a lease is renewed, what a receipt changes;
- abort.py: deciding abort and carrying it out in reverse commit order, and how a transaction finishes;
- terms.py: what the coordinator does with approval terms: tightening a pending ask, checking an Approval's;
- data.py: the machine's data, grouped by what it describes, its configuration, and `fire(step)`.

Beside it:

- events.py: the machine's vocabulary: its states, the steps between them, the events a driver feeds it, the
  commands it returns;
- timing.py: the mode a transaction runs in, chosen by the clock at begin, and the commit order;
- participant_fit.py: whether the plan assumes more time than its participants' stated bounds offer;
- evidence_checks.py: what the coordinator checks before it counts a participant's or an approver's answer;
- status.py: what a coordinator says about one transaction, read from its durable log;
- record.py: the hash-chained Transaction Record: appending events, and verifying a record offline;
- outcome.py: whether a record's outcome is justified by the evidence inside it;
- anchors.py: a record checked against the record heads the other parties signed;
- problem.py: one problem found in a Transaction Record: where, which rule, why.
"""
