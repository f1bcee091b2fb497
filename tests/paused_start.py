"""`mcp-team` exactly as its console script starts it (tests/logged_serve.py's way), with one addition: the
first import of the module `$MCP_TEAM_TEST_PAUSE_AT` stops for up to a minute, after saying `paused` on stderr,
so that a test can send a signal at that point of the start-up rather than at a moment it can only guess.
Nothing else is imported before the console script's own imports. Usage: paused_start.py ARGS... (as mcp-team)."""

import os
import sys
import time


class _PauseAt:
    """A finder that finds nothing: it only waits, once, when the module is first looked for."""

    module = os.environ["MCP_TEAM_TEST_PAUSE_AT"]

    @classmethod
    def find_spec(cls, name: str, path: object = None, target: object = None) -> None:
        if name == cls.module:
            sys.meta_path.remove(cls)
            os.write(2, b"paused\n")
            time.sleep(60)  # a signal with a Python handler ends the sleep with the handler's exception


sys.meta_path.insert(0, _PauseAt)

from mcp_team.server.cli import main  # noqa: E402  (what the console script does, after the pause is set)

if __name__ == "__main__":
    sys.exit(main())
