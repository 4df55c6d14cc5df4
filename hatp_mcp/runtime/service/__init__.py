"""The local HATP service: one supervisor that keeps an organisation's servers running as its children.

- restart.py: when a child that died is started again (bounded, with backoff), as a pure policy;
- supervisor.py: the children as processes: each started once those it needs are ready, restart, status, logs,
  stop.

It knows no HATP method and no MCP: a child is a command that prints one readiness line naming its port. It may
import the runtime's shared pieces and the stores; no protocol part (coordinator, gateway, participant, journal).
"""
