"""Webhook receivers that never answer or answer one byte at a time: real sockets on loopback."""

from __future__ import annotations

import socket
import threading
import time

__all__ = ["ANSWER", "SlowReceiver"]

ANSWER = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"


class SlowReceiver:
    """Accepts every connection and reads the request; then ``hang`` never answers and
    ``trickle`` sends the answer one byte every ``every`` s. ``ended`` holds when each
    exchange ended (the client gave up and closed it), on ``time.monotonic()``."""

    def __init__(self, mode: str, every: float = 2.0) -> None:
        self.mode, self.every = mode, every
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}/hook"
        self.started: list[float] = []
        self.ended: list[float] = []
        self.stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            conn.settimeout(0.2)
            data = b""
            while not complete(data) and not self.stop.is_set():
                try:
                    data += conn.recv(65536)
                except TimeoutError:
                    continue
            self.started.append(time.monotonic())
            try:
                if self.mode == "hang":
                    while not self.stop.is_set():
                        try:
                            if conn.recv(65536) == b"":  # the client closed it
                                break
                        except TimeoutError:
                            continue
                else:
                    conn.settimeout(self.every)
                    for i in range(len(ANSWER)):
                        try:
                            if conn.recv(1) == b"" or self.stop.is_set():  # the client closed it
                                break
                        except TimeoutError:  # `every` seconds passed: the next byte
                            pass
                        conn.send(ANSWER[i : i + 1])
            except OSError:  # the client cut the connection
                pass
            self.ended.append(time.monotonic())

    def close(self) -> None:
        self.stop.set()
        self.listener.close()


def complete(request: bytes) -> bool:
    """The whole request is in: its head and the Content-Length bytes of its body."""
    head, sep, body = request.partition(b"\r\n\r\n")
    if not sep:
        return False
    length = next(
        (
            int(v)
            for k, _, v in (h.partition(b":") for h in head.split(b"\r\n"))
            if k.strip().lower() == b"content-length"
        ),
        0,
    )
    return len(body) >= length
