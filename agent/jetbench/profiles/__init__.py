"""Profiles (TOML) -> targets resolved against a board and its power mode -> a write plan,
applied whole after the journal records the originals (ownership/journal.py keeps the journal
and restores)."""
