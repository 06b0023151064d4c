"""The model gateway's cost (docs/gateway.md): what going through the supervisor adds to a
streamed answer, measured against the mock Messages API directly in the same run.

Run from the repository root:  .venv/bin/python bench/gateway.py
(or `make bench ONLY=gateway`; BENCH_SMOKE=1 for small counts)

The mock runs as a process of its own (tests/fakes/mock_anthropic.py), the gateway in this
process's event loop, as in the supervisor. Figures:

* time to first token (the first SSE event's bytes): p50 through the gateway minus p50 direct,
  requests alternated one by one (goal: +5 ms at most);
* throughput of a long streamed answer (1 MiB in 1 KiB deltas, to a short request), from its
  first bytes to its end: through the gateway over direct (goal >= 0.9);
* 50 agents streaming at once (each its own token, answers back to back from a client process
  of its own, as the agents' CLIs are): the gateway's event loop lag p99 while they stream
  (goal < 50 ms), with the requests per second it forwarded.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402

from bench._common import (  # noqa: E402
    loop_lateness,
    percentile,
    quiet_logging,
    result,
    scratch_dir,
    smoke,
)
from supervisor.config import Settings  # noqa: E402
from supervisor.guard.gateway import ModelGateway  # noqa: E402

SUITE = {"timeout_s": 300}
TTFT_N = 20 if smoke() else 300
BIG_BYTES = 1024 * 1024
BIG_N = 3 if smoke() else 30
AGENTS = 5 if smoke() else 50
WINDOW_S = 2.0 if smoke() else 10.0
FLEET_ANSWER_BYTES = 16 * 1024
PROBE_S = 0.010
TTFT_GOAL_MS = 5.0
THROUGHPUT_GOAL = 0.9
LAG_GOAL_MS = 50.0
KEY = "bench-key"


def body(directive: str) -> bytes:
    return json.dumps({"model": "claude-sonnet-4-5", "max_tokens": 64, "stream": True,
                       "messages": [{"role": "user", "content": directive}]}).encode()


def long_answer(total_bytes: int) -> bytes:
    """A short request whose answer streams `total_bytes` of text in 1 KiB deltas."""
    return body(f"REPEAT {total_bytes // 1024}: " + "x" * 1024)


async def first_byte(http: aiohttp.ClientSession, url: str, token: str, data: bytes) -> float:
    """Seconds to the first bytes of the answer's body; the rest is read to its end."""
    started = time.perf_counter()
    async with http.post(url + "/v1/messages", data=data,
                         headers={"x-api-key": token, "content-type": "application/json"}) as r:
        await r.content.readany()
        took = time.perf_counter() - started
        await r.read()
        assert r.status == 200, r.status
    return took


async def whole(http: aiohttp.ClientSession, url: str, token: str,
                data: bytes) -> tuple[float, int, float, int]:
    """(seconds from the first bytes of the answer to its end, bytes after the first read):
    the stream's own rate; what comes before it is the time to first token, measured apart.
    Then (seconds from the request to the end, all bytes): the whole answer."""
    asked = time.perf_counter()
    async with http.post(url + "/v1/messages", data=data,
                         headers={"x-api-key": token, "content-type": "application/json"}) as r:
        first = len(await r.content.readany())
        started = time.perf_counter()
        got = 0
        async for chunk in r.content.iter_any():
            got += len(chunk)
        assert r.status == 200, r.status
    end = time.perf_counter()
    return end - started, got, end - asked, got + first


def start_mock() -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests/fakes/mock_anthropic.py")],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().strip()


async def main() -> int:
    quiet_logging()
    mock, mock_url = start_mock()
    try:
        with scratch_dir("sbgw") as home:
            settings = Settings(home=home, agent_env={"ANTHROPIC_API_KEY": KEY,
                                                      "ANTHROPIC_BASE_URL": mock_url},
                                gateway_requests_per_minute=0, egress="open")
            gateway = ModelGateway(settings, halted=lambda: False)
            await gateway.start()
            try:
                await measure(gateway, mock_url)
                await fleet(gateway, paced=True)
                await fleet(gateway, paced=False)
            finally:
                await gateway.close()
    finally:
        mock.terminate()
        mock.wait(10)
    return 0


