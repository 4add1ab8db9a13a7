"""A cap on request bodies, before any route reads one.

uvicorn sets no body limit, and FastAPI reads a JSON body whole before the route (and its token
check) runs, so without this a 10 GB "path submission" would be read into memory. Every route but
the upload (which streams to disk under its own cap) gets at most ``cap`` bytes: a declared
``Content-Length`` over it is refused at once, and a chunked body is counted as it arrives and
refused when it passes the cap, with 413 either way.
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyCap:
    def __init__(self, app: ASGIApp, exempt: str, cap: int) -> None:
        self.app, self.exempt, self.cap = app, exempt, cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] == self.exempt:
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length", b"")
        if declared.isdigit() and int(declared) > self.cap:
            await _too_large(send, self.cap)
            return
        body: list[bytes] = []
        size = 0
        while True:  # buffer the (small) body, counting
            msg = await receive()
            if msg["type"] != "http.request":
                break
            size += len(msg.get("body", b""))
            if size > self.cap:
                await _too_large(send, self.cap)
                return
            body.append(msg.get("body", b""))
            if not msg.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": b"".join(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)


async def _too_large(send: Send, cap: int) -> None:
    payload: dict[str, Any] = {
        "type": "http.response.start",
        "status": 413,
        "headers": [(b"content-type", b"application/json")],
    }
    await send(payload)
    await send({"type": "http.response.body", "body": b'{"detail":"request body over the %d byte limit"}' % cap})
