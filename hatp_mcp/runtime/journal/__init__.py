"""The journal's driver: durable sagas around the pure step machine (hatp_mcp.core.journal).

- driver.py: `Journal`, sagas that register each step before it runs and undo last-first on rollback;
- undoable.py: a tool the journal can run and undo (`undoable(name, execute, undo, lookup=None)`).

May import the core, the stores and the runtime's shared pieces; never another part of the runtime.
"""
