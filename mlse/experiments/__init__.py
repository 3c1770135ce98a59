"""Reproducible experiment recipes."""
