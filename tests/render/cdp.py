"""A minimal Chrome DevTools Protocol client over a stdlib websocket, for the browser tests.

Launches headless Chromium with networking off and a fresh profile, connects to the page
target and exchanges JSON messages. Only what the tests need: commands, collected events,
ping/pong, fragmented and long frames.
"""

from __future__ import annotations

import base64
import http.client
import json
import os
import shutil
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["find_chromium", "Browser", "CDPError"]

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-default-apps", "--disable-extensions", "--host-resolver-rules=MAP * ~NOTFOUND",
         "--window-size=1280,1600", "--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0")


class CDPError(RuntimeError):
    """The browser could not be started or answered with an error."""


def find_chromium() -> str | None:
    """Path of a Chromium binary, or None."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


class _WebSocket:
    def __init__(self, url: str, timeout_s: float) -> None:
        parts = urlsplit(url)
        self.sock = socket.create_connection((parts.hostname, parts.port), timeout=timeout_s)
        key = base64.b64encode(os.urandom(16)).decode()
        request = (f"GET {parts.path} HTTP/1.1\r\nHost: {parts.hostname}:{parts.port}\r\nUpgrade: websocket\r\n"
                   f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n")
        self.sock.sendall(request.encode())
        response = b""
        while b"\r\n\r\n" not in response:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise CDPError("websocket handshake: connection closed")
            response += chunk
        head, self.buffer = response.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise CDPError(f"websocket handshake refused: {head[:200]!r}")

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(max(65536, n - len(self.buffer)))
            if not chunk:
                raise CDPError("websocket closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def send(self, text: str, opcode: int = 1) -> None:
        payload = text.encode()
        header = bytes([0x80 | opcode])
        n = len(payload)
        if n < 126:
            header += bytes([0x80 | n])
        elif n < 1 << 16:
            header += bytes([0x80 | 126]) + struct.pack(">H", n)
        else:
            header += bytes([0x80 | 127]) + struct.pack(">Q", n)
        mask = os.urandom(4)
        self.sock.sendall(header + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    def recv(self) -> str:
        message = b""
        while True:
            b0, b1 = self._read(2)
            opcode, n = b0 & 0x0F, b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._read(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._read(8))[0]
            mask = self._read(4) if b1 & 0x80 else None
            data = self._read(n)
            if mask:
                data = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
            if opcode == 8:
                raise CDPError("websocket closed by the browser")
            if opcode == 9:
                self.send(data.decode(errors="replace"), opcode=10)
                continue
            if opcode in (0, 1, 2):
                message += data
                if b0 & 0x80:
                    return message.decode()

    def close(self) -> None:
        self.sock.close()


class Browser:
    """Headless Chromium with one page, driven over CDP. Use as a context manager."""

    def __init__(self, exe: str, profile_dir: Path, *, timeout_s: float = 60.0) -> None:
        self.exe, self.profile_dir, self.timeout_s = exe, Path(profile_dir), timeout_s
        self.events: list[dict[str, Any]] = []
        self._next_id = 0

    def __enter__(self) -> "Browser":
        self.profile_dir.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen([self.exe, *FLAGS, f"--user-data-dir={self.profile_dir}", "about:blank"],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            port = self._wait_for_port()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=self.timeout_s)
            conn.request("GET", "/json/list")
            targets = json.loads(conn.getresponse().read())
            page = next(t for t in targets if t.get("type") == "page")
            self.ws = _WebSocket(page["webSocketDebuggerUrl"], self.timeout_s)
        except BaseException:
            self._stop()
            raise
        return self

    def _wait_for_port(self) -> int:
        marker = self.profile_dir / "DevToolsActivePort"
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise CDPError(f"chromium exited with code {self.proc.returncode}")
            if marker.exists():
                first = marker.read_text().split("\n", 1)[0].strip()
                if first.isdigit():
                    return int(first)
            time.sleep(0.05)
        raise CDPError("chromium did not open its DevTools port in time")

    def __exit__(self, *exc: object) -> None:
        try:
            self.ws.close()
        finally:
            self._stop()

    def _stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    def send(self, method: str, **params: Any) -> dict[str, Any]:
        """Run one CDP command and return its result; events seen meanwhile are kept."""
        self._next_id += 1
        my_id = self._next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            message = json.loads(self.ws.recv())
            if message.get("id") == my_id:
                if "error" in message:
                    raise CDPError(f"{method}: {message['error']}")
                return message.get("result", {})
            if "method" in message:
                self.events.append(message)

    def evaluate(self, expression: str) -> Any:
        """Evaluate JavaScript in the page and return its JSON value (exceptions raise)."""
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise CDPError(f"script failed: {result['exceptionDetails'].get('text')}: {expression[:200]}")
        return result["result"].get("value")

    def wait_for(self, expression: str, *, timeout_s: float = 20.0) -> Any:
        """Poll ``expression`` until it is truthy and return it."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            value = self.evaluate(expression)
            if value:
                return value
            time.sleep(0.05)
        raise CDPError(f"timed out waiting for: {expression}")
