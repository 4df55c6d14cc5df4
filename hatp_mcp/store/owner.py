"""The owner id a process names itself by in a store shared with other processes: the coordinator's leases
(HATP-STORE-4), the gateway's timer steps and delivery claims (spec/gateway.md HATP-GW-76..79)."""

from __future__ import annotations

import os
import socket

__all__ = ["default_owner"]


def default_owner() -> str:
    """This process's owner id: host and pid (unique among the processes sharing one database at one time)."""
    return f"{socket.gethostname()}/{os.getpid()}"
