"""`mcp-team` exactly as its console script starts it, except that its exit waits a second once `main` has
returned (an `atexit` sleep), as a busy machine can hold a process there: what its threads still do after `main`
then reaches stderr, where a quick exit would cut it off. Usage: slow_exit.py ARGS... (as mcp-team)."""

import atexit
import sys
import time

from mcp_team.cli.main import main

if __name__ == "__main__":
    atexit.register(time.sleep, 1.0)
    sys.exit(main())
