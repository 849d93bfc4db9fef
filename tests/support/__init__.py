"""The tests' own toolkit: ports, extra brokers, Hypothesis profiles, the fake OpenAI upstream (`upstream`) and,
as pytest plugins, the records, Kafka, Redis and worker fixtures every test folder shares."""
