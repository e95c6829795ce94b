"""A minimal headless-Chromium driver over the DevTools protocol (stdlib only).

Starts ``chromium --headless`` with networking features off, speaks the protocol over a
small RFC 6455 websocket client (text frames, client masking, ping/pong), and gives a page
with ``evaluate``, ``screenshot`` and the console errors and network requests it saw.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

__all__ = ["Browser", "BrowserError", "Page", "chromium_path"]

_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--remote-debugging-port=0",
    "--window-size=1400,1000",
]


class BrowserError(RuntimeError):
    """The browser did not start, or a protocol command failed."""


def chromium_path() -> str | None:
    """The Chromium binary, or None when it is not installed."""
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return None


class _WebSocket:
    """Just enough of a websocket client for the DevTools protocol."""

    def __init__(self, url: str, timeout: float) -> None:
        parts = urllib.parse.urlsplit(url)
        self._sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        )
        self._sock.sendall(request.encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self._sock.recv(1)
            if not chunk:
                raise BrowserError("DevTools closed the websocket handshake")
            head += chunk
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise BrowserError(f"DevTools refused the websocket: {head[:200]!r}")

    def _exact(self, size: int) -> bytes:
        data = bytearray()
        while len(data) < size:
            chunk = self._sock.recv(size - len(data))
            if not chunk:
                raise BrowserError("DevTools closed the websocket")
            data += chunk
        return bytes(data)

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        header = bytearray([0x80 | opcode])
        size = len(payload)
        if size < 126:
            header.append(0x80 | size)
        elif size < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", size)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", size)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        self._sock.sendall(bytes(header) + mask + masked)

    def send(self, text: str) -> None:
        self._send_frame(0x1, text.encode())

    def recv(self) -> str:
        message = bytearray()
        while True:
            first, second = self._exact(2)
            opcode, size = first & 0x0F, second & 0x7F
            if size == 126:
                size = struct.unpack(">H", self._exact(2))[0]
            elif size == 127:
                size = struct.unpack(">Q", self._exact(8))[0]
            mask = self._exact(4) if second & 0x80 else b""
            payload = self._exact(size)
            if mask:
                payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
            if opcode == 0x9:
                self._send_frame(0xA, payload)
                continue
            if opcode == 0x8:
                raise BrowserError("DevTools closed the websocket")
            if opcode in (0x0, 0x1, 0x2):
                message += payload
                if first & 0x80:
                    return message.decode()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._send_frame(0x8, b"")
        self._sock.close()


class Page:
    """One tab: commands, console errors and network requests seen since it opened."""

    def __init__(self, browser: Browser, session: str) -> None:
        self._browser = browser
        self._session = session
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.loaded = False

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Runs one protocol command in this tab and returns its result."""
        return self._browser.send(method, params, session=self._session)

    def observe(self, event: dict[str, Any]) -> None:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            text = details.get("exception", {}).get("description") or details.get("text")
            self.errors.append(f"exception: {text}")
        elif method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params.get("args", [])
            self.errors.append("console: " + " ".join(str(a.get("value", a)) for a in args))
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            self.errors.append("log: " + params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            self.requests.append(params.get("request", {}).get("url", ""))
        elif method == "Page.loadEventFired":
            self.loaded = True

    def goto(self, url: str, timeout: float = 30.0) -> None:
        """Navigates and waits for the load event."""
        self.loaded = False
        self.send("Page.navigate", url=url)
        deadline = time.monotonic() + timeout
        while not self.loaded:
            if time.monotonic() > deadline:
                raise BrowserError(f"{url} did not load in {timeout} s")
            self._browser.pump(timeout=deadline - time.monotonic())

    def evaluate(self, expression: str) -> Any:
        """The value of a JavaScript expression (promises awaited)."""
        result = self.send(
            "Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise BrowserError(f"{expression[:80]!r} threw: {result['exceptionDetails']}")
        return result["result"].get("value")

    def screenshot(self, path: str) -> None:
        """Saves a PNG of the viewport."""
        data = self.send("Page.captureScreenshot", format="png")["data"]
        with open(path, "wb") as stream:
            stream.write(base64.b64decode(data))


class Browser:
    """A headless Chromium process and its DevTools connection."""

    def __init__(self, binary: str, timeout: float = 30.0) -> None:
        self._profile = tempfile.mkdtemp(prefix="modelprov-chromium-")
        self._timeout = timeout
        self._process = subprocess.Popen(
            [binary, *_FLAGS, f"--user-data-dir={self._profile}", "about:blank"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        url = self._devtools_url(timeout)
        self._ws = _WebSocket(url, timeout)
        self._next_id = 0
        self._pages: dict[str, Page] = {}

    def _devtools_url(self, timeout: float) -> str:
        assert self._process.stderr is not None
        deadline = time.monotonic() + timeout
        seen: list[str] = []
        while time.monotonic() < deadline:
            line = self._process.stderr.readline()
            if not line:
                break
            seen.append(line)
            match = re.search(r"DevTools listening on (ws://\S+)", line)
            if match:
                return match.group(1)
        self.close()
        raise BrowserError("Chromium did not start:\n" + "".join(seen[-20:]))

    def pump(self, timeout: float) -> dict[str, Any]:
        """Reads one message, routing events to their pages."""
        self._ws._sock.settimeout(max(timeout, 0.1))
        message: dict[str, Any] = json.loads(self._ws.recv())
        if "method" in message:
            page = self._pages.get(message.get("sessionId", ""))
            if page is not None:
                page.observe(message)
        return message

    def send(
        self, method: str, params: dict[str, Any] | None = None, *, session: str | None = None
    ) -> dict[str, Any]:
        """Runs one protocol command and returns its result."""
        self._next_id += 1
        command: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            command["sessionId"] = session
        self._ws.send(json.dumps(command))
        deadline = time.monotonic() + self._timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise BrowserError(f"{method} got no answer in {self._timeout} s")
            message = self.pump(remaining)
            if message.get("id") == self._next_id:
                if "error" in message:
                    raise BrowserError(f"{method}: {message['error']}")
                result: dict[str, Any] = message.get("result", {})
                return result

    def new_page(self) -> Page:
        """A new tab with Runtime, Log, Network and Page events on."""
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        page = Page(self, session)
        self._pages[session] = page
        for domain in ("Runtime", "Log", "Network", "Page"):
            page.send(f"{domain}.enable")
        return page

    def close(self) -> None:
        """Ends the browser process and removes its profile."""
        if getattr(self, "_ws", None) is not None:
            self._ws.close()
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        if self._process.stderr is not None:
            self._process.stderr.close()
        shutil.rmtree(self._profile, ignore_errors=True)

    @classmethod
    @contextlib.contextmanager
    def launched(cls, binary: str) -> Iterator[Browser]:
        """A browser for the length of a ``with`` block."""
        browser = cls(binary)
        try:
            yield browser
        finally:
            browser.close()
