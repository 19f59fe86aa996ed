"""`python -m xpusim ...` runs the command line, as the `xpusim` entry point does."""

from xpusim.cli import main

main()
