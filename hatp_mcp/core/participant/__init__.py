"""A participant's side of a transaction: the branch state machine, tier semantics, leases, preconditions,
cost and fencing locks, and the checks that a request comes from a coordinator it trusts (coordinator_auth, also
applied by the Human Gateway to the asks it is sent). Imports only model and signing.

- branch.py: the branch state machine (a table), leases, preconditions, cost and the fencing lock table;
- coordinator_auth.py: the checks a receiver runs on a coordinator's signed authorization, and making one;
- record_head.py: the record head a participant signs into its answer, so it holds proof of the record it saw;
- signed.py: a participant's signed votes and receipts, built as wire dicts without building a model first.
"""
