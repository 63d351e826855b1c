"""Erasure: ``lakehouse delete`` removes rows by key or predicate from every place a row lives."""
