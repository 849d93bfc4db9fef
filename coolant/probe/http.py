"""The probe call: one cheap OpenAI-compatible request per deployment (the default engine), or LiteLLM's own.

Cheap means: chat with `max_tokens: 1`, or a one-word embedding, per the deployment's `model_info.mode`, with
a hard timeout. The plain HTTP engine speaks only the OpenAI wire format (OpenAI itself and providers LiteLLM
drives through it: vLLM, LiteLLM proxies, anything with an OpenAI `api_base`); other providers need the
LiteLLM engine (`litellm.ahealth_check`, what LiteLLM's proxy itself runs). Secrets are resolved here, at the
edge, and handed back to the caller only so that error text can be scrubbed of them.
"""

from __future__ import annotations

import asyncio
import importlib.util
import time
from collections.abc import Callable
from typing import Any, Final, Literal

import aiohttp
import orjson

from coolant.config.runtime import resolve_secret
from coolant.probe.classify import ProbeResult
from coolant.probe.targets import Target

__all__ = ["Engine", "HttpProber", "LiteLLMProber", "Unsupported", "openai_request", "stream_failure"]

Engine = Literal["http", "litellm", "auto"]

OPENAI_COMPATIBLE: Final = frozenset(
    {"openai", "text-completion-openai", "hosted_vllm", "custom_openai", "openai_like", "litellm_proxy"}
)
DEFAULT_BASES: Final = {"openai": "https://api.openai.com/v1", "text-completion-openai": "https://api.openai.com/v1"}
PROMPT: Final = "ping"
MAX_BODY: Final = 8192
"""Bytes of an error response read for its message."""


class Unsupported(Exception):
    """This engine cannot probe this deployment (provider or mode); the message says why, without secrets."""


def openai_request(target: Target) -> tuple[str, dict[str, Any]]:
    """URL and JSON body of the cheapest OpenAI-format call for `target` (Unsupported if there is none)."""
    provider, _, name = target.model.partition("/")
    if not name:  # a bare model name is OpenAI's, as LiteLLM reads it
        provider, name = "openai", target.model
    if provider not in OPENAI_COMPATIBLE:
        raise Unsupported(f"provider {provider!r} is not OpenAI-compatible")
    base = target.api_base or DEFAULT_BASES.get(provider)
    if base is None:
        raise Unsupported(f"provider {provider!r} needs an api_base")
    base = (resolve_secret(base) or "").rstrip("/")
    if target.mode == "chat":
        return f"{base}/chat/completions", {
            "model": name, "messages": [{"role": "user", "content": PROMPT}], "max_tokens": 1,
        }
    if target.mode == "embedding":
        return f"{base}/embeddings", {"model": name, "input": [PROMPT]}
    if target.mode == "completion":
        return f"{base}/completions", {"model": name, "prompt": PROMPT, "max_tokens": 1}
    raise Unsupported(f"mode {target.mode!r} has no plain HTTP probe")


def _error_text(body: bytes) -> str:
    """The upstream's error message: OpenAI's `error.message` when present, else the body text."""
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode("utf-8", "replace")
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and isinstance(err.get("message"), str):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return body.decode("utf-8", "replace")


def stream_failure(body: bytes) -> str | None:
    """Why an OpenAI chat stream did not complete (None when it did): an error event, or no `finish_reason`
    or no `[DONE]` before the body ended."""
    finished = done = False
    for line in body.splitlines():
        if not line.startswith(b"data:"):
            continue
        data = line[5:].strip()
        if data == b"[DONE]":
            done = True
            continue
        try:
            event = orjson.loads(data)
        except orjson.JSONDecodeError:
            return "stream event that is not JSON"
        if not isinstance(event, dict):
            return "stream event that is not an object"
        if "error" in event:
            return f"stream error event: {_error_text(data)}"
        choices = event.get("choices")
        if isinstance(choices, list) and any(isinstance(c, dict) and c.get("finish_reason") for c in choices):
            finished = True
    if not finished:
        return "stream ended without a final chunk"
    return None if done else "stream ended without [DONE]"


