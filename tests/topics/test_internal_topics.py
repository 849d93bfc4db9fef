"""The internal-topic test (`coolant.topics.is_internal_topic`) against the names Faust itself gives its topics."""

from __future__ import annotations

import faust

from coolant.topics import Topics, is_internal_topic


def test_faust_own_topics_are_internal_and_ours_are_not() -> None:
    app = faust.App("layout-internal", broker="kafka://127.0.0.1:1")  # never started: only names are asked
    table = app.Table("request-state", partitions=2)
    assert is_internal_topic(table.changelog_topic.get_topic_name())
    assert is_internal_topic(app._leader_assignor._leader_topic_name)  # faust has no public name for it
    for spec in Topics().specs():
        assert not is_internal_topic(spec.name), spec.name
