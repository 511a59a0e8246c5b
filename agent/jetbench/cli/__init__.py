"""Typer commands: thin. Each parses options, calls one library function, renders the result."""
