#!/usr/bin/env python3
"""Idle HTTP/1.1 keep-alive connections for bench/footprint.sh: opens N connections to
127.0.0.1:PORT, sends one `GET PATH` on each and reads its whole answer (so every connection
has served a request and is idle in keep-alive), then prints `OPEN N` and holds them until
SIGTERM or HOLD seconds; `--close` closes them at once instead. Prints `ERRORS k` and exits 1
when a connection failed or an answer was not a 200 with a Content-Length or chunked body.

Usage: idle_http.py PORT N [--path /plaintext] [--hold 300] [--close] [--parallel 256]
"""
import argparse
import asyncio
import resource
import signal
import sys


async def open_one(port, path, timeout):
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    writer.write(("GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n" % path).encode("ascii"))
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), timeout)
    lines = head.decode("latin-1").split("\r\n")
    if not lines[0].startswith("HTTP/1.1 200"):
        raise ValueError("status line " + lines[0])
    length, chunked = None, False
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip().lower()
        if name == "content-length":
            length = int(value)
        elif name == "transfer-encoding":
            chunked = value.endswith("chunked")
    if chunked:  # Jetty's: chunks until the empty one, then the (empty) trailer section
        while True:
            size = int((await asyncio.wait_for(reader.readuntil(b"\r\n"), timeout)).split(b";")[0], 16)
            await asyncio.wait_for(reader.readexactly(size + 2), timeout)
            if size == 0:
                break
    elif length is not None:
        await asyncio.wait_for(reader.readexactly(length), timeout)
    else:
        raise ValueError("neither Content-Length nor chunked")
    return writer


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("port", type=int)
    p.add_argument("n", type=int)
    p.add_argument("--path", default="/plaintext")
    p.add_argument("--hold", type=float, default=300.0)
    p.add_argument("--close", action="store_true")
    p.add_argument("--parallel", type=int, default=256)
    p.add_argument("--timeout", type=float, default=30.0)
    a = p.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < a.n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, a.n + 1024), hard))

    gate = asyncio.Semaphore(a.parallel)
    errors = []

    async def one():
        async with gate:
            try:
                return await open_one(a.port, a.path, a.timeout)
            except Exception as e:  # counted and reported; the run fails on any
                errors.append(repr(e))
                return None

    writers = [w for w in await asyncio.gather(*(one() for _ in range(a.n))) if w is not None]
    if errors:
        print("ERRORS %d (first: %s)" % (len(errors), errors[0]), flush=True)
    print("OPEN %d" % len(writers), flush=True)
    if not a.close:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        try:
            await asyncio.wait_for(stop.wait(), a.hold)
        except asyncio.TimeoutError:
            pass
    for w in writers:
        w.close()
    await asyncio.gather(*(w.wait_closed() for w in writers), return_exceptions=True)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
