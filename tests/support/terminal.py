"""A command started as from a terminal, where Ctrl-C reaches it.

A shell without job control starts its background commands with SIGINT ignored, and a child inherits an ignored
signal across exec: a test run started that way (`… &` in a script) passes the ignored SIGINT down to every
`coolant` command it starts, and Python then never raises KeyboardInterrupt. Seen once: three `coolant tail`
processes that took no notice of the tests' Ctrl-C. A terminal user's command starts with SIGINT at its default.
"""

from __future__ import annotations

import signal


def interruptible() -> None:
    """`preexec_fn` of a command that a test stops with Ctrl-C: SIGINT at its default in the child."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
