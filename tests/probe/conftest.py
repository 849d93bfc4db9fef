"""Fixtures of the prober tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.probe.upstream import FakeUpstream


@pytest.fixture
async def upstream(request: pytest.FixtureRequest) -> AsyncIterator[FakeUpstream]:
    """A fake OpenAI-compatible upstream answering the test module's `STATUSES` (deployment -> HTTP status)."""
    up = FakeUpstream(statuses=dict(getattr(request.module, "STATUSES", {})))
    await up.start()
    yield up
    await up.stop()
