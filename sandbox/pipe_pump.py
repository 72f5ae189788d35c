"""Reading a call's stdout/stderr pipe inside the server's event loop."""

from __future__ import annotations

import asyncio
import os

from sandbox.feedback import StreamCapture


class PipePump:
    """Reads one pipe into a StreamCapture as data arrives, until EOF or the byte limit.

    stop() unregisters synchronously: the fd is closed right after, and its number may
    be handed to the next child at once, so no callback may outlive it.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, capture: StreamCapture,
                 too_much: asyncio.Future):
        self.loop, self.fd, self.capture, self.too_much = loop, fd, capture, too_much
        self.eof = loop.create_future()
        self._reading = True
        loop.add_reader(fd, self._on_readable)

    def _on_readable(self) -> None:
        self._read_available()
        if self.capture.over_limit and not self.too_much.done():
            self.too_much.set_result(True)

    def _read_available(self) -> None:
        while self._reading:
            try:
                data = os.read(self.fd, 1 << 16)  # the zygote made the fd non-blocking
            except BlockingIOError:
                return
            except OSError:
                data = b""
            if data:
                self.capture.feed(data)
            if not data or self.capture.over_limit:
                self.stop()
                if not self.eof.done():
                    self.eof.set_result(None)
                return

    def stop(self, drain: bool = False) -> None:
        """Stop reading; with drain, first take what the pipe already holds."""
        if drain:
            self._read_available()
        if self._reading:
            self._reading = False
            self.loop.remove_reader(self.fd)
