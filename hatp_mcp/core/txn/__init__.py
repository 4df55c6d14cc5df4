"""The coordinator's transaction: its state machine, events and commands, mode choice and deadlines, the checks it
applies to votes, receipts and approvals, status, and the hash-chained Transaction Record with its offline
verification. The top of the core: may import every other part; nothing in core imports it.
"""
