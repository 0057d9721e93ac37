"""`python -m crosstune` runs the command line."""

import sys

from crosstune.cli import main

sys.exit(main())
