"""Sphinx extensions of cconv's documentation."""
