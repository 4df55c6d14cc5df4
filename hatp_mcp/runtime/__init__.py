"""Drivers that feed events to the core, persist before sending, and arm deadlines from absolute times."""
