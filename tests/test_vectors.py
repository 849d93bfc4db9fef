"""Spec §6 test vectors (cooldown-semantics.md), one pytest case per vector, id = vector id.

Each row mirrors the spec's: (id, dep, config, before, record(s) under test, expected, note).
Config keys use the spec's prefixes: `rs.` router_settings, `mi.` model_info (on every
deployment), `lp.` litellm_params, `co.` the coolant section; `group` renames group g.
Records: `fail(status[, exception_type], ra=…, ct=…, msg=…, at=…)` (a bare status gets LiteLLM's
class), `success()`, `pre_call()`, `probe(status)`; `at` is the ts offset from T0, otherwise the
records take T0+30, T0+31, … in order. Expected: `cool(reason, D, …)` or `NO` / `no("skip")`.
The machinery is in `vectors_support.py`.
"""

from __future__ import annotations

from email.utils import formatdate

import pytest
from vectors_support import (
    NO,
    PROBE_FAILED,
    T0,
    Scenario,
    V,
    Vs,
    before,
    cool,
    fail,
    no,
    pol,
    pre_call,
    probe,
    run_vector,
    success,
)

FB = {"rs.fallbacks": [{"g": ["h"]}]}
HEALTH_ON = {"co.health.cooldown": True}
HEALTH_OFF = {"co.health.cooldown": False}
SLIDING = {"co.window": "sliding"}
BACKOFF = {"co.backoff": {}}

CPV = "ContentPolicyViolationError"
APICONN = "APIConnectionError"


def r(status: int = 500, *args, **kw):
    """Shorthand used in the tables: `r(429)` is a failed request with a bare status."""
    return fail(status, *args, **kw)


def n(k: int, rec):
    return [rec] * k


def rl(d, **kw):
    return cool("rate_limited", d, **kw)


def fr(d, **kw):
    return cool("failure_rate", d, **kw)


def nr(d, **kw):
    return cool("non_retryable", d, **kw)


def to(d, **kw):
    return cool("total_outage", d, **kw)


def af(d, **kw):
    return cool("allowed_fails", d, **kw)


def hc(d, **kw):
    return cool("health_check", d, **kw)


