"""Faust-free edges: Kafka and Redis clients, topic admin, LiteLLM's Redis cooldown keys, record files, the terminal."""
