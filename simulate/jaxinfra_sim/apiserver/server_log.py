"""The simulated API server's log: one line a request (its status, method, target, caller and why), written to the
simulation's folder and capped (`Bounds.max_log_bytes`), so a pod's requests, however many, cannot fill the disk."""

from __future__ import annotations

import os


class Log:
    """The server's log (a file descriptor), one line a request, capped at `limit` bytes."""

    def __init__(self, fd: int, limit: int):
        self.fd, self.left = fd, limit

    def __call__(self, line: str) -> None:
        data = (line.replace("\n", " ") + "\n").encode("utf-8", "replace")
        if self.left <= 0:
            return
        if len(data) > self.left - 200:
            data, self.left = b"log capped here: later lines are not written (Bounds.max_log_bytes)\n", 0
        else:
            self.left -= len(data)
        os.write(self.fd, data)
