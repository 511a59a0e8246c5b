"""Clock domains: read state, plan writes, apply, verify. One module per domain."""
