"""The browsers of bench/web_console.py, in a process of their own (as browsers are): each signs
in with a one-time link, opens the fleet page's event stream and notes, for every frame, when it
arrived and the turn count each agent's row shows. Prints one JSON line per client at the end.

python bench/_web_clients.py URL SECONDS TOKEN...
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
import time

import aiohttp

ROW = re.compile(r'id="row-([A-Za-z0-9]+)".*?class="turns">turn (\d+)', re.S)


async def client(url: str, token: str, seconds: float) -> dict[str, object]:
    jar = aiohttp.CookieJar(unsafe=True)
    async with aiohttp.ClientSession(cookie_jar=jar) as s:
        async with s.post(url + "/signin", data={"token": token}, headers={"Origin": url},
                          allow_redirects=False) as resp:
            assert resp.status == 303, await resp.text()
        seen: dict[str, int] = {}
        changes: list[tuple[float, str, int]] = []  # (arrival, agent id, turn shown)
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
                    if not raw.startswith(b"id: ") or b"\nevent: fleet\n" not in raw:
                        continue
                    frames += 1
                    for agent, turn in ROW.findall(raw.decode()):
                        if seen.get(agent) != int(turn):
                            seen[agent] = int(turn)
                            changes.append((at, agent, int(turn)))
        return {"frames": frames, "bytes": nbytes, "changes": changes}


async def main() -> None:
    url, seconds, tokens = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
    for got in await asyncio.gather(*(client(url, t, seconds) for t in tokens)):
        print(json.dumps(got), flush=True)


if __name__ == "__main__":
    asyncio.run(main())
