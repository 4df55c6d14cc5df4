"""servers/_inventory.py: a transaction's own changes keep the version, outside changes bump it, effects happen once."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from servers._inventory import Inventory, Item

RESOURCES = ("a", "b", "c")
STATES = ("free", "held", "taken", "gone")
HOLDERS = (None, "t-1", "t-2")
Step = tuple[str, str, str, str | None]
steps = st.lists(
    st.tuples(
        st.sampled_from(("set", "outside", "effect")),
        st.sampled_from(RESOURCES),
        st.sampled_from(STATES),
        st.sampled_from(HOLDERS),
    ),
    max_size=12,
)


def _oracle(items: dict[str, Item], effects: set[str], step: Step, n: int) -> None:
    """What each change does, read then written (the inventory's contract)."""
    kind, resource, state, holder = step
    old = items.get(resource, Item(resource, 1, "free", None))
    if kind == "set":
        items[resource] = Item(resource, old.version, state, holder)
    elif kind == "outside":
        items[resource] = Item(resource, old.version + 1, state, holder)
    elif f"k{n % 3}" not in effects:  # the same key never changes anything twice
        effects.add(f"k{n % 3}")
        items[resource] = Item(resource, old.version, state, holder)


@settings(max_examples=60, deadline=None)
@given(steps)
def test_each_change_keeps_or_bumps_the_version_as_its_kind_says(tmp_path_factory: object, script: list[Step]) -> None:
    path = Path(tmp_path_factory.mktemp("inv")) / "inventory.db"  # type: ignore[attr-defined]
    inventory = Inventory(path)
    items: dict[str, Item] = {}
    effects: set[str] = set()
    try:
        for n, step in enumerate(script):
            kind, resource, state, holder = step
            if kind == "set":
                made = inventory.set_state(resource, state, holder)
            elif kind == "outside":
                made = inventory.outside_change(resource, state, holder or "outside")
                holder = holder or "outside"
            else:
                inventory.apply_effect(f"k{n % 3}", "commit", resource, state, holder)
            _oracle(items, effects, (kind, resource, state, holder), n)
            if kind != "effect":
                assert made == items[resource]
            for r in RESOURCES:
                assert inventory.get(r) == items.get(r, Item(r, 1, "free", None))
    finally:
        inventory.close()
