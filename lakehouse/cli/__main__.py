"""``python -m lakehouse.cli``: the ``lakehouse`` command."""

from lakehouse.cli import main

main()
