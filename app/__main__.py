"""`python -m app` starts Tandem."""

from app.main import main

raise SystemExit(main())