async def measure(gateway: ModelGateway, mock_url: str) -> None:
    """Time to first token and throughput, measured by a client in a process of its own (as
    the agents' CLIs are), direct and through the gateway alternately."""
    token = gateway.issue("bench", "bench")["ANTHROPIC_API_KEY"]
    spec = json.dumps({"mock": mock_url, "gateway": gateway.url, "token": token})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--measure", spec, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    m = json.loads(out.decode().strip().splitlines()[-1])
    direct, through = m["direct_ttft"], m["gateway_ttft"]
    d50, g50 = percentile(direct, 50), percentile(through, 50)
    result("time to first token, added by the gateway (p50)", g50 - d50, "ms",
           goal=f"<= +{TTFT_GOAL_MS:g} ms", baseline=d50, ratio=g50 / d50,
           passed=None if smoke() else g50 - d50 <= TTFT_GOAL_MS,
           note=f"direct p50 {d50:.2f} ms, through {g50:.2f} ms; p99 "
           f"{percentile(direct, 99):.2f} / {percentile(through, 99):.2f} ms")
    dr, gr = percentile(m["direct_rate"], 50), percentile(m["gateway_rate"], 50)
    result("throughput of a 1 MiB streamed answer through the gateway (p50)", gr, "MB/s",
           goal=f">= {THROUGHPUT_GOAL:g}x direct", baseline=dr, ratio=gr / dr,
           passed=None if smoke() else gr / dr >= THROUGHPUT_GOAL,
           note="from the answer's first bytes to its end")
    dw, gw = percentile(m["direct_whole"], 50), percentile(m["gateway_whole"], 50)
    result("the same answer from the request to its end (p50), reported", gw, "MB/s",
           baseline=dw, ratio=gw / dw, note="includes the hop's time to first byte once")


async def measure_client(spec: dict[str, Any]) -> None:
    paths = (("direct", spec["mock"], KEY), ("gateway", spec["gateway"], spec["token"]))
    out: dict[str, list[float]] = {f"{n}_{k}": [] for n, _u, _t in paths
                                   for k in ("ttft", "rate", "whole")}
    async with aiohttp.ClientSession() as http:
        small = body("TEXT: hello")
        for _ in range(10):  # connections warmed on both paths
            for _n, url, cred in paths:
                await first_byte(http, url, cred, small)
        for _ in range(TTFT_N):
            for name, url, cred in paths:
                out[f"{name}_ttft"].append(await first_byte(http, url, cred, small) * 1000)
        big = long_answer(BIG_BYTES)
        for _ in range(BIG_N):
            for name, url, cred in paths:
                took, got, total_s, total = await whole(http, url, cred, big)
                out[f"{name}_rate"].append(got / took / 1e6)
                out[f"{name}_whole"].append(total / total_s / 1e6)
    sys.stdout.write(json.dumps(out) + "\n")


async def fleet(gateway: ModelGateway, *, paced: bool) -> None:
    """AGENTS clients in a process of their own, streaming back to back; lag probed here.
    Paced: each answer is 200 deltas of 64 bytes 10 ms apart (100 events a second per agent,
    faster than a model writes). Not paced: 16 KiB answers as fast as the mock makes them,
    a saturation figure (reported, not judged)."""
    tokens = [gateway.issue(f"a{i}", f"agent{i}")["ANTHROPIC_API_KEY"] for i in range(AGENTS)]
    directive = ("REPEAT 200/10: " + "z" * 64) if paced else \
        (f"REPEAT {FLEET_ANSWER_BYTES // 1024}: " + "y" * 1024)
    spec = json.dumps({"url": gateway.url, "tokens": tokens, "seconds": WINDOW_S + 4,
                       "directive": directive})
    proc = await asyncio.create_subprocess_exec(
        sys.executable, __file__, "--clients", spec, stdout=asyncio.subprocess.PIPE)
    assert proc.stdout is not None
    await proc.stdout.readline()  # every client has its first answer: streaming at full rate
    streams = [sum(c.streams for _a, c in gateway.view().agents)]
    before = sum(sum(c.requests.values()) for _a, c in gateway.view().agents)
    lag = await loop_lateness(WINDOW_S, PROBE_S)
    after = sum(sum(c.requests.values()) for _a, c in gateway.view().agents)
    streams.append(sum(c.streams for _a, c in gateway.view().agents))
    await proc.communicate()
    p99 = percentile(lag, 99)
    what = ("paced like a model (100 events/s each)" if paced
            else "saturating (16 KiB answers back to back)")
    judged = paced and not smoke()
    result(f"gateway loop lag p99, {AGENTS} agents streaming at once, {what}", p99, "ms",
           goal=f"< {LAG_GOAL_MS:g} ms" if paced else "",
           passed=(p99 < LAG_GOAL_MS) if judged else None,
           note=f"max {max(lag):.0f} ms, {(after - before) / WINDOW_S:.0f} answers/s forwarded, "
           f"{min(streams)}-{max(streams)} streams open at the probes' ends")


async def clients(spec: dict[str, Any]) -> None:
    data = body(spec["directive"])
    end = time.monotonic() + spec["seconds"]
    started = asyncio.Event()
    ready = 0

    async def one(token: str) -> None:
        nonlocal ready
        async with aiohttp.ClientSession() as http:
            first = True
            while time.monotonic() < end:
                await whole(http, spec["url"], token, data)
                if first:
                    first = False
                    ready += 1
                    if ready == len(spec["tokens"]):
                        started.set()

    async def announce() -> None:
        await started.wait()
        sys.stdout.write("streaming\n")
        sys.stdout.flush()

    await asyncio.gather(announce(), *(one(t) for t in spec["tokens"]))


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] in ("--clients", "--measure"):
        run = clients if sys.argv[1] == "--clients" else measure_client
        asyncio.run(run(json.loads(sys.argv[2])))
        sys.exit(0)
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(asyncio.run(main()))
