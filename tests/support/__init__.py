"""The tests' own toolkit: ports, extra brokers, Hypothesis profiles (and, as pytest plugins, the records,
Kafka, Redis, worker and upstream fixtures every test folder shares)."""
