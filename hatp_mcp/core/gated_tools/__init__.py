"""Approval-gated tools: tool-call digests and requirements, the gate's checks of an approval, and the gateway's
side of routing one call. Imports gateway, model and signing; never txn or journal.

- checks.py: what a gated tool requires, the call digest, and `check_approval`, which fits an approval to a call;
- signatures.py: the Ed25519 signatures a tool-call approval carries, found ahead of the checks to verify together;
- gateway_routing.py: the gateway's side: one call routed like a one-step plan, its authority and its Approval.
"""
