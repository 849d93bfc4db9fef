"""The Faust-free edges, shared by the worker and every other command: Kafka and Redis clients and their errors
(`connect`), topic admin (`admin`), LiteLLM's Redis cooldown keys written (`materializer`) and read back
(`cooldowns`), record files (`sources`), one-line terminal messages (`terminal`)."""
