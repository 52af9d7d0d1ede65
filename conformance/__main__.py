"""`python -m conformance` is the `plumbline` command."""

from __future__ import annotations

import sys

from conformance.cli import main

sys.exit(main())
