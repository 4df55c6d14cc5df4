"""The fault-injection soak (soak.py): many trips under injected faults, each checked all-or-nothing."""
