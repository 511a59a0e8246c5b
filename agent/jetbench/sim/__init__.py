"""Simulated boards and instruments: for demos, tests and CI. Never a claim about hardware."""
