"""`--help` of the issue-6 commands says what an operator needs to run them (contract §5: `--help` on each).

Checked on a wide terminal so that rich does not wrap a phrase across lines.
"""

from __future__ import annotations

import itertools

import pytest
from typer.testing import CliRunner

from coolant.cli.commands import app

MUST_SAY = {
    "probe": ["once per interval", "max_tokens 1", "embedding", "health_check_results", "use_shared_health_check",
              "coolant.health.cooldown: true", "--session-timeout", "--engine", "litellm.ahealth_check",
              "KAFKA_BOOTSTRAP", "REDIS_URL", "SIGTERM", "--metrics-port"],
    "tail": ["health flips", "--json", "--since", "--from-beginning", "--no-transitions", "Exit status 2"],
    "alerts": ["Slack-compatible", "COOLANT_ALERTS_WEBHOOK", "--suppress-period", "held back", "Retry-After",
               "--max-retries", "--dry-run", "cooldown over"],
    "worker": ["admin API", "--admin-token", "COOLANT_ADMIN_TOKEN", "/metrics", "--web-port", "--fetch-max-wait-ms",
               "--fetch-min-bytes", "--intake", "lanes", "agents", "--allow-untested-faust", "failover guards"],
}


@pytest.mark.parametrize("command", sorted(MUST_SAY))
def test_help_names_what_the_command_needs(command: str) -> None:
    result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "240", "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.split())  # one line: what a wrapped paragraph says, word for word
    missing = [phrase for phrase in MUST_SAY[command] if phrase not in text]
    assert not missing, f"`coolant {command} --help` does not say {missing}:\n{result.output}"


COMMANDS = [[c] for c in ("replay", "worker", "status", "demo", "tune", "publish", "tail", "alerts", "probe",
                          "deployments")] + [["deployments", "sync"]]
WIDTH = 80


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_help_reads_cleanly_at_80_columns(command: list[str]) -> None:
    """No value type on flags (`--help <bool>`), no spec jargon, and the description's paragraphs re-flowed to
    the terminal: a line ends early only where the next word would not have fit (no docstring line breaks)."""
    result = CliRunner().invoke(app, [*command, "--help"], env={"COLUMNS": str(WIDTH), "TERM": "dumb"})
    assert result.exit_code == 0, result.output
    text = result.output
    assert "<bool>" not in text and "§" not in text and "contract" not in text, text
    description = text.split("\nOptions:")[0].split("\nArguments:")[0].splitlines()[1:]
    for line, following in itertools.pairwise(description):
        if not line.strip() or not following.strip() or following.startswith("      "):  # \b blocks stay as written
            continue
        first_word = following.split()[0]
        assert len(line) + 1 + len(first_word) > WIDTH, (
            f"`coolant {' '.join(command)} --help` breaks a line early:\n{line}\n{following}")
