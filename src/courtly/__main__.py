"""`python -m courtly` is the `courtly` command."""

import sys

from courtly.cli import main

sys.exit(main())
