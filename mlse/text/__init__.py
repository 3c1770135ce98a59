"""User text before it is scored or shown: which characters it keeps, which language it is in."""
