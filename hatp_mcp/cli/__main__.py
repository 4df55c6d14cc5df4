"""`python -m hatp_mcp.cli` is the `hatp` console script."""

import sys

from hatp_mcp.cli import main

sys.exit(main())
