"""`mcp-team` under tracemalloc, driven by signals, for `load.py --tracemalloc DIR` (where memory goes).

SIGUSR1 the first time starts tracing (at idle: start-up and imports stay out of it, they would slow it to
a crawl); every later SIGUSR1 collects garbage and dumps a snapshot to `$TRACEMALLOC_DIR/snapN.bin`.
"""

from __future__ import annotations

import gc
import os
import signal
import sys
import tracemalloc
from types import FrameType

_count = 0


def _on_signal(_signum: int, _frame: FrameType | None) -> None:
    global _count
    _count += 1
    gc.collect()
    if _count == 1:
        tracemalloc.start(12)
    else:
        tracemalloc.take_snapshot().dump(os.path.join(os.environ["TRACEMALLOC_DIR"], f"snap{_count}.bin"))


if __name__ == "__main__":
    signal.signal(signal.SIGUSR1, _on_signal)
    from mcp_team.cli.main import main

    sys.exit(main(sys.argv[1:]))
