"""Streams: producers write a table through rowtime bounds (see ``model`` for the rules)."""
