"""`mcp-team` exactly as a user runs it, with one addition: every call the offline model finishes is appended
to the file `$MCP_TEAM_TEST_CALL_LOG` as `{"member", "phase", "task", "pid"}`, so a test that kills the
process can tell which model calls ran again after a restart. Usage: logged_serve.py ARGS... (as mcp-team)."""

from __future__ import annotations

import json
import os
import sys

from mcp_team.llm import ModelRequest, ModelResponse
from mcp_team.llm.offline import OfflineModel
from mcp_team.server.cli import main

_complete = OfflineModel.complete


async def _logged(self: OfflineModel, request: ModelRequest) -> ModelResponse:
    response = await _complete(self, request)
    first = request.messages[0].content if request.messages else ""
    entry = {"member": request.member, "phase": request.phase, "task": str(first)[:200], "pid": os.getpid()}
    with open(os.environ["MCP_TEAM_TEST_CALL_LOG"], "a") as f:  # noqa: ASYNC230 - one short line
        f.write(json.dumps(entry) + "\n")
    return response


OfflineModel.complete = _logged  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
