"""Durable state behind one Protocol per store: SQLite by default (WAL, synchronous=FULL), PostgreSQL in
`postgresql/` (imported only when a postgresql:// store is opened, `url.py`). Schemas are versioned (`schema.py`).
Stores keep what the runtime decided; they decide nothing and know no transport. May import the core.

Opening a store:

- url.py: where a server's durable state lives, named by one URL (`sqlite:PATH` or `postgresql://...`), opened;
- sqlite.py: `open_db`, SQLite opened the one way HATP needs it: WAL, synchronous=FULL;
- schema.py: versioned, forward-only store schemas, checked and brought up to date at start (HATP-STORE-1);
- dsn.py: a PostgreSQL URL as a message may show it, never with the password;
- errors.py: the failures every backend shares: the database unreachable, a group commit interrupted;
- group_commit.py: the one queue in front of the log's and the journal's writes: one durable commit per batch;
- data_lock.py: one process at a time on a folder (the service, a proxy): a kernel lock released when it ends;
- owner.py: the owner id a process names itself by in a store shared with other processes;
- files.py: small files that must never be seen half written: keys and trust-on-first-use pins;
- private_files.py: reading a secret file (key, token, password) whose mode is checked on the opened file;
- pin_file.py: a pin file: public keys an operator pinned, each bound to its party; keys are only ever added.

The stores (most with a PostgreSQL namesake in postgresql/):

- txn_log.py: the coordinator's durable log: each transaction's plan, record events and decisions;
- participant_state.py: a participant's durable branch state, one row per (txnId, branchId);
- txn_bindings.py: which coordinator and plan a receiver keeps each transaction with, and its highest epoch;
- spend_ledger.py: the proxy's durable spends per agent and currency, counted against its budgets;
- step_rules.py: the policy rules an older proxy kept apart from its journal, read for the steps it journaled;
- shadow_log.py: what the proxy in shadow mode let through that its policy would have refused, with the rule;
- replay_cache.py: a gated tool server's spent approval nonces and when each tool definition took effect;
- gateway_store.py: the Human Gateway's asks, contacts, outbox, submitted proofs, spent nonces and timer steps;
- deliveries.py: the gateway's delivery queue: one row per notice, where its delivery stands, who is making it;
- inbox_state.py: the web inbox's sessions, issued WebAuthn challenges and passkey sign counts (SQLite only);
- journal_store.py: the journal's store: each saga's signed record events, and the dead letters to finish.
"""
