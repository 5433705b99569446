"""Headless Chromium driven through the DevTools protocol, for the tests that look at pages.

Debian's `chromium` (installed by .ci/run) speaks the protocol over a pipe
(`--remote-debugging-pipe`: commands in on fd 3, replies and events out on fd 4, each a JSON
message ended by a NUL byte), so no port, no network and no client library are needed. Flags:
no sandbox (CI runs as root), no GPU, nothing that phones home; a throwaway profile.
Protocol reference: chromedevtools.github.io/devtools-protocol (Target, Page, Runtime, Log).
"""

from __future__ import annotations

import base64
import fcntl
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from typing import Any

CHROMIUM = "chromium"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--remote-debugging-pipe",
)


class BrowserError(RuntimeError):
    pass


def executable() -> str:
    """Chromium's path; its absence is a failure (CI installs it), never a skip."""
    path = shutil.which(CHROMIUM)
    if path is None:
        raise BrowserError("chromium is not installed: run `apt-get install -y chromium` (bash .ci/run does)")
    return path


class Browser:
    """One Chromium process; pages are opened with `page()`. Use as a context manager."""

    def __init__(self, width: int = 1280, height: int = 900):
        self.profile = tempfile.TemporaryDirectory(prefix="jaxinfra-chromium-")
        to_browser_r, self._out = os.pipe()
        self._in, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: the protocol's fixed descriptors 3 and 4
            a, b = fcntl.fcntl(to_browser_r, fcntl.F_DUPFD, 10), fcntl.fcntl(from_browser_w, fcntl.F_DUPFD, 10)
            os.dup2(a, 3)
            os.dup2(b, 4)

        self.proc = subprocess.Popen(
            [
                executable(),
                *FLAGS,
                f"--user-data-dir={self.profile.name}",
                f"--window-size={width},{height}",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            close_fds=False,
            preexec_fn=wire,
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        self._buffer = b""
        self._next = 0
        self.events: list[dict[str, Any]] = []
        self.width, self.height = width, height

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.call("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        for fd in (self._in, self._out):
            try:
                os.close(fd)
            except OSError:
                pass
        self.profile.cleanup()

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise BrowserError("no answer from chromium in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise BrowserError(f"chromium exited (status {self.proc.poll()})")
            self._buffer += chunk
        message, self._buffer = self._buffer.split(b"\0", 1)
        return json.loads(message)

    def call(self, method: str, session: str | None = None, timeout: float = 30.0, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its result (events meanwhile are kept in `events`)."""
        self._next += 1
        message: dict[str, Any] = {"id": self._next, "method": method, "params": params}
        if session:
            message["sessionId"] = session
        os.write(self._out, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self._next:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_event(self, match: Callable[[dict[str, Any]], bool], timeout: float = 30.0) -> dict[str, Any]:
        """The first event (kept or arriving) for which `match` holds."""
        for i, event in enumerate(self.events):
            if match(event):
                return self.events.pop(i)
        deadline = time.monotonic() + timeout
        while True:
            event = self._read(deadline)
            if match(event):
                return event
            self.events.append(event)

    def page(self) -> Page:
        target = self.call("Target.createTarget", url="about:blank")["targetId"]
        session = self.call("Target.attachToTarget", targetId=target, flatten=True)["sessionId"]
        return Page(self, session)


class Page:
    """One tab: navigate, evaluate, read its console, screenshot."""

    def __init__(self, browser: Browser, session: str):
        self.browser = browser
        self.session = session
        for domain in ("Page", "Runtime", "Log"):
            self.call(f"{domain}.enable")
        self.call(
            "Emulation.setDeviceMetricsOverride",
            width=browser.width,
            height=browser.height,
            deviceScaleFactor=1,
            mobile=False,
        )

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        return self.browser.call(method, self.session, **params)

    def goto(self, url: str, timeout: float = 30.0) -> None:
        """Navigate and wait for the load event."""
        self.browser.events = [
            e
            for e in self.browser.events
            if not (e.get("sessionId") == self.session and e.get("method") == "Page.loadEventFired")
        ]
        reply = self.call("Page.navigate", url=url)
        if reply.get("errorText"):
            raise BrowserError(f"{url}: {reply['errorText']}")
        self.browser.wait_event(
            lambda e: e.get("sessionId") == self.session and e.get("method") == "Page.loadEventFired", timeout
        )

    def evaluate(self, expression: str, timeout: float = 30.0) -> Any:
        """The JSON value of a JavaScript expression (promises are awaited)."""
        reply = self.browser.call(
            "Runtime.evaluate",
            self.session,
            timeout=timeout,
            expression=expression,
            returnByValue=True,
            awaitPromise=True,
        )
        if "exceptionDetails" in reply:
            raise BrowserError(f"{expression[:80]}: {reply['exceptionDetails']}")
        return reply["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30.0) -> Any:
        """Poll a JavaScript expression until it is truthy; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise BrowserError(f"timed out waiting for {expression}")
            time.sleep(0.05)

    def console(self, levels: tuple[str, ...] = ("error",), browser_log: bool = True) -> list[str]:
        """The page's console messages at these levels and its uncaught exceptions; with `browser_log`
        also the browser's own log entries about the page (failed loads, CSP violations, WebGL notes)."""
        out = []
        for e in self.browser.events:
            if e.get("sessionId") != self.session:
                continue
            params = e.get("params", {})
            if e.get("method") == "Runtime.consoleAPICalled" and params.get("type") in levels:
                out.append(" ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", [])))
            elif e.get("method") == "Runtime.exceptionThrown":
                out.append(json.dumps(params.get("exceptionDetails", {}))[:500])
            elif browser_log and e.get("method") == "Log.entryAdded" and params.get("entry", {}).get("level") in levels:
                out.append(params["entry"].get("text", ""))
        return out

    def screenshot(self, full_page: bool = True) -> bytes:
        """A PNG of the page (the whole document with `full_page`), once its fonts are loaded and two frames
        have been painted since (the load event does not wait for paint)."""
        self.call("Page.bringToFront")  # a background tab may not paint at all
        self.evaluate(
            "(async () => { if (document.fonts) await document.fonts.ready; for (let i = 0; i < 2; i++) "
            "await new Promise(r => { requestAnimationFrame(r); setTimeout(r, 500); }); return true; })()"
        )
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            size = self.evaluate("[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
            params |= {
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": size[0], "height": size[1], "scale": 1},
            }
        return base64.b64decode(self.call("Page.captureScreenshot", **params)["data"])

    def ink(self, png: bytes) -> dict[str, int]:
        """How much of a PNG is drawn: its size, and the pixels that differ from its corner pixel,
        and the distinct colours, as Chromium's own image decoder reads it (a canvas)."""
        data = "data:image/png;base64," + base64.b64encode(png).decode()
        return self.evaluate(f"""(async () => {{
            const img = new Image(); img.src = {json.dumps(data)}; await img.decode();
            const c = document.createElement('canvas'); c.width = img.width; c.height = img.height;
            const g = c.getContext('2d'); g.drawImage(img, 0, 0);
            const d = g.getImageData(0, 0, c.width, c.height).data;
            let inked = 0; const colours = new Set();
            for (let i = 0; i < d.length; i += 4) {{
              if (d[i] !== d[0] || d[i+1] !== d[1] || d[i+2] !== d[2]) inked++;
              if (colours.size < 1000) colours.add((d[i] << 16) | (d[i+1] << 8) | d[i+2]);
            }}
            return {{width: c.width, height: c.height, inked, colours: colours.size}};
        }})()""")
