"""The consumer-group generation of the app and of each message, and a message's acknowledgement flag: what the
rebalance fence (`coolant/streams/fence.py`) reads and sets.

Faust stamps every message with the generation it was fetched in (`Message.generation_id`) and its own streams
skip a message whose generation is not the app's (`App.consumer_generation_id`); the fence applies the same rule
to the lanes' batches and to the agents' `take_events` batches.
"""

from __future__ import annotations

from typing import Any


def current_generation(app: Any) -> int:
    """The consumer-group generation the app is in now."""
    return int(app.consumer_generation_id)


def generation_of(message: Any) -> int:
    """The generation `message` was fetched in."""
    return int(message.generation_id)


def keep_unacknowledged(message: Any) -> None:
    """A stale message of a `take_events` batch (fetched before a rebalance) that Faust will acknowledge with the
    rest of the batch must not count: its partition is read again from the last commit, and an acknowledgement
    recorded after the revocation could let a commit pass it undecided. Marked acknowledged already, `Message.ack`
    and `Consumer.ack` record nothing for it, as for a message Faust's own streams skip."""
    message.acked = True
