"""Issue 26: a record's text is shown on one line, redacted, in `tail`, in alerts and in logs."""

from __future__ import annotations

import logging
import time

import msgspec
import pytest

from coolant.alerts.render import line
from coolant.alerts.slack import cooldown_payload, transition_payload
from coolant.io import logs
from tests.alerts.support import cooldown, transition

HOSTILE = "boom\n2026-01-01 00:00:00Z  COOLDOWN forged (g)  \x1b[2J password=hunter2 -----BEGIN PRIVATE KEY-----\nMIIE"


def test_tail_shows_one_line_per_record_whatever_its_text() -> None:
    cd = msgspec.structs.replace(cooldown(1, dep="dep\nforged"), model_group="g\r\nx", exception_received=HOSTILE)
    ht = msgspec.structs.replace(transition(1, healthy=False, previous=True), prober="p\nq", probe_event_id="e\x1b[0m",
                                 exception_received=HOSTILE)
    for rec in (cd, ht):
        text = line(rec, 1_800_000_000.0)
        assert text is not None
        plain = text.plain
        assert "\n" not in plain and "\r" not in plain and "\x1b" not in plain, plain
        assert "hunter2" not in plain and "MIIE" not in plain
    assert "dep\\nforged" in line(cd, 1_800_000_000.0).plain  # type: ignore[union-attr]


def test_alerts_keep_their_own_lines_only() -> None:
    cd = msgspec.structs.replace(cooldown(1, dep="dep\nforged"), exception_received=HOSTILE)
    ht = msgspec.structs.replace(transition(1, healthy=False, previous=True), exception_received=HOSTILE)
    for payload, lines in ((cooldown_payload(cd), 4), (transition_payload(ht), 3)):
        body = payload["blocks"][0]["text"]["text"]
        assert body.count("\n") == lines - 1, body
        assert "\n" not in payload["text"] and "hunter2" not in str(payload) and "MIIE" not in str(payload)


@pytest.fixture
def safe_logs() -> object:
    before = logging.getLogRecordFactory()
    logs.install()
    yield
    logging.setLogRecordFactory(before)


def test_log_messages_are_one_line_and_redacted(safe_logs: object, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="coolant.test"):
        logging.getLogger("coolant.test").warning("dead letter %s: %s", "t[0]@1", HOSTILE)
    (record,) = caplog.records
    message = record.getMessage()
    assert "\n" not in message and "\x1b" not in message and "hunter2" not in message and "MIIE" not in message
    assert message.startswith("dead letter t[0]@1: boom\\n2026-01-01")


def test_a_library_error_repeated_during_an_outage_is_one_line_then_a_count(caplog: pytest.LogCaptureFixture) -> None:
    now = [1000.0]
    repeats = logs.Repeats(window=60.0, clock=lambda: now[0])
    conn, fetcher = logging.getLogger("aiokafka.conn.test"), logging.getLogger("aiokafka.fetcher.test")
    for lg in (conn, fetcher):
        lg.addFilter(repeats)
        lg.setLevel(logging.DEBUG)  # whatever level another test left "aiokafka" at
    try:
        with caplog.at_level(logging.INFO):
            for i in range(2200):  # a broker restart: every connection's every retry
                now[0] += 0.01
                conn.error("Unable connect to node with id %s: %s", i % 3, "[Errno 111] Connect call failed")
                if i % 100 == 0:
                    fetcher.error("Failed fetch messages from %s: %s", 1, "NodeNotReadyError")
            conn.info("connected")  # below WARNING: never held
            now[0] += 60
            conn.error("Unable connect to node with id %s: %s", 1, "[Errno 111] Connect call failed")
        lines = [r.getMessage() for r in caplog.records]
        assert len([m for m in lines if m.startswith("Unable connect")]) == 2
        assert len([m for m in lines if m.startswith("Failed fetch")]) == 1
        assert "connected" in lines
        assert lines[-1].endswith("[and 2,199 more like it in the last 82 s]"), lines[-1]
    finally:
        for lg in (conn, fetcher):
            lg.removeFilter(repeats)
            lg.setLevel(logging.NOTSET)


def test_an_outage_ends_with_one_line_counting_what_was_held_back(caplog: pytest.LogCaptureFixture) -> None:
    """The errors stop (the broker is back): the count follows as one WARNING line once the template has been
    quiet, and the next error of that kind (the next outage) is logged again, not counted into the last one."""
    now = [1000.0]
    repeats = logs.Repeats(window=60.0, clock=lambda: now[0], quiet=10.0)
    conn = logging.getLogger("aiokafka.conn.test")
    conn.addFilter(repeats)
    conn.setLevel(logging.DEBUG)
    try:
        with caplog.at_level(logging.INFO):
            for i in range(500):
                now[0] += 0.01
                conn.error("Unable connect to node with id %s: %s", i % 3, "[Errno 111] Connect call failed")
            now[0] += 9.9
            assert repeats.report() == 0, "quiet for less than 10 s: the outage may go on"
            now[0] += 0.2
            assert repeats.report() == 1
            assert repeats.report() == 0, "each count is reported once"
            now[0] += 5
            conn.error("Unable connect to node with id %s: %s", 0, "[Errno 111] Connect call failed")
        records = [(r.levelname, r.getMessage()) for r in caplog.records]
        errors = [m for level, m in records if level == "ERROR"]
        counts = [m for level, m in records if level == "WARNING"]
        assert len(errors) == 2, records
        assert errors[1] == "Unable connect to node with id 0: [Errno 111] Connect call failed", errors[1]
        assert counts == ["aiokafka.conn.test: 499 more like 'Unable connect to node with id %s: %s' in the "
                          "last 15 s (held back, one line per outage)"], counts
    finally:
        conn.removeFilter(repeats)
        conn.setLevel(logging.NOTSET)


def test_a_count_due_is_reported_by_the_reporting_thread(caplog: pytest.LogCaptureFixture) -> None:
    repeats = logs.Repeats(window=60.0, quiet=0.05)
    lg = logging.getLogger("mode.test")
    lg.addFilter(repeats)
    stop = logs.start_reporting(repeats, every=0.02)
    try:
        with caplog.at_level(logging.INFO):
            for _ in range(3):
                lg.warning("Timer %s woke up too late", "x")
            deadline = time.monotonic() + 10
            while not any("more like" in r.getMessage() for r in caplog.records) and time.monotonic() < deadline:
                time.sleep(0.02)
        lines = [r.getMessage() for r in caplog.records]
        assert len(lines) == 2, lines
        assert lines[1].startswith("mode.test: 2 more like 'Timer %s woke up too late' in the last "), lines[1]
    finally:
        stop.set()
        lg.removeFilter(repeats)


def test_repeats_go_on_every_library_logger() -> None:
    repeats = logs.Repeats()
    try:
        logs.hold_repeats(repeats)
        for name in ("aiokafka", "aiokafka.conn", "faust", "mode"):
            assert repeats in logging.getLogger(name).filters, name
        assert repeats not in logging.getLogger("coolant.streams.app").filters
    finally:
        for lg in [logging.getLogger(n) for n in list(logging.Logger.manager.loggerDict)] + [logging.getLogger()]:
            if isinstance(lg, logging.Logger) and repeats in lg.filters:
                lg.removeFilter(repeats)
