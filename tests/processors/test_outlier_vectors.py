"""Vectors of the outlier-detection profile, X9-X13 (docs/outlier.md).

Same conventions and machinery as the spec's §6 vectors (tests/test_vectors.py): group g of d0…d(n−1),
T0 = 1800000000, records for d0 at T0+30, T0+31, … unless `at` is given. "before 20/0" (20 successes in
[T0, T0+30)) keeps the compatible minute rule (V2.3) quiet, so a row shows the profile's own rule.
"""

from __future__ import annotations

import functools

import pytest
from vectors_support import NO, V, cool, fail, no, pre_call, probe, run_vector, success

OUT = {"co.profile": "outlier"}
FB = {"rs.fallbacks": [{"g": ["h"]}]}
BELOW = no("below_threshold")
QUIET = "20/0"


cf = functools.partial(cool, "consecutive_failures")
rr = functools.partial(cool, "recent_failure_rate")
pb = functools.partial(cool, "probation")


def cut(origin: str | None = "upstream", **kw):
    """A stream that died mid-answer as LiteLLM reports it: APIConnectionError, no status."""
    return fail(None, "APIConnectionError", msg="stream closed before response.completed", origin=origin, **kw)


def gone(**kw):
    """The caller went away: the publisher says so (`origin: caller`)."""
    return fail(None, "APIConnectionError", origin="caller", **kw)


def truncated(name: str = "RemoteProtocolError", **kw):
    """A stream that ended without a finish_reason as LiteLLM's logging hooks report it: httpx's raw error."""
    return fail(None, name, msg="Stream ended before a finish_reason was received", origin="upstream", **kw)


F4 = [fail(500)] * 4
"""Four counted failures in a row: X10's default k for a group of several."""

