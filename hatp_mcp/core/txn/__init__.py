"""The coordinator's transaction: its state machine, events and commands, mode choice and deadlines, the checks it
applies to votes, receipts and approvals, status, and the hash-chained Transaction Record with its offline
verification. The machine is data: `machine.TRANSITIONS`, the exact `(state, step) -> state`, decides every state
change; the phase functions compute what to send and name each step (`events.Step`), never setting a state. The
top of the core: may import every other part; nothing in core imports it.
"""
