"""Fixtures of the prober tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.upstream import FakeOpenAI


@pytest.fixture
def upstream(request: pytest.FixtureRequest) -> Iterator[FakeOpenAI]:
    """The fake OpenAI upstream failing as the test module's `STATUSES` says (deployment -> HTTP status)."""
    with FakeOpenAI(failing=getattr(request.module, "STATUSES", {})) as up:
        yield up
