"""The journal: durable saga undo for what an agent already did. Its pure parts: the saga's step machine (states,
transition tables, LIFO rollback, in-doubt steps, retries), its vocabulary of events and commands, and the signed,
hash-chained journal record with its offline verification, and the notice a dead letter becomes. May import
model, evidence and humans.notice; nothing in core imports it. No IO, no clock: `now` is passed in.
"""