class HttpProber:
    """Probes over one shared aiohttp session (connection reuse across rounds)."""

    def __init__(self, timeout: float, clock: Callable[[], float] = time.time) -> None:
        self.timeout = timeout
        self.clock = clock
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(json_serialize=lambda o: orjson.dumps(o).decode())

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def probe(self, target: Target, stream: bool = False) -> tuple[ProbeResult, tuple[str | None, ...]]:
        """One call; never raises for what the upstream does (Unsupported or ConfigError for the config).

        `stream` (chat only): ask for a stream and judge all of it (`stream_failure`), so a deployment whose
        streams die mid-answer fails its probe as its users' requests fail."""
        url, body = openai_request(target)
        stream = stream and target.mode == "chat"
        if stream:
            body["stream"] = True
        key = resolve_secret(target.api_key)
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        if self._session is None:
            raise RuntimeError("HttpProber not started")
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        message: str | None = None
        try:
            async with asyncio.timeout(self.timeout):
                async with self._session.post(url, json=body, headers=headers) as resp:
                    status = resp.status
                    if not 200 <= status < 300:
                        message = _error_text(await resp.content.read(MAX_BODY))
                    elif stream:
                        message = stream_failure(await resp.read())
                        if message is not None:
                            error = "connection"  # what LiteLLM reports for a stream that dies mid-answer
                    else:
                        await resp.read()
        except TimeoutError:
            error, message = "timeout", f"no answer within {self.timeout:g}s"
        except aiohttp.ClientError as exc:
            error, message = "connection", f"{type(exc).__name__}: {exc}"
        latency = (time.perf_counter() - started) * 1000
        return ProbeResult(self.clock(), latency, status, error, message), (key,)


class LiteLLMProber:
    """`litellm.ahealth_check`, as LiteLLM's proxy runs it: any provider and mode LiteLLM supports."""

    def __init__(self, timeout: float, clock: Callable[[], float] = time.time) -> None:
        import litellm  # noqa: F401 - fail early when the engine was asked for and is missing

        if importlib.util.find_spec("fastapi") is None:
            # litellm.ahealth_check imports litellm's proxy module (fastapi): without it every probe would
            # "fail" with ModuleNotFoundError and report healthy deployments as unhealthy.
            raise ImportError("litellm's health check needs its proxy extra (litellm[proxy]: fastapi)")
        self.timeout = timeout
        self.clock = clock

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None

    async def probe(self, target: Target) -> tuple[ProbeResult, tuple[str | None, ...]]:
        import litellm

        params: dict[str, Any] = {
            k: (resolve_secret(v) if isinstance(v, str) else v) for k, v in target.litellm_params.items()
        }
        secrets = tuple(v for k, v in params.items() if isinstance(v, str) and ("key" in k or "secret" in k))
        started = time.perf_counter()
        try:
            async with asyncio.timeout(self.timeout):
                out = await litellm.ahealth_check(params, mode=target.mode, prompt=PROMPT, input=[PROMPT])
        except TimeoutError:
            latency = (time.perf_counter() - started) * 1000
            return ProbeResult(self.clock(), latency, None, "timeout", f"no answer within {self.timeout:g}s"), secrets
        latency = (time.perf_counter() - started) * 1000
        if isinstance(out, dict) and "error" not in out:
            return ProbeResult(self.clock(), latency, 200), secrets
        exc = out.get("exception") if isinstance(out, dict) else None
        if isinstance(exc, ImportError):  # a local installation problem, not the deployment's health
            raise Unsupported(f"litellm cannot probe here: {exc}")
        status = getattr(exc, "status_code", None)
        name = type(exc).__name__ if exc is not None else "APIError"
        text = str(out.get("error")) if isinstance(out, dict) else str(out)
        return ProbeResult(self.clock(), latency, status if isinstance(status, int) else None, name, text), secrets
