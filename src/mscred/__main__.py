"""`python -m mscred ...`: the same CLI as the `mscred` command (e.g. where the venv's bin/ is not on PATH)."""
from mscred.cli.main import main

raise SystemExit(main())
