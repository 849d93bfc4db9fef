"""The root of coolant's exceptions: bugs and bad configuration. Bad input is a value, not an exception."""

from __future__ import annotations


class CoolantError(Exception):
    """Anything coolant raises on purpose."""