# fmt: off
VECTORS_6_1 = [
    # V(id, dep, config, before, record(s) under test, expected per record, note)
    V("v001", 2, {}, "0/0", [r(429)], [rl(5)], "R1"),
    V("v002", 3, {}, "0/0", [r(429)], [rl(5)], "R2"),
    V("v003", 1, {}, "0/0", n(3, r(429)), [NO] * 3, "R3"),
    V("v004", 1, FB, "0/0", n(2, r(429)), [NO] * 2, "R4: V2 ignores fallbacks"),
    V("v005", 2, {}, "0/4", [r(500)], [fr(5, window=(0, 0, 5))], "R5 (5/5)"),
    V("v006", 2, {}, "0/3", [r(500)], [NO], "R6 (n = 4 < 5)"),
    V("v007", 2, {}, "0/0", [r(500)], [NO], "R7"),
    V("v008", 2, {}, "5/5", [r(500)], [fr(5, window=(0, 5, 6))], "R8 (6/11)"),
    V("v009", 2, {}, "5/4", [r(500)], [NO], "R9 (5/10, not > 50 %)"),
    V("v010", 2, {}, "40/40", [r(500)], [fr(5, window=(0, 40, 41))], "R10"),
    V("v011", 1, {}, "7/2", [r(500)], [NO], "R11"),
    V("v012", 1, {}, "0/999", [r(500)], [to(5, window=(0, 0, 1000))], "R12"),
    V("v013", 1, {}, "0/998", [r(500)], [NO], "R13"),
    V("v014", 1, {}, "1/999", [r(500)], [NO], "R14"),
    V("v015", 1, {}, "0/0", n(5, r(500)), [NO] * 5, "R15"),
    V("v016", 2, {}, "0/4", [r(503, "ServiceUnavailableError")], [fr(5)], "R16"),
    V("v017", 2, {}, "0/4", [r(502, "BadGatewayError")], [fr(5)], "R17"),
    V("v018", 2, {}, "0/0", [r(408, "Timeout")], [NO], "R18 (retryable)"),
    V("v019", 2, {}, "0/4", [r(408, "Timeout")], [fr(5)], "R19"),
    V("v020", 1, {}, "0/999", [r(408, "Timeout")], [to(5)], "R20"),
    V("v021", 1, {}, "0/0", [r(401)], [nr(5)], "R21"),
    V("v022", 2, {}, "0/0", [r(401)], [nr(5)], "R22"),
    V("v023", 1, {}, "0/0", [r(404)], [nr(5)], "R23"),
    V("v024", 2, {}, "0/0", [r(404)], [nr(5)], "R24"),
    V("v025", 1, {}, "0/0", n(2, r(402, "PaymentRequiredError")), [no("single_402")] * 2, "R25"),
    V("v026", 2, {}, "0/0", [r(402)], [nr(5)], "R26"),
    V("v027", 1, FB, "0/0", [r(402)], [no("single_402")], "new, M1"),
    V("v028", 2, {}, "0/999", [r(429)], [rl(5)], "new: V2.1 before V2.2"),
    V("v029", 2, {}, "0/999", [r(500)], [to(5)], "new: V2.2 before V2.3"),
    V("v030", 2, {}, "2/3", [r(401)], [fr(5, window=(0, 2, 4))], "new: 4/6, V2.3 before V2.4"),
    V("v031", 2, {}, "3/2", [r(500)], [NO], "new: 3/6 = 50 %"),
    V("v032", 2, {}, before("0/4", r(400, "BadRequestError")), [r(500)], [fr(5, window=(0, 0, 5))],
        "new, O5: gated failures count"),
    V("v033", 2, {}, "0/0", [r(200, None)], [nr(5)], "new: < 400 passes G6; not retryable"),
    V("v034", 2, {}, "0/4", [r(400, "BadRequestError")], [no("status_exempt")], "R27"),
    V("v035", 2, {}, "0/4", [r(403, "PermissionDeniedError")], [no("status_exempt")], "R28"),
    V("v036", 2, {}, "0/4", [r(422, "UnprocessableEntityError")], [no("status_exempt")], "R29"),
    V("v037", 2, {}, "0/4", [r(400, CPV)], [no("status_exempt")], "R30"),
    V("v038", 2, {}, "0/4", [r(400, "ContextWindowExceededError")], [no("status_exempt")], "R31"),
    V("v039", 2, {}, "0/4", [r(409), r(499)], [no("status_exempt")] * 2, "new, G6"),
    V("v040", 2, {}, "0/4", [r(500, APICONN)], [no("excluded_type")], "R32"),
    V("v041", 1, {}, "0/999", [r(500, APICONN)], [no("excluded_type")], "R33"),
    V("v042", 2, {}, "0/4", [r(500, "InternalServerError", msg="upstream said: litellm.APIConnectionError: boom")],
        [fr(5)], "R34: name, not text"),
    V("v043", 2, {}, "0/4", [r(None, "InternalServerError"), r(500)],
        [no("no_status"), fr(5, window=(0, 0, 6))], "R35"),
    V("v044", 2, {}, "0/0", [r(429, "CallerCredentialRateLimitError")], [no("excluded_type")], "new, G3"),
    V("v045", 2, {"rs.disable_cooldowns": True}, "0/0", [r(429)], [no("disabled")], "R36"),
    V("v046", 2, {"group": "openai/*"}, "0/0", [r(401)], [no("wildcard", counts=(0, 1))], "R75"),
    V("v047", 1, {"group": "*"}, "0/999", [r(500)], [no("wildcard")], "R75"),
    V("v048", 2, {}, "0/0", [r(401, deployment_id="d9")], [no("unknown_deployment")], "new, R6"),
    V("v049", 2, {}, "0/0", [r(429, model_group="h")], [rl(5, fields={"model_group": "g"})],
        "new, R3: registry group g"),
    V("v050", 2, {"rs.cooldown_time": 0}, "0/0", [r(429)], [rl(5)], "R37"),
    V("v051", 2, {"rs.cooldown_time": 12}, "0/0", [r(429)], [rl(12)], "R38"),
    V("v052", 2, {"mi.cooldown_time": 30}, "0/0", [r(429)], [rl(30)], "R39"),
    V("v053", 2, {"lp.cooldown_time": 20}, "0/0", [r(429)], [rl(20)], "R40"),
    V("v054", 2, {"mi.cooldown_time": 30, "lp.cooldown_time": 20}, "0/0", [r(429)], [rl(30)], "R41"),
    V("v055", 2, {"mi.cooldown_time": 0}, "0/0", [r(429)], [no("zero_duration")], "R42"),
    V("v056", 2, {}, "0/0", [r(429, ct=7)], [rl(7)], "R43"),
    V("v057", 2, {"lp.cooldown_time": 20}, "0/0", [r(429, ct=7)], [rl(7)], "new, T1: request beats lp"),
    V("v058", 2, {"mi.cooldown_time": 30}, "0/0", [r(429, ct=7)], [rl(30)], "new, T1"),
    V("v059", 2, {}, "0/0", [r(429, ct=0)], [no("zero_duration")], "new, T1"),
    V("v060", 2, {}, "0/0", [r(429, ra="17")], [rl(17)], "R44"),
    V("v061", 2, {"rs.cooldown_time": 12}, "0/0", [r(429, ra="17")], [rl(17)], "R45"),
    V("v062", 2, {"mi.cooldown_time": 30}, "0/0", [r(429, ra="17")], [rl(30)], "R46"),
    V("v063", 2, {}, "0/0", [r(429, ra="0")], [no("zero_duration")], "R47"),
    V("v064", 2, {}, "0/0", [r(429, ra=None)], [rl(5)], "R48 (retry-after-ms never used)"),
    V("v065", 2, {}, "0/0", [r(429, ra="2.5")], [rl(5)], "R49"),
    V("v066", 2, {}, "0/0", [r(429, ra="Fri, 15 Jan 2027 08:00:50 GMT", at=30.4)],
        [rl(19)], "R50; D5: floor(19.6), from ts"),
    V("v067", 2, {}, "0/0", [r(429, ra="100000")], [rl(100000)], "R51 (no cap)"),
    V("v068", 2, {}, "0/4", [r(500, ra="17")], [fr(17)], "R52"),
    V("v069", 2, {"rs.cooldown_time": 12}, "0/0", [r(429, ra="Fri, 15 Jan 2027 08:00:20 GMT")],
        [rl(12)], "new, T2: past date ignored"),
    # "17; 5; 5": three alternative records, each in its own run (in one run D3 would absorb 2 and 3)
    V("v070", 2, {}, "0/0", [r(429, ra=" 17 "), r(429, ra="+17"), r(429, ra="-5")],
        [rl(17), rl(5), rl(5)], "new, T2 syntax", separate=True),
    V("v071", 2, {"rs.allowed_fails": 1}, "0/0", n(2, r(500)), [NO, af(5, window=(30, 0, 2))], "R53"),
    V("v072", 2, {"rs.allowed_fails": 0}, "0/0", [r(500)], [af(5)], "R54"),
    V("v073", 2, {"rs.allowed_fails": 3}, "0/0", n(4, r(500)), [NO] * 3 + [af(5)], "R55: explicit 3 means V1"),
    V("v074", 2, {"rs.allowed_fails": 1}, "0/0", n(2, r(429)), [NO, af(5)], "R56: no immediate 429 rule in V1"),
    V("v075", 2, {"rs.allowed_fails": 1}, "0/0", n(2, r(401)), [NO, af(5)], "R56"),
    V("v076", 1, {"rs.allowed_fails": 0}, "0/0", n(3, r(401)), [no("lone_exempt")] * 3, "R57"),
    V("v077", 1, {"rs.allowed_fails": 0, **FB}, "0/0", [r(500)], [af(5)], "R58: not lone"),
    V("v078", 2, {"rs.allowed_fails": 1}, "0/0", n(3, r(400)), [no("status_exempt")] * 3, "R59"),
    V("v079", 2, {"rs.allowed_fails": 1, "rs.cooldown_time": 9}, "0/0", n(2, r(500)), [NO, af(9)], "R60"),
    V("v080", 2, {"rs.allowed_fails_policy": pol(RateLimit=2)}, "0/0", n(3, r(429)), [NO, NO, af(5)], "R61"),
    V("v081", 2, {"rs.allowed_fails_policy": pol(RateLimit=2)}, "0/0", n(4, r(500)), [NO] * 3 + [af(5)],
        "R62: uncovered, so t = 3"),
    V("v082", 1, {"rs.allowed_fails_policy": pol(RateLimit=0)}, "0/0", [r(429)], [af(5)], "R63"),
    V("v083", 2, {"rs.allowed_fails_policy": pol(BadRequest=0)}, "0/0", n(3, r(400)), [no("status_exempt")] * 3,
        "R64: router policy never reopens"),
    V("v084", 2, {"rs.allowed_fails_policy": pol(InternalServer=1)}, "0/0", n(2, r(500)), [NO, af(5)], "R65"),
    V("v085", 1, {"rs.allowed_fails_policy": pol(Authentication=2)}, "0/0", n(3, r(401)), [NO, NO, af(5)], "R66"),
    V("v086", 2, {"rs.allowed_fails_policy": pol(RateLimit=1, InternalServer=5)}, "0/0", [r(500), r(500), r(429)],
        [NO, NO, af(5)], "new, Q3: one shared counter, 3 > 1"),
    V("v087", 2, {"rs.allowed_fails": 2}, "0/0", [r(500, gateway="A"), r(500, gateway="B"), r(500, gateway="A")],
        [NO, NO, af(5)], "R76; D4 fleet-wide"),
    V("v088", 2, {"rs.allowed_fails": 1}, "0/0", [r(500, at=30), r(500, at=36)], [NO, NO],
        "new, C2: counter expired at T0+35"),
    V("v089", 2, {"rs.allowed_fails": 1, "rs.cooldown_time": 10}, "0/0", [r(500, at=30), r(500, at=39)],
        [NO, af(10)], "new, C1"),
    V("v090", 2, {"rs.allowed_fails": 1, "co.allowed_fails_window": 1200}, "0/0", [r(500, at=30), r(500, at=36)],
        [NO, af(5)], "new, D4 option"),
    V("v091", 2, {"rs.allowed_fails_policy": pol(InternalServer=0)}, "0/0", n(4, r(500, "APIError")),
        [NO] * 3 + [af(5)], "new, §3.7: APIError is uncovered"),
    V("v092", 2, {"rs.allowed_fails_policy": pol(ServiceUnavailable=0)}, "0/0", [r(503, None)],
        [af(5)], "new, §3.7 status column"),
    V("v093", 2, {"rs.allowed_fails_policy": pol(ServiceUnavailable=0)}, "0/0", [r(503, "MidStreamFallbackError")],
        [af(5)], "new, §3.7"),
    V("v094", 1, {"rs.allowed_fails": 0, **FB}, "0/0", [r(402)], [no("single_402")], "new, M1"),
    V("v095", 2, {"mi.allowed_fails": 2}, "0/0", n(3, r(500)), [NO, NO, af(5)], "R67 (suffix generic)"),
    V("v096", 1, {"mi.allowed_fails": 2}, "0/0", n(4, r(500)), [no("lone_exempt")] * 4, "R68"),
    V("v097", 2, {"mi.allowed_fails_policy": pol(BadRequest=1)}, "0/0", n(2, r(400)), [NO, af(5)],
        "R69: deployment policy reopens G6"),
    V("v098", 1, {"mi.allowed_fails_policy": pol(RateLimit=0)}, "0/0", [r(429)], [af(5)], "R70"),
    V("v099", 2, {"mi.allowed_fails_policy": pol(RateLimit=0)}, "0/0", n(4, r(500)), [NO] * 3 + [af(5)],
        "R71: uncovered, router counter, t = 3"),
    V("v100", 2, {"mi.allowed_fails": 1, "mi.cooldown_time": 40}, "0/0", n(2, r(500)), [NO, af(40)], "R72"),
    V("v101", 2, {"mi.allowed_fails_policy": pol(ContentPolicyViolation=0)}, "0/0", [r(400, CPV)],
        [af(5)], "R73"),
    V("v102", 2, {"mi.allowed_fails_policy": pol(BadRequest=10, ContentPolicyViolation=2)}, "0/0", n(3, r(400, CPV)),
        [NO, NO, af(5)], "R74"),
    V("v103", 2, {"mi.allowed_fails_policy": pol(BadRequest=0)}, "0/0", [r(400, "ContextWindowExceededError")],
        [af(5)], "new, subclass"),
    V("v104", 2, {"mi.allowed_fails_policy": pol(BadRequest=0)}, "0/0", [r(400, CPV)], [af(5)],
        "new, §3.7 resolution"),
    V("v105", 2, {"mi.allowed_fails_policy": pol(BadRequest=0)}, "0/0", [r(403)], [no("status_exempt")],
        "new: 403 has no category"),
    V("v106", 2, {"mi.allowed_fails_policy": pol(RateLimit=1, InternalServer=1)}, "0/0", [r(500), r(429), r(500)],
        [NO, NO, af(5)], "new, P3: counters per class"),
    V("v107", 2, {"mi.allowed_fails": 10, "rs.allowed_fails": 0}, "0/0", [r(500)], [NO],
        "new: deployment level beats router"),
    V("v108", 2, {"mi.allowed_fails": 0}, "0/0", [r(429)], [af(5)], "new: 0 cools on the first failure"),
    V("v109", 1, {}, "0/0", [r(500, attempt=0, final=False), r(500, attempt=1, final=False), r(500, attempt=2)],
        [NO, NO, no(counts=(0, 3))], "R93, D2"),
    V("v110", 2, {}, "0/0", [pre_call()],
        [rl(5, fields={"status_code": 429, "exception_type": "RateLimitError"})], "new, N2"),
    V("v111", 1, {}, "0/0", [pre_call()], [NO], "new, N2 + V2.1"),
    V("v112", 2, {}, "2/3", [pre_call(ok=True), pre_call(ok=True), r(500)],
        [NO, NO, fr(5, window=(0, 2, 4))], "new, N2: pre-flights not counted"),
    V("v113", 2, {}, "0/0", [r(401, msg="x" * 60)],
        [nr(5, fields={"exception_received": "x" * 50 + "*" * 10})], "new, E4"),
    V("v114", 2, {}, "0/0", [r(401, msg=None)],
        [nr(5, fields={"exception_received": "AuthenticationError"})], "new, E4"),
    V("v115", 2, {}, "0/0", [r(401, event_id="e1")],
        [nr(5, fields={"event_id": "cd-c6e0efb3e2a2650f23f69f63fe0261b7"})], "new, E3"),
    V("v116", 2, {}, "0/0", [r(429, ct=30, at=30), r(401, at=31)],
        [rl(30, until=60), no("absorbed")], "R78 inverted: D3"),
    V("v117", 2, {"co.recool": "overwrite"}, "0/0", [r(429, ct=30, at=30), r(401, at=31)],
        [rl(30, until=60), nr(5, until=36)], "R78"),
    V("v118", 2, {}, "0/0", [r(429, at=30), r(429, ra="17", at=32)],
        [rl(5, until=35), rl(17, until=49)], "new, D3 / #40130"),
    V("v119", 2, {}, "0/4", [r(500, at=30), r(500, at=31)],
        [fr(5, until=35), fr(5, until=36)], "new, E2: extends by 1 s"),
    # health path: coolant.health/1 probes for d0
    V("v120", 2, HEALTH_OFF, None, [probe(401)],
        [no(health=(False, 30, PROBE_FAILED), probe_state=(False, 30, PROBE_FAILED))], "new, H1"),
    V("v121", 2, {**HEALTH_ON, "rs.cooldown_time": 7, "mi.cooldown_time": 30}, None, [probe(401)], [hc(7)], "R85"),
    V("v122", 2, HEALTH_ON, None, [probe(500), probe(408)], [NO, NO], "R86"),
    V("v123", 1, HEALTH_ON, None, [probe(429), probe(401)], [NO, hc(5)], "R87"),
    V("v124", 2, HEALTH_ON, "0/4", [probe(500)], [NO], "D6: the probe is judged alone"),
    V("v125", 2, {**HEALTH_ON, "mi.cooldown_time": 0}, None, [probe(401)], [hc(5)], "H3"),
    V("v126", 2, {**HEALTH_ON, "rs.allowed_fails": 0}, None, [probe(500)], [hc(5)], "new, H2 with V1"),
    V("v127", 2, {**HEALTH_ON, "rs.disable_cooldowns": True}, None, [probe(401)], [no("disabled")], "new"),
    V("v128", 2, HEALTH_OFF, None, [probe(healthy=True, at=40), probe(500, at=35)],
        [no(health=(True, 40, ""), probe_state=(True, 40, "")), no(health=None, probe_state=(True, 40, ""))],
        "new, H1"),
]

