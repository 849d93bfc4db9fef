"""Configuration: the LiteLLM proxy YAML read into a `Policy` (`loader`), where to connect and the secrets
(`runtime`), one setting replaced for a tune grid (`overrides`), and the one error they raise (`errors`)."""
