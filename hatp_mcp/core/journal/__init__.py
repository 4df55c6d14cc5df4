"""The journal: durable saga undo for what an agent already did. Its pure parts: the saga's step machine (states,
transition tables, LIFO rollback, in-doubt steps, retries), its vocabulary of events and commands, and the signed,
hash-chained journal record with its offline verification, and the notice a dead letter becomes. May import
model, signing and gateway.notice; nothing in core imports it. No IO, no clock: `now` is passed in.

- events.py: the vocabulary: saga statuses, step states, events fed in, commands returned, the entries' names;
- machine.py: one saga's step machine: `handle(event, now)`, and `replay(entries)` after a restart;
- record.py: a saga's journal record: signed, hash-chained events, and verifying one offline (HATP-JRN-12);
- undo_spec.py: the undo an agent registers, `{server, tool, arguments}`: data, never a command (HATP-JRN-13);
- undo_map.py: the journaling proxy's legacy undo map: which upstream tool undoes which, arguments by JSON pointer;
- proxy_tools.py: the proxy's decision per upstream tool, checked against the upstream's tools; undo arguments;
- alert.py: the notice a dead letter becomes, so that a person can find and finish the step (HATP-JRN-16).
"""
