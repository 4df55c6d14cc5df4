"""The stores on PostgreSQL (psycopg 3 with psycopg_pool): one database shared by several processes and machines.

Each module serves the interface of its namesake in hatp_mcp.store with the same guarantees (a call returns only
once what it wrote is committed; commits are durable: the server's fsync and synchronous_commit stay on). It
may import psycopg; nothing else in hatp_mcp does, so SQLite installs need none of it.

- pools.py: connection pools to one database, calls retried on a fresh connection, the schema check at open;
- txn_log.py: the coordinator's decision log, group-committed, and each transaction's owner lease (HATP-STORE-4);
- participant_state.py: a participant's branch state, each put one committed statement;
- txn_bindings.py: the txnId -> coordinator bindings a receiver keeps, and the highest epoch per txnId;
- replay_cache.py: a gated tool server's replay cache: of two servers spending one approval, exactly one does;
- gateway_store.py: the Human Gateway's state; a read-modify-write of an ask holds its row;
- deliveries.py: the gateway's delivery queue, each due delivery claimed by one process without waiting;
- journal_store.py: the journal's store, group-committed; a step's entries and its dead letter committed together.
"""
