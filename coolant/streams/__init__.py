"""The live shell: the Faust app and agents, input lanes, state tables, the live registry, Redis repair, monitoring
and the admin API. The Faust-free edges it uses (clients, topic admin, the Redis writer) are in `coolant.io`."""
