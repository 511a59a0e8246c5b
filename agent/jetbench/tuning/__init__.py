"""Profiles -> write plans; the state journal; apply and restore."""
