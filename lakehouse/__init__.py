"""lakehouse: a storage layer for event-time fact tables on Delta Lake."""

__version__ = "0.1.0"
