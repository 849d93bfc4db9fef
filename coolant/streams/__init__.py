"""The imperative shell: the Faust app and agents, the Redis materializer, topic administration."""
