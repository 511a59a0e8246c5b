"""Result files (schema, atomic I/O), whitepaper-style tables, plots and comparisons.

Importing this package imports neither torch nor matplotlib (plots import it inside)."""
