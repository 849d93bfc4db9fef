"""Configuration: the LiteLLM proxy YAML read into a `Policy` and runtime settings (`loader`)."""
