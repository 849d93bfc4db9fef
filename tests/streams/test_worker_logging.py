"""`coolant worker` without -v: the libraries' INFO chatter off, and the Kafka client's start-up ERRORs that
recover by themselves dropped; everything else (coolant's own logs, real errors) still reported."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from aiokafka import errors

from coolant.streams.worker import LIBRARY_LOGGERS, quiet_libraries

NOISY = ("aiokafka.consumer.group_coordinator", "aiokafka.cluster")


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@pytest.fixture
def quiet() -> Iterator[Capture]:
    names = (*LIBRARY_LOGGERS, *NOISY, "coolant")
    saved = {n: (logging.getLogger(n).level, list(logging.getLogger(n).filters)) for n in names}
    capture = Capture()
    root = logging.getLogger()
    root.addHandler(capture)
    quiet_libraries()
    try:
        yield capture
    finally:
        root.removeHandler(capture)
        for n, (level, filters) in saved.items():
            logging.getLogger(n).setLevel(level)
            logging.getLogger(n).filters[:] = filters


def test_library_info_is_off_coolant_info_is_not(quiet: Capture) -> None:
    logging.getLogger("coolant").setLevel(logging.INFO)
    assert not logging.getLogger("faust.tables.recovery").isEnabledFor(logging.INFO)
    assert not logging.getLogger("mode.services").isEnabledFor(logging.INFO)
    assert logging.getLogger("faust.tables.recovery").isEnabledFor(logging.WARNING)
    assert logging.getLogger("coolant.streams.app").isEnabledFor(logging.INFO)


def test_start_up_noise_dropped_real_errors_kept(quiet: Capture) -> None:
    coordinator, cluster = (logging.getLogger(n) for n in NOISY)
    coordinator.error("Group Coordinator Request failed: %s", errors.GroupCoordinatorNotAvailableError())
    coordinator.error("Group Coordinator Request failed: %s", errors.GroupAuthorizationFailedError())
    cluster.error("Topic %s not found in cluster metadata", "coolant-cooldown-history-changelog")
    cluster.error("Topic %s not found in cluster metadata", "coolant.outcomes")
    assert quiet.messages == [
        f"Group Coordinator Request failed: {errors.GroupAuthorizationFailedError()}",
        "Topic coolant.outcomes not found in cluster metadata",
    ]
