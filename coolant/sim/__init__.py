"""Simulated traffic (scenarios, agents, routers) and the local demo (`coolant demo`)."""
