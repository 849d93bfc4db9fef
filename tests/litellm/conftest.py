"""Fixtures of the LiteLLM integration tests (their helpers are in support_litellm.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.upstream import FakeOpenAI


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    """A fake of the OpenAI API on 127.0.0.1 for one test (test_litellm_callback.py shares one per module)."""
    with FakeOpenAI() as server:
        yield server
