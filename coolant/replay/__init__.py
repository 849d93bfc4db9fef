"""Replay: the policy over recorded traffic, no services (`coolant replay`)."""
