"""``python -m bnpcore ...``: the command line of :mod:`bnpcore.cli`."""

import sys

from bnpcore.cli import main

sys.exit(main())
