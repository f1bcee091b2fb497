"""A streamed Chat Completions reply put back together into the whole reply it stands for.

The SDK's `ChatCompletionStreamState` does the merging: it joins every string a chunk's delta holds to what came
before. That is right for text and tool-call arguments, and wrong for what some servers differ in:
- a tool call's `id` and `function.name` sent again in every chunk of the call (Fireworks, some proxies; see
  BerriAI/litellm#8990) became `call_1call_1` and `calccalc`, a call to no tool: once a call has them, later
  chunks' are left out;
- usage in one chunk and none in a later one: the SDK keeps the last chunk's, so the last one reported is kept here.

Imported only by llm/openai.py: it imports `openai`, which is slow to import.
"""

from __future__ import annotations

from openai.lib.streaming.chat import ChatCompletionStreamState
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletion, ChatCompletionChunk
from openai.types.chat.chat_completion_chunk import ChoiceDeltaToolCall


class StreamedReply:
    """The chunks of one stream, `add`ed in order, and the `completion` they make. Whatever `add` raises means the
    chunk is not one of Chat Completions' (the SDK's merging asserts and raises as it finds out)."""

    def __init__(self) -> None:
        self._state = ChatCompletionStreamState()
        self._usage: CompletionUsage | None = None
        # Per (choice, tool call) index: whether the call has its id, and its name, already.
        self._named: dict[tuple[int, int], tuple[bool, bool]] = {}
        self.chunks = 0

    def add(self, chunk: ChatCompletionChunk) -> None:
        """Merge one chunk into the reply."""
        if chunk.usage is not None:
            self._usage = chunk.usage
        for choice in chunk.choices:
            if choice.delta.tool_calls:
                choice.delta.tool_calls = [self._first_time(choice.index, call) for call in choice.delta.tool_calls]
        self._state.handle_chunk(chunk)
        self.chunks += 1

    def completion(self) -> ChatCompletion:
        """The reply the chunks added make; call only after at least one."""
        snapshot = self._state.current_completion_snapshot
        snapshot.usage = self._usage
        return snapshot

    def _first_time(self, choice: int, call: ChoiceDeltaToolCall) -> ChoiceDeltaToolCall:
        """`call` without the id and name its tool call has been given already by an earlier delta."""
        key = (choice, call.index)
        had_id, had_name = self._named.get(key, (False, False))
        has_name = bool(call.function and call.function.name)
        self._named[key] = (had_id or bool(call.id), had_name or has_name)
        if not (had_id and call.id) and not (had_name and has_name):
            return call
        fields = call.to_dict()  # only the fields the server sent: the SDK merges what is there
        if had_id:
            fields.pop("id", None)
        function = fields.get("function")
        if had_name and isinstance(function, dict):
            function.pop("name", None)
        return ChoiceDeltaToolCall.model_construct(None, **fields)  # the SDK's: builds nested models too
