"""Fixtures of the alerts tests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from uuid import uuid4

import pytest

from coolant.alerts.feed import ensure, topic_names
from tests.support.kafka import delete_topics


@pytest.fixture
async def prefix(kafka_bootstrap: str) -> AsyncIterator[str]:
    """A test's own topic prefix, its cooldowns and transitions topics created, deleted after."""
    p = f"t{uuid4().hex[:8]}."
    await ensure(p, topic_names(p, True, True), {"bootstrap_servers": kafka_bootstrap})
    yield p
    await delete_topics(kafka_bootstrap, [p])
