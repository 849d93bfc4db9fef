"""`coolant probe`: fleet-wide health probing, each deployment once per interval however many probers run.

Pure parts: `ownership` (who probes what, when), `classify` (a probe result as a `coolant.health/1` record),
`results` (LiteLLM's shared `health_check_results` document), `targets` (what to probe, from the LiteLLM config).
Edges: `http` (the probe call), `service` (the loop: Kafka group membership, producer, Redis), `command` (CLI).
See docs/probe.md.
"""
