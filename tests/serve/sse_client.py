"""A minimal asyncio HTTP/1.1 client for OpenAI-style servers: JSON POSTs and server-sent
event streams, standard library only (for the load test and the serving benchmark, where one
process holds hundreds of streams and times every event).

    async with Post(host, port, "/v1/completions", {"prompt": "hi", "stream": True}) as response:
        async for event in response.events():   # each "data:" payload, JSON-decoded
            ...                                  # "[DONE]" comes as the string "[DONE]"

Each request uses its own connection ("Connection: close"); leaving the `async with` early
closes it, which is how a client cancels a stream.
"""

import asyncio
import json

_LIMIT = 4 << 20  # longest line or chunk the reader buffers


class Post:
    def __init__(self, host, port, path, payload, headers=None):
        self.host, self.port, self.path = host, port, path
        self.body = json.dumps(payload).encode()
        self.extra_headers = headers or {}
        self.status = None
        self.headers = {}  # lowercased names
        self._reader = self._writer = None

    async def __aenter__(self):
        self._reader, self._writer = await asyncio.open_connection(self.host, self.port, limit=_LIMIT)
        lines = [f"POST {self.path} HTTP/1.1", f"Host: {self.host}:{self.port}", "Content-Type: application/json",
                 f"Content-Length: {len(self.body)}", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in self.extra_headers.items()]
        self._writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + self.body)
        await self._writer.drain()
        self.status = int((await self._reader.readline()).split()[1])
        while True:
            line = await self._reader.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            key, _, value = line.decode("latin-1").partition(":")
            self.headers[key.strip().lower()] = value.strip()
        return self

    async def __aexit__(self, *exc):
        self._writer.close()
        try:
            await self._writer.wait_closed()
        except OSError:
            pass

    async def pieces(self):
        """The body as it arrives (chunked transfer decoded)."""
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await self._reader.readline()).split(b";")[0], 16)
                if size == 0:
                    return
                yield await self._reader.readexactly(size)
                await self._reader.readexactly(2)
        elif "content-length" in self.headers:
            yield await self._reader.readexactly(int(self.headers["content-length"]))
        else:
            yield await self._reader.read()

    async def json(self):
        return json.loads(b"".join([piece async for piece in self.pieces()]))

    async def events(self):
        """The payload of each "data:" line, JSON-decoded ("[DONE]" as is); comments are skipped.
        A body that is not an event stream (an error) comes as one JSON-decoded value."""
        if not self.headers.get("content-type", "").startswith("text/event-stream"):
            yield await self.json()
            return
        buffer = b""
        async for piece in self.pieces():
            buffer = (buffer + piece).replace(b"\r\n", b"\n")
            while b"\n\n" in buffer:
                event, buffer = buffer.split(b"\n\n", 1)
                for line in event.split(b"\n"):
                    if line.startswith(b"data:"):
                        data = line[len(b"data:"):].strip()
                        yield "[DONE]" if data == b"[DONE]" else json.loads(data)


async def post_json(host, port, path, payload, headers=None):
    """(status, JSON body) of a non-streamed POST."""
    async with Post(host, port, path, payload, headers) as response:
        return response.status, await response.json()
