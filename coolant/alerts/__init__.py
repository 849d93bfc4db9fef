"""`coolant tail` and `coolant alerts`: the cooldown and health-transition topics made visible to people.

Functional core (pure, plain data, the clock passed in): `slack` builds payloads, `suppress` decides
what flap suppression lets through, `recovery` schedules recovery notices, `retry` decides whether
and when to retry a webhook post, `notices` ties them together per record and per clock tick, and
`render` formats tail lines. Imperative shell: `feed` (Kafka), `webhook` (HTTP), `alerter` (the
asyncio loop and offset commits) and `command` (the typer commands).
"""
