"""Faust's worker, its process ended at most STOP_WITHIN seconds after SIGTERM or SIGINT whatever is stuck.

mode's `Worker._schedule_shutdown` (called on SIGTERM and SIGINT) is extended to start a watchdog: a process whose
stop hangs (a broker that never answers, a send that never completes: Faust's stop commits, and its commit flushes
the producer) exits STOP_WITHIN seconds after the signal anyway, with OVERDUE_EXIT and one line saying what the
stop waited for.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import Any

import faust

log = logging.getLogger(__name__)


STOP_WITHIN = 14.0
"""Seconds from SIGTERM (or SIGINT) to the worker's exit at most, whatever is stuck (a second more for the exit
itself: the documented bound is 15 s). The stop itself lets the batches
in hand finish for up to `WorkerOptions.shutdown_timeout` (10 s), then commits and leaves the group (about a
second); beyond this bound the process exits as a crash would (what was decided is durable or is decided again by
the next owner from the last commit), well before Kubernetes' grace period (deploy/kubernetes: 60 s) ends in a
SIGKILL."""
OVERDUE_EXIT = 70
"""The exit status of a stop that overran STOP_WITHIN (EX_SOFTWARE); a clean stop exits 0."""


class BoundedStopWorker(faust.Worker):  # type: ignore[misc,unused-ignore]  # faust is untyped
    """Faust's worker, its process ended at most `stop_within` seconds after the first SIGTERM or SIGINT (see the
    module doc). `diagnose` says, in the overdue line, what the stop was waiting for."""

    stop_within: float = STOP_WITHIN
    diagnose: Callable[[], str] | None = None
    _watchdog: threading.Timer | None = None

    def _schedule_shutdown(self, signal: Any) -> None:
        if self._watchdog is None:
            self._watchdog = threading.Timer(self.stop_within, self._overdue, (getattr(signal, "name", signal),))
            self._watchdog.daemon = True
            self._watchdog.start()
        super()._schedule_shutdown(signal)

    def _overdue(self, signal: str) -> None:
        """In the watchdog's thread: the loop may be stuck, so say why from here and end the process."""
        try:
            why = self.diagnose() if self.diagnose is not None else ""
        except Exception as exc:  # read across threads while the loop runs: a diagnosis may fail, the exit may not
            why = f"(no diagnosis: {type(exc).__name__}: {exc})"
        log.error("shutdown: still stopping %.0f s after %s; exiting now (records not committed are decided again "
                  "by the next owner): %s", self.stop_within, signal, why)
        logging.shutdown()
        os._exit(OVERDUE_EXIT)
