"""``lakehouse lateness``: how late a table's rows arrive (load time - event time), per source;
the rows that came below the archive cutoff (the late path) and how long they waited; the rows
rejected late; the smallest archive delay that keeps a chosen share of rows out of the late path.

``core`` is the arithmetic (pure), ``gather`` reads the warehouse (DuckDB and the Delta logs, no
Spark), ``plot`` draws the histogram (matplotlib).
"""
