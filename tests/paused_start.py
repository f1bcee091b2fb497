"""`mcp-team` exactly as its console script starts it (tests/logged_serve.py's way), with one addition: the
first import of each module named in `$MCP_TEAM_TEST_PAUSE_AT` (comma-separated) stops for up to a minute, after
saying `paused` on stderr, so that a test can send a signal at that point rather than at a moment it can only guess.
Nothing else is imported before the console script's own imports. Usage: paused_start.py ARGS... (as mcp-team)."""

import os
import sys
import time

_MODULES = set(os.environ["MCP_TEAM_TEST_PAUSE_AT"].split(","))  # each pauses once


class _PauseAt:
    """A finder that finds nothing: it only waits, once a module, when each is first looked for."""

    @classmethod
    def find_spec(cls, name: str, path: object = None, target: object = None) -> None:
        if name in _MODULES:
            _MODULES.remove(name)
            os.write(2, b"paused\n")
            time.sleep(60)  # a signal with a Python handler ends the sleep with the handler's exception


sys.meta_path.insert(0, _PauseAt)

from mcp_team.server.cli import main  # noqa: E402  (what the console script does, after the pause is set)

if __name__ == "__main__":
    sys.exit(main())
