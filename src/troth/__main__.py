"""``python -m troth``: the same as the ``troth`` command."""

import sys

from troth.cli import main

sys.exit(main())
