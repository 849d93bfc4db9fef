"""Gateway integrations: hooks that publish coolant's input records from inside a gateway.

- `coolant.integrations.litellm`: `CoolantCallback`, a LiteLLM `CustomLogger` that publishes one
  `coolant.outcome/1` per attempt; `coolant_callback` is the instance a LiteLLM proxy config names.

The submodules are not imported here: each needs its gateway's package installed (the `litellm` extra).
"""

__all__: list[str] = []
