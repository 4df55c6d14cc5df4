"""The sans-IO core: pure functions and state machines.

Nothing under hatp_mcp.core imports anyio, mcp, sqlite3, os, time or socket, reads a clock or waits.
tests/test_layering.py and the import contracts (tests/test_import_contracts.py) enforce this.

Its parts, top first; each imports only the parts below it:

- txn/: the coordinator's transaction: its state machine, the checks of evidence, the Transaction Record;
- journal/: durable saga undo: the step machine and the signed, hash-chained journal record;
- gated_tools/: approval-gated tools: call digests, the gate's checks, the gateway's routing of one call;
- gateway/: the human side: addresses, the Directory, the gateway's routing machine, authority and proofs;
- participant/: a participant's side: the branch machine, leases, locks, and the trusted coordinator checks;
- validate/: the static validator: every rule of spec/validation.md over a plan or a saga artifact;
- model/: the typed wire objects of HATP;
- signing/: canonical JSON, digests, Ed25519 keys and keyrings, signing and verifying.
"""
