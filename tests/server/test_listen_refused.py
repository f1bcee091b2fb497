"""A 2026-07-28 `subscriptions/listen` filter naming a URI the caller could not subscribe to on 2025-11-25 is
refused as `resources/subscribe` refuses it: another user's run and a run that does not exist alike (the same
words: whether another's run exists is not told), a run that does not exist, a URI nothing is told
of. The listen protocol refuses part of a filter by leaving it out of the acknowledgment; a listen asking for
nothing else is answered with the error (INVALID_PARAMS, naming the URI and why) instead of a stream that would
never tell anything."""

from __future__ import annotations

from pathlib import Path

import mcp_types as types
import pytest
from mcp import Client, MCPError

from mcp_team.llm.settings import ModelSettings
from mcp_team.server.app import build_server
from support.run_updates import LISTING, Updates, connected, honored
from support.two_users import two_user_server

pytestmark = [pytest.mark.anyio, pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")]


async def refused(client: Client, *uris: str) -> str:
    """The error message of a listen naming `uris`, which must be refused with INVALID_PARAMS."""
    with pytest.raises(MCPError) as caught:
        async with client.listen(resource_subscriptions=list(uris)):
            pass
    assert caught.value.error.code == types.INVALID_PARAMS, caught.value.error
    return caught.value.error.message


async def test_a_listen_naming_another_users_run_is_refused_as_one_naming_no_run(tmp_path: Path) -> None:
    async with (
        two_user_server(tmp_path) as url,
        connected(url, "alice", "auto", Updates()) as alice,
        connected(url, "bob", "auto", Updates()) as bob,
        connected(url, "bob", "legacy", Updates()) as bob_2025,
    ):
        ran = await alice.call_tool("run_team", {"request": "Write a haiku"})
        assert not ran.is_error and ran.structured_content is not None, ran.content
        run_id = ran.structured_content["run_id"]
        hers = f"team://runs/{run_id}"
        assert await honored(alice, hers) == [hers]  # hers to follow

        message = await refused(bob, hers)
        assert message == f"no run '{run_id}' on this server (see team://runs)"
        with pytest.raises(MCPError) as on_2025:
            await bob_2025.subscribe_resource(hers)
        assert on_2025.value.error.message == message  # the words of 2025-11-25's refusal
        # A run that does not exist: the same words, so they do not tell that hers does
        assert await refused(bob, "team://runs/no-such-run") == message.replace(run_id, "no-such-run")

        # With something else to tell, the stream is acknowledged without her run (the protocol's refusal of part
        # of a filter), as without the unknown one
        assert await honored(bob, hers, LISTING, "team://runs/no-such-run") == [LISTING]
        async with bob.listen(tools_list_changed=True, resource_subscriptions=[hers]) as stream:
            assert stream.honored.tools_list_changed and not stream.honored.resource_subscriptions


async def test_what_2025_refuses_to_subscribe_to_a_listen_refuses_in_the_same_words() -> None:
    server = build_server(ModelSettings(model="offline"))
    async with Client(server, mode="auto") as client, Client(server, mode="legacy") as on_2025:
        ran = await client.call_tool("run_team", {"request": "Write a haiku"})
        assert ran.structured_content is not None, ran.content
        for uri in ("team://runs/no-such-run", "team://nothing"):
            with pytest.raises(MCPError) as subscribed:
                await on_2025.subscribe_resource(uri)
            assert await refused(client, uri) == subscribed.value.error.message
        assert "no run 'no-such-run'" in await refused(client, "team://runs/no-such-run")
        assert await refused(client, "team://nothing", "team://other") == (
            f"{await refused(client, 'team://nothing')}; {await refused(client, 'team://other')}"
        )
        assert await honored(client, LISTING, "team://nothing") == [LISTING]  # the listing is followed here too
