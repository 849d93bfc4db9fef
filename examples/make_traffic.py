"""How examples/traffic.jsonl was made (the file is frozen: the golden test replays it).

    .venv/bin/python examples/make_traffic.py   # rewrites examples/traffic.jsonl

Section A comes from coolant.sim.simulate, so it changes if the simulator does; then regenerate the
golden output too (see tests/cli/test_replay.py).
"""

from pathlib import Path

import orjson

from coolant.config.loader import load_config
from coolant.schemas import from_dict, to_dict
from coolant.sim.simulate import EngineCooldowns, s1, simulate

HERE = Path(__file__).resolve().parent

T0 = 1767225600.0
pol = load_config(HERE / "litellm.yaml").policy
lines = []


def add(d):
    d = {k: v for k, v in d.items() if v is not None}
    from_dict(d)  # validate
    lines.append(orjson.dumps(d))


def out(eid, t, dep, group, ok, status=None, exc=None, msg=None, gw="litellm-0", **kw):
    add(
        {
            "schema": "coolant.outcome/1",
            "event_id": eid,
            "ts": round(T0 + t, 3),
            "deployment_id": dep,
            "model_group": group,
            "ok": ok,
            "status_code": status,
            "exception_type": exc,
            "exception_message": msg,
            **kw,
            "gateway": gw,
        }
    )


def probe(eid, t, dep, group, healthy, status=None, exc=None, msg=None):
    add(
        {
            "schema": "coolant.health/1",
            "event_id": eid,
            "ts": round(T0 + t, 3),
            "deployment_id": dep,
            "model_group": group,
            "healthy": healthy,
            "status_code": status,
            "exception_type": exc,
            "exception_message": msg,
            "prober": "coolant-prober-0",
            "mode": "chat",
            "latency_ms": 180.0,
        }
    )


# A. 00:00-00:03 -- S1 simulated (seed 3): coding agents drain the free keys; cooldown-aware routers.
for rec in simulate(s1(), T0, 180, seed=3, cooldown_aware=EngineCooldowns(pol)):
    add(to_dict(rec))

AUTH = "litellm.AuthenticationError: GeminiException - API key not valid. Please pass a valid API key."
# B. 00:04 -- S4: the paid key is rotated wrongly. The prober sees it first, then a request.
probe("probe-0401", 241.0, "gemini-pro-paid-1", "gemini-pro-plan", False, 401, "AuthenticationError", AUTH)
for _ in range(2):  # ... sent twice, as an at-least-once publisher does
    out(
        "req-0402-a0",
        245.2,
        "gemini-pro-paid-1",
        "gemini-pro-plan",
        False,
        401,
        "litellm.AuthenticationError",
        AUTH,
        gw="litellm-1",
        attempt=0,
        final=False,
        latency_ms=92.0,
    )
out(
    "req-0402-a1",
    246.3,
    "gemini-backup-1",
    "gemini-backup",
    True,
    gw="litellm-1",
    attempt=1,
    final=True,
    latency_ms=1011.0,
)
# key fixed: a healthy probe and a success
probe("probe-0403", 331.0, "gemini-pro-paid-1", "gemini-pro-plan", True)
out("req-0404-a0", 333.5, "gemini-pro-paid-1", "gemini-pro-plan", True, gw="litellm-2", latency_ms=1400.0)

AZ429 = (
    "litellm.RateLimitError: AzureException RateLimitError - Requests to the ChatCompletions_Create Operation "
    "under Azure OpenAI API version 2024-10-21 have exceeded token rate limit of your current pricing tier."
)
# C. 00:06 -- gpt-4o-eu: deployment-level allowed_fails_policy (RateLimit: 2) -> the 3rd 429 cools it.
for i, t in enumerate((360.4, 361.1, 362.9)):
    out(
        f"req-06{i:02d}-a0",
        t,
        "gpt-4o-eu",
        "gpt-4o",
        False,
        429,
        "RateLimitError",
        AZ429,
        gw=f"litellm-{i}",
        retry_after="20",
        latency_ms=210.0,
    )
