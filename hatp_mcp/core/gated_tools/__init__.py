"""Approval-gated tools: tool-call digests and requirements, the gate's checks of an approval, and the gateway's
side of routing one call. Imports humans, evidence, model; never txn.
"""
