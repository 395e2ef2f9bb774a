"""``python -m collector.cli``: the same as the ``turnledger`` command."""

import sys

from collector.cli import main

sys.exit(main())