# a content-policy 400 reopens the status gate through the EU policy (budget 100: below threshold)
out(
    "req-0610-a0",
    364.0,
    "gpt-4o-eu",
    "gpt-4o",
    False,
    400,
    "ContentPolicyViolationError",
    "litellm.ContentPolicyViolationError: The response was filtered due to the prompt triggering Azure "
    "OpenAI's content management policy.",
    gw="litellm-1",
    latency_ms=640.0,
)
# a plain 400 on the US deployment (no policy) never cools: status_exempt
out(
    "req-0611-a0",
    366.5,
    "gpt-4o-us",
    "gpt-4o",
    False,
    400,
    "BadRequestError",
    "litellm.BadRequestError: AzureException BadRequestError - Invalid 'messages[3].content': string too long.",
    gw="litellm-2",
    latency_ms=95.0,
)

# D. 00:07 -- gpt-4o-us: 2 successes then 3 x 500 in the minute -> failure_rate at n=5, f=3.
out("req-0700-a0", 421.0, "gpt-4o-us", "gpt-4o", True, gw="litellm-0", latency_ms=1900.0)
out("req-0701-a0", 423.0, "gpt-4o-us", "gpt-4o", True, gw="litellm-1", latency_ms=2100.0)
ISE = (
    "litellm.InternalServerError: AzureException InternalServerError - "
    "The server had an error while processing your request."
)
for i, t in enumerate((425.0, 426.5, 428.0)):
    out(
        f"req-07{i + 2:02d}-a0",
        t,
        "gpt-4o-us",
        "gpt-4o",
        False,
        500,
        "InternalServerError",
        ISE,
        gw=f"litellm-{i}",
        attempt=0,
        final=False,
        latency_ms=3000.0,
    )
# skips: a connection error (excluded type), an error with no status, a wildcard, a retired deployment
out(
    "req-0710-a0",
    430.0,
    "gemini-flash-free-2",
    "gemini-flash",
    False,
    500,
    "APIConnectionError",
    "litellm.APIConnectionError: GeminiException - Connection reset by peer",
    gw="litellm-2",
    latency_ms=30.0,
)
out(
    "req-0711-a0",
    432.0,
    "gemini-flash-free-1",
    "gemini-flash",
    False,
    None,
    "litellm.Timeout",
    "litellm.Timeout: Connection timed out after 600.0 seconds.",
    gw="litellm-0",
    latency_ms=600000.0,
)
out(
    "req-0712-a0",
    440.0,
    "openai-wildcard",
    "openai/*",
    False,
    401,
    "AuthenticationError",
    "litellm.AuthenticationError: OpenAIException - Incorrect API key provided: sk-proj-****.",
    gw="litellm-1",
    latency_ms=80.0,
)
out("req-0713-a0", 441.0, "openai-wildcard", "openai/*", True, gw="litellm-1", latency_ms=700.0)
out(
    "req-0714-a0",
    445.0,
    "gpt-4o-eu-2025",
    "gpt-4o",
    False,
    401,
    "AuthenticationError",
    "litellm.AuthenticationError: AzureException - Access denied due to invalid subscription key.",
    gw="litellm-2",
    latency_ms=60.0,
)
# a pod flushes a buffered record 4 minutes late (ts 00:03:20 after 00:07:10 on the same deployment): late
out(
    "req-0320-a0",
    200.0,
    "gemini-flash-free-2",
    "gemini-flash",
    False,
    500,
    "InternalServerError",
    "litellm.InternalServerError: GeminiException - An internal error has occurred.",
    gw="litellm-2",
    latency_ms=1500.0,
)

# E. 00:09 -- the backup key's region is down while a batch job hammers it: 1000 x 500 in one minute
# on a one-deployment group -> total_outage on the 1000th (f = n = 1000).
for i in range(1000):
    out(
        f"batch-{i:04d}",
        540.0 + i * 0.05,
        "gemini-backup-1",
        "gemini-backup",
        False,
        500,
        "InternalServerError",
        None,
        gw=f"litellm-{i % 3}",
        latency_ms=40.0,
    )
out("batch-1000", 612.0, "gemini-backup-1", "gemini-backup", True, gw="litellm-0", latency_ms=950.0)

(HERE / "traffic.jsonl").write_bytes(b"\n".join(lines) + b"\n")
print(f"{len(lines)} records")
