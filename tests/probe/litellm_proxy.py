"""LiteLLM's proxy pieces for tests/probe: the dependency check, and a driver of the proxy's background health loop.

`require(*modules)` fails the test under `REQUIRE_INTEGRATION=1` (scripts/test, CI) and skips it otherwise, as
tests/conftest.py does for Kafka and Redis: LiteLLM and the part of its `proxy` extra that its health check
imports are in coolant's `test` extra, so their absence is a broken set-up, not an optional feature.

Run as a script (`python tests/probe/litellm_proxy.py CONFIG CYCLES OUT`), this is a LiteLLM proxy process cut
down to its background health check: it loads CONFIG with the proxy's own `ProxyConfig.load_config` (as the
proxy's start-up does: model list, router, `general_settings` with `background_health_checks`,
`use_shared_health_check`, `health_check_interval`, and the coordination Redis the shared check uses), starts
`proxy_server._run_background_health_check()` as the start-up does, lets it run CYCLES iterations and writes
to OUT, as JSON, the proxy's `health_check_results` after each iteration (what its `GET /health` serves) and
how many of LiteLLM's own probe rounds ran (`perform_health_check` through the shared manager, or the direct
fallback path). It runs in its own process because importing and configuring the proxy changes LiteLLM's
module globals (callbacks, settings) for the rest of the process. Exit status 3: the proxy cannot be imported.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

IMPORT_FAILED = 3


def unavailable(why: str) -> NoReturn:
    """Fail under REQUIRE_INTEGRATION=1, skip otherwise (tests/conftest.py's rule)."""
    import pytest

    if os.environ.get("REQUIRE_INTEGRATION") == "1":
        pytest.fail(why, pytrace=False)
    pytest.skip(why, allow_module_level=True)


def require(*modules: str) -> None:
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        unavailable(f"not installed: {', '.join(missing)} (coolant's [test] extra: scripts/bootstrap)")


async def drive(config: Path, cycles: int) -> dict[str, Any]:
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    try:
        import litellm.proxy.health_check_utils.shared_health_check_manager as shared
        import litellm.proxy.proxy_server as ps
    except ImportError as exc:
        print(f"cannot import LiteLLM's proxy: {exc!r}", file=sys.stderr)
        sys.exit(IMPORT_FAILED)

    ps.llm_router, ps.llm_model_list, ps.general_settings = await ps.proxy_config.load_config(
        router=None, config_file_path=str(config)
    )
    settings = {
        "use_background_health_checks": ps.use_background_health_checks,
        "use_shared_health_check": ps.use_shared_health_check,
        "health_check_interval": ps.health_check_interval,
        "redis_namespace": getattr(ps.redis_usage_cache, "namespace", None),
    }

    shared_rounds: list[int] = []  # LiteLLM's own probe rounds taken by the shared manager (it holds the lock)
    direct_rounds: list[int] = []  # rounds of the non-shared path (the loop's fallback)
    states: list[dict[str, Any]] = []
    done = asyncio.Event()

    real_probe = shared.perform_health_check
    real_direct = ps._run_direct_health_check_with_instrumentation
    real_write = ps._write_health_state_to_router_cache

    async def counting_probe(*args: Any, **kwargs: Any) -> Any:
        shared_rounds.append(len(kwargs["model_list"]))
        return await real_probe(*args, **kwargs)

    async def counting_direct(model_list: list[Any], *args: Any, **kwargs: Any) -> Any:
        direct_rounds.append(len(model_list))
        return await real_direct(model_list, *args, **kwargs)

    def end_of_iteration(*args: Any, **kwargs: Any) -> Any:
        # the loop calls this right after it has set health_check_results, once per iteration
        states.append(json.loads(json.dumps(ps.health_check_results, default=str)))
        if len(states) >= cycles:
            done.set()
        return real_write(*args, **kwargs)

    shared.perform_health_check = counting_probe
    ps._run_direct_health_check_with_instrumentation = counting_direct
    ps._write_health_state_to_router_cache = end_of_iteration
    if not ps.use_background_health_checks:
        raise SystemExit("general_settings.background_health_checks is off: the proxy would start no loop")
    loop = asyncio.create_task(ps._run_background_health_check())  # as proxy_startup_event does
    waiter = asyncio.create_task(done.wait())
    await asyncio.wait({loop, waiter}, return_when=asyncio.FIRST_COMPLETED)
    loop.cancel()
    waiter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await loop
    return {"settings": settings, "states": states, "shared_rounds": shared_rounds, "direct_rounds": direct_rounds}


def main() -> None:
    config, cycles, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
    result = asyncio.run(drive(config, cycles))
    out.write_text(json.dumps(result))


if __name__ == "__main__":
    main()
