"""`mcp-team` exactly as its console script starts it (tests/support/logged_serve.py's way), with pauses a test sets, so
that it can send a signal at a given point rather than at a moment it can only guess:

- `$MCP_TEAM_TEST_PAUSE_AT` (module names, comma-separated): the first import of each stops for up to a minute,
  after saying `paused` on stderr;
- `$MCP_TEAM_TEST_PAUSE_AT_EXIT` (a path): as the interpreter unloads its modules, past every line the command
  wrote (and past the point where Python gives the signals it handled their default action back), say `exiting`
  on stderr and wait until a file at that path exists;
- `$MCP_TEAM_TEST_PAUSE_IN` (`module:Class.method`) and `$MCP_TEAM_TEST_PAUSE_ARMED` (a path): the first call of
  that method once a file at that path exists says `paused` on stderr and stops for up to a minute, as above.

Nothing else is imported before the console script's own imports. Usage: paused_start.py ARGS... (as mcp-team)."""

import os
import sys
import time

_MODULES = set(os.environ.get("MCP_TEAM_TEST_PAUSE_AT", "").split(","))  # each pauses once


class _PauseAt:
    """A finder that finds nothing: it only waits, once a module, when each is first looked for."""

    @classmethod
    def find_spec(cls, name: str, path: object = None, target: object = None) -> None:
        if name in _MODULES:
            _MODULES.remove(name)
            os.write(2, b"paused\n")
            time.sleep(60)  # a signal with a Python handler ends the sleep with the handler's exception


class _PauseAtExit:
    """Deleted as this module's globals are, among the last things the interpreter does. What it uses is its own,
    no global and no built-in name: when that comes, the interpreter may have emptied those already."""

    def __init__(self, path: str) -> None:
        self.path, self.write, self.stat, self.sleep, self.missing = path, os.write, os.stat, time.sleep, OSError

    def __del__(self) -> None:
        self.write(2, b"exiting\n")
        waited = 0
        while waited < 6000:  # a minute at most, as the other pauses
            try:
                self.stat(self.path)
                return
            except self.missing:
                self.sleep(0.01)
                waited += 1


def _pause_in(where: str, armed: str) -> None:
    import functools
    import importlib

    module, _, qualname = where.partition(":")
    owner_name, _, method_name = qualname.rpartition(".")
    owner = getattr(importlib.import_module(module), owner_name)
    method = getattr(owner, method_name)
    paused: list[bool] = []

    @functools.wraps(method)
    def pausing(*args: object, **kwargs: object) -> object:
        if not paused and os.path.exists(armed):
            paused.append(True)
            os.write(2, b"paused\n")
            time.sleep(60)
        return method(*args, **kwargs)

    setattr(owner, method_name, pausing)


sys.meta_path.insert(0, _PauseAt)
if os.environ.get("MCP_TEAM_TEST_PAUSE_AT_EXIT"):
    _pause_at_exit = _PauseAtExit(os.environ["MCP_TEAM_TEST_PAUSE_AT_EXIT"])

from mcp_team.cli.main import main  # noqa: E402  (what the console script does, after the pause is set)

if os.environ.get("MCP_TEAM_TEST_PAUSE_IN"):  # after the console script's imports: this one imports its module early
    _pause_in(os.environ["MCP_TEAM_TEST_PAUSE_IN"], os.environ["MCP_TEAM_TEST_PAUSE_ARMED"])

if __name__ == "__main__":
    sys.exit(main())
