"""Fuzzing every parser and boundary: strategies (strategies.py), targets (targets.py), the bounded run in the
suite (test_fuzz.py) and the long run with counts per target (`make fuzz`, run.py)."""
