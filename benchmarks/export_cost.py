"""Tracing cost: orchestration CPU per handoff with spans exported over OTLP/HTTP, versus tracing off.

The team runs in a child process (one per configuration, since a process installs one tracer
provider); the OTLP receiver runs here, so its CPU is not counted. CPU is `time.process_time()`
of the child, which includes the exporter's background thread and a final flush.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

K = 32
RUNS = 40


class _Sink(BaseHTTPRequestHandler):
    received = 0

    def do_POST(self) -> None:  # an OTLP/HTTP receiver that accepts and counts bytes
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        _Sink.received += len(body)
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        pass


def worker(mode: str, endpoint: str) -> None:
    import anyio

    from mcp_team.handoffs import Budgets, RunSettings, Team
    from mcp_team.llm import ModelSet
    from mcp_team.llm.offline import OfflineModel
    from mcp_team.specialists import Specialist
    from mcp_team.telemetry.setup import TracingConfig, setup_tracing

    tracing = setup_tracing(TracingConfig.from_env({}, endpoint=endpoint)) if mode == "otlp" else None
    crew = [Specialist(name=f"w{i}", description="works", system_prompt="work") for i in range(K)]
    settings = RunSettings(budgets=Budgets(max_handoffs=10_000, max_model_calls=100_000))
    team = Team(ModelSet.single(OfflineModel(), max_concurrency=64), crew, settings)

    async def runs(n: int) -> None:
        for _ in range(n):
            result = await team.run("Work on the task")
            assert result.status == "complete" and len(result.handoffs) == K

    anyio.run(runs, 5)  # warm up
    if tracing is not None:
        tracing.flush()
    start = time.process_time()
    anyio.run(runs, RUNS)
    if tracing is not None:
        tracing.flush(10_000)  # the export of these runs' spans is part of their cost
    cpu = time.process_time() - start
    print(json.dumps({"cpu_ms_per_handoff": cpu * 1000 / (RUNS * K)}))
    if tracing is not None:
        tracing.shutdown()


def main() -> dict[str, float]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Sink)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{server.server_address[1]}/v1/traces"
    figures = {}
    for mode in ("off", "otlp"):
        out = subprocess.run(
            [sys.executable, __file__, "--worker", mode, endpoint],
            capture_output=True,
            text=True,
            check=True,
            timeout=300,
        )
        figures[mode] = json.loads(out.stdout.strip().splitlines()[-1])["cpu_ms_per_handoff"]
    server.shutdown()
    ratio = figures["otlp"] / figures["off"]
    print(f"tracing cost, K={K} fan-out, {RUNS} runs each, CPU per handoff (fixed costs spread over K):")
    print(f"  tracing off                 {figures['off']:.3f} ms")
    print(f"  OTLP/HTTP to a local sink   {figures['otlp']:.3f} ms   ({_Sink.received / 1024:.0f} KiB received)")
    print(f"  ratio                       {ratio:.2f}x")
    return {"ratio": ratio, **figures}


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
