"""The one error type for records that break the contract (§1): they go to the dead-letter topic."""

from __future__ import annotations


class InvalidRecord(ValueError):
    """A record that is not valid JSON, misses a field, has a wrong type or an unknown schema.

    `field` names the offending field (None for whole-record problems) so the dead-letter
    reason and the replay report can say exactly what is wrong.
    """

    def __init__(self, problem: str, field: str | None = None) -> None:
        self.problem = problem
        self.field = field
        super().__init__(f"{field}: {problem}" if field else problem)
