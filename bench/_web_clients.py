"""The browsers of bench/web_console.py, in a process of their own (as browsers are): each signs
in with a one-time link, opens the fleet page's event stream and notes, for every frame, how
long after the oldest change it shows it arrived (the frame's `: since` line). Prints one JSON
line per client at the end.

python bench/_web_clients.py URL SECONDS TOKEN...
"""

from __future__ import annotations

import asyncio
import json
import sys
import time

import aiohttp


async def client(url: str, token: str, seconds: float) -> dict[str, object]:
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as s:
        async with s.post(url + "/signin", data={"token": token}, headers={"Origin": url},
                          allow_redirects=False) as resp:
            assert resp.status == 303, await resp.text()
        lags: list[float] = []  # per frame: ms from its oldest change to its arrival
        frames = 0
        nbytes = 0
        end = time.time() + seconds
        async with s.get(url + "/events?view=fleet", headers={"Accept": "text/event-stream"},
                         timeout=aiohttp.ClientTimeout(total=None, sock_read=seconds + 30)
                         ) as resp:
            assert resp.status == 200, await resp.text()
            buffer = b""
            while time.time() < end:
                try:
                    chunk = await asyncio.wait_for(resp.content.readany(), end - time.time())
                except TimeoutError:
                    break
                if not chunk:
                    break
                nbytes += len(chunk)
                buffer += chunk
                # Whole frames only (a browser's EventSource parses natively; this parses a
                # frame at once, not line by line, so the reader is not what lags).
                *whole, buffer = buffer.split(b"\n\n")
                at = time.time()
                for raw in whole:
                    if not raw.startswith(b": since ") or b"\nevent: fleet" not in raw:
                        continue
                    frames += 1
                    lags.append((at - float(raw[8:raw.index(b"\n")])) * 1000)
        return {"frames": frames, "bytes": nbytes, "lags": lags}


async def main() -> None:
    url, seconds, tokens = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    for got in await asyncio.gather(*(client(url, t, seconds) for t in tokens)):
        print(json.dumps(got), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
