"""The one way out of an agent's network namespace: a relay, started by the sandbox's init as the
agent's uid, that listens on loopback ports inside the namespace and carries each connection,
byte for byte, to a Unix socket the supervisor bound into the sandbox (the model gateway, and
in allowlist mode the egress proxy). The namespace has no other interface than its own
loopback, so nothing else is reachable: not the host's ports, not another loopback service, not
a DNS server.

Run as `python -S -E egress_relay.py <ready fd> <uid:gid or -> <port>=<socket path> ...`;
standard library only. Started by the init (which can read the interpreter wherever it lies),
it binds its ports, then drops to the agent's uid and gid for good, then writes one byte to
<ready fd>, so the CLI, started after, never finds a port closed. It dies with the namespace.
"""

import _thread
import os
import socket
import sys

BUFFER = 65536


def _pump(src, dst, done, lock):  # type: (socket.socket, socket.socket, list[int], object) -> None
    try:
        while True:
            data = src.recv(BUFFER)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    try:
        dst.shutdown(socket.SHUT_WR)
    except OSError:
        pass
    with lock:  # type: ignore[attr-defined]
        done[0] -= 1
        last = done[0] == 0
    if last:  # both directions finished: the pair is closed once, by the second
        src.close()
        dst.close()


def _serve(listener, path):  # type: (socket.socket, str) -> None
    while True:
        try:
            conn, _addr = listener.accept()
        except OSError:
            continue
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(path)
        except OSError:
            conn.close()
            up.close()
            continue
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        done = [2]
        lock = _thread.allocate_lock()
        _thread.start_new_thread(_pump, (conn, up, done, lock))
        _thread.start_new_thread(_pump, (up, conn, done, lock))


def main(argv):  # type: (list[str]) -> int
    ready, ids = int(argv[1]), argv[2]
    listeners = []
    for spec in argv[3:]:
        port, _, path = spec.partition("=")
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(("127.0.0.1", int(port)))
        s.listen(256)
        listeners.append((s, path))
    if ids != "-":
        uid, gid = (int(x) for x in ids.split(":"))
        os.setgroups([])
        os.setresgid(gid, gid, gid)
        os.setresuid(uid, uid, uid)
        if os.getuid() != uid or os.geteuid() != uid:
            return 1
    os.write(ready, b"1")
    os.close(ready)
    for s, path in listeners[1:]:
        _thread.start_new_thread(_serve, (s, path))
    if listeners:
        _serve(*listeners[0])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
