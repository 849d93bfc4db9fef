"""`python -m coolant.cli ...`, the same as the installed `coolant` script."""

from coolant.cli.commands import main

main()
