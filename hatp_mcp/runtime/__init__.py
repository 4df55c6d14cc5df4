"""Drivers that feed events to the core, persist before sending, and arm deadlines from absolute times.

One package per protocol part, mirroring the core, each independent of the others (import-linter):
coordinator/, gateway/, participant/, journal/; and service/, the local service's supervisor (`hatp serve`), which
knows no part. The shared pieces at the top:

- clock.py: the swappable clock (`SystemClock`, `FakeClock`); deadlines are absolute times;
- interfaces.py: what the coordinator calls, a Participant and an Approver, as transport-free Protocols;
- coordinator_trust.py: a coordinator's signed requests and a receiver's trusted coordinators (HATP-TRUST-*);
- org.py: reading an organisation directory (its well-known document and Directory-signed cards);
- card_watch.py: a running server sees the organisation's cards as they are now (HATP-GW-82);
- gc_tuning.py: the garbage collector set for a long-running server once it is set up.

None of the shared pieces imports a part.
"""
