"""`mcp-team` exactly as a user runs it, with one addition: every call the offline model finishes is appended
to the file `$MCP_TEAM_TEST_CALL_LOG` as `{"member", "phase", "task", "digest", "pid"}`, so a test that kills
the process can tell which model calls ran again after a restart (`digest` is the one in the call's durable
step name, `model:<model>:<digest>`, runs/runtime.py). With `$MCP_TEAM_TEST_FAIL_FIRST=NAME`, the first call of
specialist NAME ever made (the log is the memory, so across restarts too) fails with a server error (logged
with `"failed": true`); with `$MCP_TEAM_TEST_FAIL_PER=REGEX` too, the first call of NAME of each run does, a run
known by what REGEX matches in the call's first message (a tag in its request, e.g. `#[0-9]+`).
Usage: logged_serve.py ARGS... (as mcp-team)."""

from __future__ import annotations

import hashlib
import json
import os
import re
import sys

import anyio

from mcp_team.cli.main import main
from mcp_team.llm import ModelError, ModelRequest, ModelResponse
from mcp_team.llm.offline import OfflineModel

_complete = OfflineModel.complete


async def _logged(self: OfflineModel, request: ModelRequest) -> ModelResponse:
    log = os.environ["MCP_TEAM_TEST_CALL_LOG"]
    first = str(request.messages[0].content if request.messages else "")
    digest = hashlib.blake2b(request.model_dump_json().encode(), digest_size=6).hexdigest()
    entry = {"member": request.member, "phase": request.phase, "task": first[:200], "digest": digest,
             "pid": os.getpid()}  # fmt: skip
    failing = request.member and request.member == os.environ.get("MCP_TEAM_TEST_FAIL_FIRST")
    if per := os.environ.get("MCP_TEAM_TEST_FAIL_PER"):
        found = re.search(per, first)
        entry["run"] = found.group(0) if found else ""
        failing = failing and not any(e["member"] == request.member and e.get("run") == entry["run"]
                                      for e in map(json.loads, _read(log).splitlines()))  # fmt: skip
    else:
        failing = failing and f'"member": "{request.member}"' not in _read(log)
    if failing:
        await anyio.sleep(self.latency)
        _append(log, {**entry, "failed": True})
        raise ModelError("server_error", "injected by the test: the first call of this specialist fails")
    response = await _complete(self, request)
    _append(log, entry)
    return response


def _read(log: str) -> str:
    if not os.path.exists(log):
        return ""
    with open(log) as f:
        return f.read()


def _append(log: str, entry: dict[str, object]) -> None:
    with open(log, "a") as f:
        f.write(json.dumps(entry) + "\n")


OfflineModel.complete = _logged  # type: ignore[method-assign]

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
