"""``python -m bnpcore ...``: the command line of :mod:`bnpcore.cli`."""

import sys

from bnpcore.cli import main

if __name__ == "__main__":
    sys.exit(main())
