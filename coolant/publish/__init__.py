"""Publishing records to coolant's Kafka topics: for gateways (`Publisher`, `SyncPublisher`) and the CLI.

`coolant.publish.command` (the `coolant publish` and `coolant deployments sync` commands) is not
imported here, so a gateway importing the publisher does not pull in typer or rich.
"""

from coolant.publish.publisher import Publisher, PublisherStats, route
from coolant.publish.sync import SyncPublisher

__all__ = ["Publisher", "PublisherStats", "SyncPublisher", "route"]
