"""Issue 26: no false "Stream has not started processing" ERROR from Faust while the lanes decide everything.

Faust's consumer thread (`verify_event_path`) logs it for a partition whose fetched records are ahead of its
committed offset while `monitor.stream_inbound_time` has no entry for it; Faust's streams set that entry, and the
lanes bypass Faust's streams, so the lanes set it when they take a batch."""

from __future__ import annotations

from types import SimpleNamespace

from faust.types import TP

from coolant.streams import metrics


def test_a_lane_taking_a_batch_marks_its_partitions_as_processing() -> None:
    monitor = metrics.Monitor(metrics=metrics.faust_metrics())
    a, b = TP("coolant.outcomes", 0), TP("coolant.outcomes", 3)
    assert monitor.stream_inbound_time.get(a) is None  # what Faust's check reads: the ERROR's condition
    monitor.lane_took([SimpleNamespace(topic=t.topic, partition=t.partition) for t in (a, a, b)])
    first = monitor.stream_inbound_time[a]
    assert set(monitor.stream_inbound_time) == {a, b}
    monitor.lane_took([SimpleNamespace(topic=a.topic, partition=a.partition)])
    assert monitor.stream_inbound_time[a] >= first  # refreshed on each batch: "stopped processing" stays true
