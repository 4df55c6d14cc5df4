"""A participant's side of a transaction: the branch state machine, tier semantics, leases, preconditions,
cost and fencing locks. Imports only model and evidence.
"""
