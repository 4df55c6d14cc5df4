"""A participant's side of a transaction: the branch state machine, tier semantics, leases, preconditions,
cost and fencing locks, and the checks that a request comes from a coordinator it trusts (coordinator_auth, also
applied by the Human Gateway to the asks it is sent). Imports only model and evidence.
"""
