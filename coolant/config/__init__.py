"""Configuration: the LiteLLM proxy YAML read into a `Policy` (`loader`, over `litellm_sections`,
`coolant_section` and their `reader`), where to connect and the secrets (`runtime`), one setting replaced for a
tune grid (`overrides`), and the one error they raise (`errors`)."""
