"""`python -m server` is `tandem serve`."""

from server.cli import main

raise SystemExit(main())
