"""A 2026-07-28 `subscriptions/listen` filter names at most `MAX_LISTEN_URIS` resources: each run's record named
costs the server a read of its run store before the stream is acknowledged, and a request may hold tens of
thousands. Up to the limit the filter is honored as ever; above it the listen is refused whole, before anything is
read, with INVALID_PARAMS naming the limit and what to do instead; the client's session goes on."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, MCPError
from mcp.client.streamable_http import streamable_http_client

from mcp_team.server.updates.run_updates import MAX_LISTEN_URIS
from support import HANG_GUARD, clean_env, plain_http_async, serve_http_process
from support.run_updates import LISTING, honored

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning"), pytest.mark.process]


async def test_a_listen_naming_more_resources_than_the_limit_is_refused_naming_it(tmp_path: Path) -> None:
    with serve_http_process("--state-dir", str(tmp_path), env=clean_env(MCP_TEAM_MODEL="offline")) as (base, _):
        async with (
            plain_http_async(timeout=HANG_GUARD) as http,
            Client(streamable_http_client(f"{base}/mcp", http_client=http), mode="auto", cache=None) as client,
        ):
            ran = await client.call_tool("run_team", {"request": "Write a haiku"})
            assert not ran.is_error and ran.structured_content is not None, ran.content
            run = f"team://runs/{ran.structured_content['run_id']}"
            unknown = [f"team://runs/no-such-run-{n}" for n in range(MAX_LISTEN_URIS)]

            at_the_limit = [LISTING, run, *unknown[: MAX_LISTEN_URIS - 2]]
            assert set(await honored(client, *at_the_limit)) == {LISTING, run}  # the unknown ones left out

            with pytest.raises(MCPError) as caught:
                async with client.listen(resource_subscriptions=[*at_the_limit, unknown[-1]]):
                    pass
            assert caught.value.error.code == types.INVALID_PARAMS, caught.value.error
            message = caught.value.error.message
            assert message.startswith(
                f"a listen filter names {MAX_LISTEN_URIS + 1} resources; at most {MAX_LISTEN_URIS} are followed "
                f"per listen stream: listen to {LISTING} to be told when a run starts or finishes"
            ), message
            assert "no-such-run" not in message  # refused whole: no URI was looked at

            assert await honored(client, run) == [run]  # the session goes on