W1_RECORDS = [r(500, at=t) for t in (50, 51, 52, 53, 61)]
W4_RECORDS = [r(500, at=t) for t in (56, 57, 58, 59, 60.0)]
W6_RECORDS = [r(500, at=t) for t in (50, 51, 52, 53, 61, 62, 54)]
COUNTERS_OFF = {"co.litellm_counters": False}
WC4_LEAD = [success(at=t) for t in (0, 1, 2, 3, 4)] + [r(500, at=t) for t in (55, 56, 57, 58, 59)]
W11_RECORDS = [r(500, attempt=a, final=False) for a in range(4)] + [r(500, attempt=4, final=True)]
XV10_DATE = formatdate(T0 + 30 + 3600, usegmt=True)  # "Fri, 15 Jan 2027 09:00:30 GMT"

VECTORS_6_2 = [
    V("W1", 2, {}, None, W1_RECORDS, [NO] * 4 + [fr(5, window=(50, 0, 5))],
        "D7 (was D1 '— ×5'): LiteLLM's counters cool the 5th, as LiteLLM does"),
    V("W2", 2, SLIDING, None, W1_RECORDS, [NO] * 4 + [fr(5, window=(None, 0, 5))], "X1"),
    V("W3", 2, SLIDING, None, [r(500, at=t) for t in (0, 1, 2, 3, 70)], [NO] * 5, "X1: old buckets left the window"),
    V("W4", 2, {}, None, W4_RECORDS, [NO] * 4 + [fr(5, window=(56, 0, 5))],
        "D7 (was D1 '— ×5'): the window resets at T0+60, LiteLLM's counters do not"),
    V("W5", 2, {}, None, [r(500, at=t) for t in (40, 41, 42, 43, 5)],
        [NO] * 4 + [fr(5, until=10, window=(0, 0, 5), fields={"ts": T0 + 5})], "late, same window"),
    V("W6", 2, {}, None, W6_RECORDS, [NO] * 4 + [fr(5, until=66, window=(50, 0, 5)),
        fr(5, until=67, window=(50, 0, 6)), no("absorbed")],
        "D7 (was '— ×6, then failure_rate window T0: 0/5'): the counters cool at T0+61; the late one is absorbed"),
    V("W7", 2, {}, None, [success(at=400), r(401, at=30)], [NO, no("late")], "L1"),
    V("W8", 2, {}, None, [success(at=200), r(401, at=30)], [NO, nr(5, until=35)], "L1"),
    V("W9", 2, {}, "0/3", [r(500, event_id="e5"), r(500, event_id="e5"), r(500, event_id="e6")],
        [NO, no("duplicate"), fr(5, window=(0, 0, 5))], "L2"),
    V("W10", 2, {}, None, [r(401, event_id="e1"), r(401, event_id="e1")], [nr(5), no("duplicate")], "L2"),
    V("W11", 2, {}, None, W11_RECORDS, [NO] * 4 + [fr(5)], "D2 default"),
    V("W12", 2, {"co.count_attempts": "final_only"}, None, W11_RECORDS, [NO] * 4 + [no(counts=(0, 1))], "D2 option"),
    V("XV1", 2, BACKOFF, None, [r(429, at=t) for t in (30, 40, 60, 400)], [rl(5), rl(10), rl(20), rl(5)], "X2"),
    V("XV2", 2, BACKOFF, None, [r(429, at=t) for t in (30, 36, 47, 68, 109, 190, 351)],
        [rl(d) for d in (5, 10, 20, 40, 80, 160, 300)], "X2"),
    V("XV3", 2, BACKOFF, None, [r(429, ra="60", at=30), r(429, at=95)], [rl(60), rl(10)], "X2 step 4"),
    V("XV4", 2, BACKOFF, None, [r(429, at=t) for t in (30, 33, 40)], [rl(5), rl(5, until=38), rl(10)], "X2 step 1"),
    V("XV5", 4, {"co.max_ejection_percent": 50}, None,
        [r(429, deployment_id=d, at=t) for d, t in [("d0", 30), ("d1", 31), ("d2", 32), ("d0", 33), ("d2", 37)]],
        [rl(5), rl(5), no("suppressed"), rl(5), rl(5)], "X3"),
    V("XV6", 3, {"co.max_ejection_percent": 10}, None,
        [r(401, deployment_id=d, at=t) for d, t in (("d0", 30), ("d1", 31), ("d1", 36))],
        [nr(5), no("suppressed"), nr(5)], "X3"),
    V("XV7", 1, {"co.max_ejection_percent": 10}, "0/999", [r(500)], [to(5)], "X3: one may always be cooled"),
    V("XV8", 2, {"co.max_cooldown_time": 300}, None, [r(429, ra="100000")], [rl(300)], "X4"),
    V("XV9", 2, {"co.max_cooldown_time": 300, "mi.cooldown_time": 600}, None, [r(429)], [rl(600)],
        "X4 caps only Retry-After"),
    V("XV10", 2, {"co.max_cooldown_time": 300}, None, [r(429, ra=XV10_DATE)], [rl(300)], "X4"),
    Vs("XV11", 2, {"co.thresholds.min_requests": 10}, [
        Scenario(before("0/4"), [r(500)], [NO]),
        Scenario(before("0/9"), [r(500)], [fr(5)]),
    ], "X5"),
    V("XV12", 1, {"co.thresholds.outage_min_requests": 100}, "0/99", [r(500)], [to(5)], "X5"),
]

