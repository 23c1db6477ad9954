"""`python -m bench` (what `make bench` runs)."""

from ._main import main

raise SystemExit(main())
