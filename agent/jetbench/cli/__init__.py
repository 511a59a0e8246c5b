"""Typer commands: thin. Each parses options, calls one library function, renders the result.

`entry` is the `jetbench` command's entry point: it imports nothing until called, so a Ctrl-C
while the CLI's modules load (typer, rich: a good part of a second on a small board) is
`interrupted` and exit 130 like one anywhere else, not a traceback from the import.
"""

from __future__ import annotations


def entry() -> None:
    import sys

    try:
        from .main import main

        main()
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        sys.exit(130)  # errors.EXIT_INTERRUPTED (not imported: the Ctrl-C may be in it)
