"""Prose answers of the labs, rendered from their numbers; one module per lab, unit-tested."""
