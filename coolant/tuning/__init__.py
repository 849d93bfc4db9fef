"""`coolant tune`: replay recorded traffic through a grid of policies and measure what each would have done.

- `grid`: `--grid KEY=V1,V2,...` axes and their cartesian product of policies;
- `traffic`: the recording, read and decoded once, indexed per deployment;
- `metrics`: pure functions (failures avoided, successes diverted, detection delay, flapping);
- `runner`: the replays, in parallel processes;
- `report`, `report_html`: ranking, terminal table, CSV, JSON and the HTML report;
- `command`: `tune_command`, registered by the CLI as `coolant tune`.
"""
