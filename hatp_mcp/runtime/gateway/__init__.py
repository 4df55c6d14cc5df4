"""The Human Gateway's driver: the pure ask machine (hatp_mcp.core.gateway) on a clock, a store and signing keys.

- driver.py: `GatewayApprover`, the coordinator's Approver and the people's inbox: persists before it answers,
  signs votes, approvals and answers, arms SLA and deadline timers;
- delivery/: telling people an ask waits for them, over their cards' channels (settings, channels, the Deliverer);
- journal_alerts.py: the journal's dead letters sent over the same channels (HATP-JRN-16).

May import the core, the stores and the runtime's shared pieces; never another part of the runtime.
"""