# fmt: off
VECTORS = [
    # X10: consecutive failures, fleet-wide
    V("OV1", 2, OUT, QUIET, F4, [BELOW, BELOW, BELOW, cf(5, window=(30, 0, 4), until=38)], "X10: k = 4"),
    V("OV2", 2, {}, QUIET, F4, [NO, NO, NO, NO], "the compatible profile: no X10"),
    V("OV3", 2, OUT, QUIET, [*[fail(500)] * 3, success(), *F4],
      [BELOW, BELOW, BELOW, no("counted"), BELOW, BELOW, BELOW, cf(5, window=(34, 0, 4))], "X10.2: an answer resets"),
    V("OV4", 2, OUT, QUIET,
      [fail(503), fail(None, "APIConnectionError"), fail(None, "Timeout"), fail(500, "APIConnectionError")],
      [BELOW, BELOW, BELOW, cf(5, fields={"status_code": 500, "exception_type": "APIConnectionError"})],
      "X9: 5xx, connection errors and timeouts, with a status or without"),
    V("OV5", 2, OUT, QUIET, [fail(408), fail(502), cut(), cut()],
      [no("below_threshold"), BELOW, BELOW, cf(5, fields={"status_code": None})],
      "X9: a stream cut mid-answer counts"),
    V("OV46", 2, OUT, QUIET, [truncated(), truncated("httpx.ReadError"), truncated("ReadTimeout"), truncated()],
      [BELOW, BELOW, BELOW, cf(5, fields={"status_code": None, "exception_type": "RemoteProtocolError"})],
      "X9.6: a truncated stream, a broken read and a stalled one count (httpx's names, N1)"),
    V("OV47", 2, OUT, QUIET, [*[fail(500)] * 3, truncated(), fail(500)], [BELOW, BELOW, BELOW, cf(5), BELOW],
      "X9.6: a truncated stream extends the streak, it does not end it"),
    V("OV48", 2, OUT, QUIET, [*[fail(500)] * 3, truncated("PoolTimeout"), *F4],
      [BELOW, BELOW, BELOW, no("no_status"), BELOW, BELOW, BELOW, cf(5, window=(34, 0, 4))],
      "X9.6: the gateway's own pool is not the deployment's: an answer"),
    V("OV49", 2, {}, QUIET, [truncated()] * 5, [NO] * 5, "the compatible profile: G2, as LiteLLM"),
    V("OV6", 2, OUT, QUIET, [fail(500), fail(500), gone(), fail(500), fail(500)],
      [BELOW, BELOW, no("ignored"), BELOW, cf(5, window=(30, 0, 4))],
      "X9, N4: a caller's disconnect neither counts nor resets"),
    V("OV7", 2, OUT, QUIET, [gone()] * 5, [no("ignored")] * 5, "X9, N4: caller disconnects never cool"),
    V("OV8", 2, OUT, QUIET, [fail(None, "CallerCredentialRateLimitError")] * 4, [no("no_status")] * 4,
      "X9: the caller's credentials are not the deployment's failure"),
    V("OV9", 2, OUT, QUIET, [*[fail(500)] * 3, fail(400), *F4],
      [BELOW, BELOW, BELOW, no("status_exempt"), BELOW, BELOW, BELOW, cf(5)], "X9: a 400 is an answer"),
    V("OV10", 1, {**OUT, **FB}, QUIET, [fail(500), fail(500), fail(429), *[fail(500)] * 3],
      [BELOW, BELOW, BELOW, BELOW, BELOW, cf(5, window=(33, 0, 3))], "X9: a 429 is an answer (it keeps V2.1)"),
    V("OV11", 1, {**OUT, **FB}, QUIET, [fail(500), fail(500), pre_call(), fail(500)],
      [BELOW, BELOW, BELOW, cf(5)], "X9: a router's pre-call check is not the deployment's"),
    V("OV12", 2, OUT, QUIET, [fail(499)] * 5, [no("status_exempt")] * 5, "X9: 499, client closed request"),
    V("OV13", 2, OUT, QUIET, [fail(500, at=t) for t in range(30, 38)],
      [BELOW, BELOW, BELOW, cf(5, until=38), BELOW, BELOW, BELOW, cf(5, until=42)],
      "X10.3: a new streak after each; X2 step 1 while cooled"),
    V("OV43", 2, OUT, QUIET, [fail(500, at=35), success(at=33), *[fail(500, at=t) for t in (36, 37, 38)]],
      [BELOW, no("counted"), BELOW, BELOW, cf(5, window=(35, 0, 4))],
      "X10.4: an answer older than the streak's first failure leaves it (a success queued before the incident)"),
    V("OV44", 2, OUT, QUIET, [fail(500, at=35), success(at=35), *[fail(500, at=t) for t in (36, 37, 38, 39)]],
      [BELOW, no("counted"), BELOW, BELOW, BELOW, cf(5, window=(36, 0, 4))],
      "X10.2, X10.4: an answer as old as the streak's first failure resets it"),
    V("OV45", 2, OUT, QUIET, [fail(500, at=35), fail(500, at=38), success(at=36),
                              *[fail(500, at=t) for t in (39, 40, 41, 42)]],
      [BELOW, BELOW, no("counted"), BELOW, BELOW, BELOW, cf(5, window=(39, 0, 4))],
      "X10.4: an answer newer than the streak's first failure resets it, though older than its latest"),
    V("OV50", 2, OUT, QUIET, [cut(at=35, latency_ms=1000), success(at=36, latency_ms=3000),
                              *[cut(at=t) for t in (37, 38, 39)]],
      [BELOW, no("counted"), BELOW, BELOW, cf(5, window=(35, 0, 4), fields={"status_code": None})],
      "X10.5: a stream that began before the streak's first failure began and ended after it leaves the streak"),
    V("OV51", 2, OUT, QUIET, [cut(at=35, latency_ms=1000), success(at=36, latency_ms=1000),
                              *[cut(at=t) for t in (37, 38, 39, 40)]],
      [BELOW, no("counted"), BELOW, BELOW, BELOW, cf(5, window=(37, 0, 4), fields={"status_code": None})],
      "X10.2, X10.5: an answer that began as the first failure began, or after, resets it"),
    V("OV52", 2, OUT, QUIET, [fail(500, at=35), success(at=36, latency_ms=1500),
                              *[fail(500, at=t) for t in (37, 38, 39)]],
      [BELOW, no("counted"), BELOW, BELOW, cf(5, window=(35, 0, 4))],
      "X10.5: a failure without latency began at its ts"),
    # RC3 with G6: a probe refused for its request neither holds nor breaks RC4's streak
    V("OV53", 2, OUT, None, [fail(429, at=30), probe(409, at=31), probe(503, at=32), probe(healthy=True, at=33),
                             probe(409, at=34), probe(healthy=True, at=35)],
      [cool("rate_limited", 5), no("probe"), cool("health_check", 10, window=(32, 0, 1)), no("held"), no("probe"),
       no("released")],
      "RC3, G6: a 409 probe is H1's alone; the 503 holds; the 409 leaves the healthy streak"),
    V("OV54", 2, {**OUT, "mi.allowed_fails_policy": {"BadRequestErrorAllowedFails": 0}}, None,
      [fail(400, at=30), probe(400, at=31)], [cool("allowed_fails", 5), cool("health_check", 10, window=(31, 0, 1))],
      "RC3, G6: the deployment's own policy reopens the gate for a 400 probe"),
    V("OV14", 2, {**OUT, "co.outlier": {"consecutive": 2}}, QUIET, [fail(500)] * 2, [BELOW, cf(5)], "knob"),
    V("OV15", 2, OUT, QUIET, [*[fail(500)] * 3, fail(500, ra="17")], [BELOW, BELOW, BELOW, cf(17)], "T2 duration"),
    # X12: a lone primary with somewhere to go
    V("OV16", 1, {**OUT, **FB}, QUIET, [fail(503)] * 3, [BELOW, BELOW, cf(5, window=(30, 0, 3))], "X12: k = 3"),
    V("OV17", 1, OUT, QUIET, [fail(503)] * 5, [no("lone_exempt")] * 5, "X12: no fallbacks, never cooled"),
    V("OV18", 1, FB, QUIET, [fail(503)] * 5, [BELOW] * 5, "the compatible profile: a single group never"),
    V("OV19", 2, {**OUT, **FB}, QUIET, F4, [BELOW, BELOW, BELOW, cf(5)], "X12: groups of several keep k"),
    V("OV20", 1, {**OUT, **FB, "co.outlier": {"consecutive_single": 1}}, QUIET, [fail(500)], [cf(5)], "knob"),
    V("OV21", 1, {**OUT, **FB}, QUIET, [cut()] * 3, [BELOW, BELOW, cf(5)], "X12 with streams cut"),
    # X11: the recent failure rate
    V("OV22", 2, {**OUT, "co.outlier": {"consecutive": 50}}, "30/0",
      [*[success(at=t) for t in (36, 37, 38, 39)], *[fail(500, at=t) for t in range(40, 46)]],
      [*[no("counted")] * 4, *[BELOW] * 5, rr(5, window=(36, 4, 6))], "X11: 6 of the last 10 s's 10"),
    V("OV23", 2, {**OUT, "co.outlier": {"consecutive": 50}}, "30/0",
      [*[success(at=t) for t in (37, 38, 39)], *[fail(500, at=t) for t in range(40, 46)]],
      [*[no("counted")] * 3, *[BELOW] * 6], "X11: 9 < rate_min_requests"),
    V("OV24", 2, {**OUT, "co.outlier": {"consecutive": 50}}, "30/0",
      [*[success(at=t) for t in (34, 35, 36, 37, 38)], *[fail(500, at=t) for t in range(39, 44)]],
      [*[no("counted")] * 5, *[BELOW] * 5], "X11: 5 of 10 is not more than half"),
    V("OV25", 2, {**OUT, "co.outlier": {"consecutive": 50, "rate_min_requests": 4, "rate_window": 5}}, "30/0",
      [fail(500, at=40), fail(500, at=41), success(at=42), success(at=43), fail(500, at=46)],
      [BELOW, BELOW, no("counted"), no("counted"), BELOW], "X11: T0+40 and T0+41 left T0+46's 5 s"),
    V("OV25b", 2, {**OUT, "co.outlier": {"consecutive": 50, "rate_min_requests": 4}}, "30/0",
      [fail(500, at=40), fail(500, at=41), success(at=42), success(at=43), fail(500, at=46)],
      [BELOW, BELOW, no("counted"), no("counted"), rr(5, window=(37, 2, 3))], "X11: in T0+46's 10 s"),
    V("OV26", 2, {**OUT, "co.outlier": {"consecutive": 50}}, "30/0",
      [*[gone(at=t) for t in range(36, 40)], *[fail(500, at=t) for t in range(40, 46)]],
      [*[no("ignored")] * 4, *[BELOW] * 6], "X11, N4: caller disconnects are not in the volume"),
    # X13: without a prober, X2's ejection time x count and X7's half-open
    V("OV27", 2, OUT, QUIET, [*F4, fail(500, at=40)], [BELOW, BELOW, BELOW, cf(5, until=38), pb(10, until=50)],
      "X13: the first failure after the end re-cools, one step longer"),
    V("OV28", 2, OUT, QUIET, [*F4, fail(500, at=38), fail(500, at=48), fail(500, at=68)],
      [BELOW, BELOW, BELOW, cf(5), pb(10), pb(20), pb(40)], "X13: the ladder"),
    V("OV41", 2, {**OUT, "co.litellm_counters": True, "co.thresholds": {"min_requests": 5}}, QUIET,
      [*F4, fail(500, at=38), fail(500, at=48), fail(500, at=68)],
      [BELOW, BELOW, BELOW, cf(5), pb(10), pb(20), cool("failure_rate", 40)],
      "X9.5: D7 when the config turns it on (at T0+68 the counters hold 7 of 7 failures; a compatible rule first)"),
    V("OV42", 2, OUT, None, [fail(500, at=t) for t in (30, 31, 32)] + [success(at=33), fail(500, at=34)],
      [BELOW, BELOW, BELOW, no("counted"), BELOW], "X9.5: V2.3 wants 10 outcomes under the profile (as OV40)"),
    V("OV29", 2, OUT, QUIET, [*F4, success(at=39), fail(500, at=40)],
      [BELOW, BELOW, BELOW, cf(5), no("counted"), BELOW], "X13: an answer ends the half-open state (X7.2)"),
    V("OV30", 2, OUT, QUIET, [*F4, cut(at=40)], [BELOW, BELOW, BELOW, cf(5), pb(10, fields={"status_code": None})],
      "X13: any failure X9 counts, a connection error too"),
    V("OV31", 2, {**OUT, "co.backoff": {"probation": False}}, QUIET, [*F4, fail(500, at=40)],
      [BELOW, BELOW, BELOW, cf(5), BELOW], "X13: probation off"),
    V("OV32", 2, {**OUT, "co.backoff": None}, QUIET, [*[fail(500, at=t) for t in range(30, 34)],
                                                       *[fail(500, at=t) for t in range(40, 44)]],
      [BELOW, BELOW, BELOW, cf(5), BELOW, BELOW, BELOW, cf(5)], "X13: backoff null, no ladder"),
    V("OV33", 1, {**OUT, **FB}, QUIET, [*[fail(503)] * 3, fail(503, at=38)],
      [BELOW, BELOW, cf(5, until=37), pb(10)], "X12 + X13: the lone primary's half-open"),
    # X9.4: the gate rules that still hold
    V("OV34", 2, {**OUT, "group": "openai/*"}, QUIET, F4, [no("wildcard")] * 4, "G7"),
    V("OV35", 2, {**OUT, "rs.disable_cooldowns": True}, QUIET, F4, [no("disabled")] * 4, "G4"),
    V("OV36", 2, {**OUT, "mi.cooldown_time": 0}, QUIET, F4, [no("zero_duration")] * 4, "G5"),
    V("OV37", 2, {**OUT, "mi.cooldown_time": 30}, QUIET, F4, [BELOW, BELOW, BELOW, cf(30)], "T1 duration"),
    # the compatible rules hold under the profile
    V("OV38", 2, OUT, None, [fail(429)], [cool("rate_limited", 5)], "V2.1"),
    V("OV39", 1, OUT, None, [fail(401)], [cool("non_retryable", 5)], "V2.4"),
    V("OV40", 2, {**OUT, "co.thresholds": {"min_requests": 5}}, None,
      [fail(500, at=t) for t in (30, 31, 32)] + [success(at=33), fail(500, at=34)],
      [BELOW, BELOW, BELOW, no("counted"), cool("failure_rate", 5, window=(0, 1, 4))], "V2.3 before X10"),
]
# fmt: on


@pytest.mark.parametrize("vector", [pytest.param(v, id=v.id) for v in VECTORS])
def test_outlier_vector(vector) -> None:
    run_vector(vector)