# docs/windows.md §3: D7, LiteLLM's own counters kept fleet-wide. WC1-WC3 are W1, W4 and W6 as they were before D7.
VECTORS_D7 = [
    V("WC1", 2, COUNTERS_OFF, None, W1_RECORDS, [NO] * 4 + [no(counts=(0, 1))], "D1 alone: the 5th is not cooled"),
    V("WC2", 2, COUNTERS_OFF, None, W4_RECORDS, [NO] * 5, "D1 alone: T0+60 opens a new window"),
    V("WC3", 2, COUNTERS_OFF, None, W6_RECORDS, [NO] * 6 + [fr(5, window=(0, 0, 5))],
        "D1 alone: late, previous window"),
    V("WC4", 2, {}, None,
        [*WC4_LEAD, r(500, at=60)], [NO] * 10 + [fr(5, window=(55, 0, 6), counts=(0, 1))],
        "LC3: the successes' counter reads 0 from its anchor + 60 on (5/10 at T0+59 is not > 50 %)"),
    V("WC5", 2, {}, None,
        [success(at=t) for t in (50, 60, 61, 62, 63, 64)] + [r(500, at=t) for t in (110, 111, 112, 113, 114)],
        [NO] * 10 + [fr(5, window=(110, 0, 5), counts=(5, 5))],
        "LC2: anchored at the first success, not refreshed; the window (5/5) would wait for a 6th failure"),
    V("WC6", 2, {}, None, [r(500, at=t) for t in (0, 1, 2, 3, 60)], [NO] * 5,
        "LC2: the failures' counter has its own 60 s; at T0+60 it starts again at 1"),
    V("WC7", 2, {}, None, [*WC4_LEAD, r(401, at=60)], [NO] * 10 + [fr(5, window=(55, 0, 6), counts=(0, 1))],
        "D7: V2.3 on the counters ranks before V2.4 (the window alone says non_retryable)"),
    V("WC8", 2, COUNTERS_OFF, None, [*WC4_LEAD, r(500, at=60)], [NO] * 11, "D1 alone: WC4 without the counters"),
    V("WC9", 2, {}, None,
        [success(gateway="a", at=t) for t in range(5)] + [r(500, gateway="b", at=t) for t in range(30, 35)],
        [NO] * 9 + [fr(5, window=(30, 0, 5), counts=(5, 5))],
        "LC1: pod b's own counters hold 0/5, as that LiteLLM process counts; the window holds 5/5"),
    V("WC10", 2, {}, None, [success(at=t) for t in range(5)] + [r(500, at=t) for t in range(30, 35)], [NO] * 10,
        "LC1: records without a gateway share one pair of counters (5/5, as in the window)"),
]

