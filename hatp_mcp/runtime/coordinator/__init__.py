"""The coordinator's driver: runs the pure transaction machine (hatp_mcp.core.txn) on a clock, a durable log and
real participants and approvers.

- driver.py: `CoordinatorRuntime`, feeds events to the machine and carries out its commands, durable before send;
- service.py: `TxnService`, transactions in the background for an agent (begin, status, abort by txnId);
- log_writes.py: one transaction's writes to the coordinator's log, forced or deferred as HATP-TXN-4 says;
- plan_locks.py: the locks a plan's branches name, taken before their prepare and fencing their commit;
- alarms.py: the transaction's timers, absolute times reported back as Timer events;
- calls.py: a transaction's concurrent participant and approver calls and the one inbox of their answers;
- fresh_cards_approver.py: an Approver that re-reads the organisation's cards before it hands an answer on;
- waiting_notes.py: an Approver that remembers who each open ask waits for, for the status (HATP-MCP-54);
- scripted_approver.py: an in-memory Approver with a scripted human, for tests and the in-process demo.

May import the core, the stores and the runtime's shared pieces; never another part of the runtime.
"""
