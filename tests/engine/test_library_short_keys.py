"""A local server's placeholder API key (`x`, `ollama`) given to a model in Python: an error of that model reads
as written. Its key was masked inside every word that contains it ("chec[redacted] the networ[redacted]")."""

from __future__ import annotations

import socket

import pytest

from mcp_team import ModelSet, Specialist, Team
from mcp_team.llm.openai import OpenAIModel

pytestmark = pytest.mark.anyio


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("key", ["k", "ollama"])
async def test_a_short_placeholder_key_does_not_mangle_an_error(key: str) -> None:
    model = OpenAIModel("qwen2.5:7b", api_key=key, base_url=f"http://127.0.0.1:{closed_port()}/v1", max_retries=0)
    scout = Specialist(name="scout", description="Finds facts.", system_prompt="List facts only.")
    result = await Team(ModelSet.single(model), [scout]).run("Find facts about bees")
    assert result.status == "failed"
    (failure,) = [f for f in result.failures if f.specialist == "supervisor"]
    assert "nothing is listening at http://127.0.0.1:" in failure.reason  # connection refused: said at once
    assert "start the model server there, or correct the base URL" in failure.reason
    assert "[redacted]" not in failure.reason