# docs/windows.md §4: X8, re-cool coalescing (opt-in).
COALESCE = {"co.recool_coalesce": 1}
VECTORS_X8 = [
    V("XC1", 2, COALESCE, "0/4", [r(500, at=t) for t in (30, 30.4, 30.9, 31)],
        [fr(5, until=35), no("absorbed"), no("absorbed"), fr(5, until=36)],
        "X8: +0.4 and +0.9 are absorbed; +1 is not less than 1"),
    V("XC2", 2, COALESCE, None, [r(429, at=30), r(429, at=35.5)], [rl(5, until=35), rl(5, until=40.5)],
        "X8: the first cooldown has ended, so this is a new one"),
    V("XC3", 2, COALESCE, None, [r(429, at=30), r(429, ra="17", at=32)], [rl(5, until=35), rl(17, until=49)],
        "X8: vector 118's long extension still passes"),
    V("XC4", 2, {**COALESCE, "co.recool": "overwrite"}, "0/4", [r(500, at=t) for t in (30, 30.4)],
        [fr(5, until=35), fr(5, until=35.4)], "X8 applies to recool: extend only"),
]
# fmt: on

VECTORS = VECTORS_6_1 + VECTORS_6_2 + VECTORS_D7 + VECTORS_X8


def test_the_table_covers_every_vector_of_section_6() -> None:
    ids = [v.id for v in VECTORS]
    expected = [f"v{i:03d}" for i in range(1, 129)] + [f"W{i}" for i in range(1, 13)] + [f"XV{i}" for i in range(1, 13)]
    expected += [f"WC{i}" for i in range(1, 11)] + [f"XC{i}" for i in range(1, 5)]
    assert ids == expected


@pytest.mark.parametrize("vector", [pytest.param(v, id=v.id) for v in VECTORS])
def test_vector(vector) -> None:
    run_vector(vector)
