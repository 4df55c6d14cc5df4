"""The soak's bounded form: a few hundred trips under injected faults end all-or-nothing with verified records,
and the soak's checks catch a planted double effect and a record that does not verify."""

from __future__ import annotations

import pytest

from demo.trip_world import CardCapture
from hatp_mcp.core.signing.keys import SigningKey
from tests.soak import soak as soak_mod
from tests.soak.soak import FAULTS, soak


@pytest.mark.anyio
async def test_three_hundred_trips_under_faults_and_coordinator_crashes_end_all_or_nothing() -> None:
    report = await soak(300, seed=7, crash_rate=0.1)
    assert report.violations == []
    assert sum(report.outcomes.values()) == 300
    assert report.outcomes["COMMITTED"] > 0 and report.outcomes["ABORTED"] > 0
    assert report.crashes > 0
    seen = {key.split(":")[1] for key in report.faults}
    assert seen == {name for name, _ in FAULTS}  # every kind of fault was injected


@pytest.mark.anyio
async def test_the_soak_catches_an_effect_performed_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    real = CardCapture.perform

    async def twice(self: CardCapture, *args: object, **kwargs: object) -> str | None:
        await real(self, *args, **kwargs)  # type: ignore[arg-type]
        return await real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(CardCapture, "perform", twice)
    report = await soak(20, seed=3, crash_rate=0.0)
    assert any("an effect happened twice" in v for v in report.violations)
    assert all("captured=2" in v for v in report.violations)


@pytest.mark.anyio
async def test_the_soak_catches_a_record_that_does_not_verify(monkeypatch: pytest.MonkeyPatch) -> None:
    real = soak_mod.build_world

    def world_with_a_stranger_signing(*args: object, **kwargs: object) -> soak_mod.World:
        world = real(*args, **kwargs)  # type: ignore[arg-type]
        world.keys["coordinator"] = SigningKey.generate(["coordinator"], kid="not-in-the-keyring")
        return world

    monkeypatch.setattr(soak_mod, "build_world", world_with_a_stranger_signing)
    report = await soak(10, seed=3, crash_rate=0.0)
    assert len(report.violations) == 10
    assert all("record does not verify" in v and "HATP-SIG-2" in v for v in report.violations)
