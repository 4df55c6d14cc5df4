"""Rules whose check survives the mutation run, each with the reason no planted violation can notice it is off.

Reviewed like code: a rule listed here that is killed (or no longer has a site) fails tests/mutation/test_table.py,
so the list only shrinks. Write the missing planted violation before adding a rule here.
"""

from __future__ import annotations

EXEMPT: dict[str, str] = {}
