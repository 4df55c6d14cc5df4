"""A participant's driver: the pure branch machine (hatp_mcp.core.participant) around a tool author's operations.

- driver.py: `ParticipantRuntime`, checks the plan digest, signs votes and receipts, answers durably, runs each
  effect exactly once;
- operation.py: what a tool author implements per operation (`Operation`, `StoreOperation`);
- fencing.py: the participant's fencing-token locks, durable across restarts (HATP-LOCK-1..3).

May import the core, the stores and the runtime's shared pieces; never another part of the runtime.
"""
