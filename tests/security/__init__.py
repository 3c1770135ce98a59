"""Hostile-client probes against the app served in public mode (docs/deploy.md, "Threat model")."""
