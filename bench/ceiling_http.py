#!/usr/bin/env python
"""How fast could triton-mini's HTTP /infer be in pure Python? An `--exp-launcher` for bench/run.py that serves the
same repository through the smallest HTTP/1.1 server that still does triton-mini's real per-request work, so that
issue 14's targets can be judged against a measured ceiling instead of a guess.

It takes triton-mini's flags (only --model-repository and --http-port matter), loads the repository with the real
TritonServer (thread mode), and answers with an asyncio Protocol of ~40 lines on uvloop: the head split with bytes
operations (no httptools callbacks, no ASGI, no Task, no Future). What each request then does depends on
`$CEILING` (one per run, so bench/run.py can put them side by side as `exp` and `mini`):

* `echo`: answer a precomputed response body, nothing else: the protocol's own ceiling (compare with
  bench/uvicorn_bare.py, which is the same with uvicorn).
* `inline`: 08_http's `decode_infer_request`, 07_server's `validate_request`, the scheduler's `_run` (the Python
  backend's execute, statistics, delivery) on the event loop thread, `encode_infer_response`: all of the real
  per-request Python with no thread hand-off. No server can do this work faster in this architecture.
* `frontend`: the request handed to 08_http's `HTTPFrontend.fast_handler` (07a's FastPath entry: decode, submit,
  a Future per request, the response encoded by the front end), written with 07a's `response_bytes`: the front
  end's own per-request code without uvicorn's.
* `worker` (default): the same work as `inline`, but submitted with `TritonServer.submit` to the model's worker thread and written
  back from the loop (`call_soon_threadsafe`): the real hand-offs, without uvicorn. The worker is woken once per loop
  turn (`WAKE_AT_END_OF_TURN`, as the served path does since 2026-12-05).

Only what bench/run.py sends is handled (keep-alive POSTs with Content-Length, GET .../ready); anything else gets a
400 and the connection closes. This is a measurement, not a server.

    python bench/run.py --exp-launcher bench/ceiling_http.py --concurrency 1 8 64     # CEILING=worker
    CEILING=inline python bench/run.py --exp-launcher bench/ceiling_http.py ...
"""
import asyncio, os, sys, time
from pathlib import Path

MODE = os.environ.get('CEILING', 'worker')

def flag(name:str) -> str:
    return next(a.split('=', 1)[1] for a in sys.argv[1:] if a.startswith(f'--{name}='))

from triton_mini.server import TritonServer, validate_request
from triton_mini.scheduler import WAKE_AT_END_OF_TURN
from triton_mini.model_repository import ModelRepository
from triton_mini.http_server import decode_infer_request, encode_infer_response, parse_path

server = TritonServer(ModelRepository(flag('model-repository')))
server.start()
ECHO = None
from triton_mini.http_server import HTTPFrontend
from triton_mini.asgi import response_bytes
FRONTEND = HTTPFrontend(server)   # the precomputed answer of `echo`: the first real answer

def head(status:int, body:bytes, headers=()) -> bytes:
    lines = [b'HTTP/1.1 %d OK\r\ncontent-type: application/json\r\n' % status]
    lines += [b'%s: %s\r\n' % kv for kv in headers]
    return b''.join(lines) + b'content-length: %d\r\n\r\n' % len(body) + body

def answer(resp) -> bytes:
    return head(resp.status, resp.body, [kv for kv in resp.headers if kv[0] != b'content-type'])

class Ceiling(asyncio.Protocol):
    def connection_made(self, transport): self.t, self.buf = transport, b''

    def data_received(self, data):
        buf = self.buf + data
        while (end := buf.find(b'\r\n\r\n')) >= 0:
            lines = buf[:end].split(b'\r\n')
            method, path, _ = lines[0].split(b' ')
            headers = dict(l.lower().split(b': ', 1) for l in lines[1:])
            n = int(headers.get(b'content-length', b'0'))
            if len(buf) < end + 4 + n: break
            body, buf = buf[end + 4:end + 4 + n], buf[end + 4 + n:]
            self.handle(method, path.decode(), headers, body)
        self.buf = buf

    def handle(self, method, path, headers, body):
        global ECHO
        if method == b'GET': return self.t.write(head(200 if server.model_ready(path.split('/')[3]) else 400, b''))
        if MODE == 'frontend':
            return FRONTEND.fast_handler(path.encode(), headers, len(body))(body, lambda r: self.t.write(response_bytes(r)))
        route = parse_path(path)
        if MODE == 'echo' and ECHO is not None: return self.t.write(ECHO)
        req, opts = decode_infer_request(route[1], route[2], body, None, server.shared_memory)
        if MODE == 'inline':
            m = server.repository.get(req.model_name, req.model_version)
            validate_request(m, req)
            req.model_version, req.arrival_ns = m.version, time.monotonic_ns()
            got = []
            req.response_callback = lambda r, resp, final: got.append(resp)
            m.scheduler._run(m.scheduler.instances[0], [req])
            out = ECHO = answer(encode_infer_response(req, got[0], opts, m.batching))
            return self.t.write(out)
        loop = asyncio.get_running_loop()
        def done(r, resp, final):
            if final: loop.call_soon_threadsafe(self.reply, req, resp, opts, m)
        req.response_callback = done
        token = WAKE_AT_END_OF_TURN.set(loop)   # as the served path's submit_future: wake the worker once per loop turn
        try: m = server.submit(req)
        finally: WAKE_AT_END_OF_TURN.reset(token)

    def reply(self, req, resp, opts, m):
        global ECHO
        self.t.write(ECHO := answer(encode_infer_response(req, resp, opts, m.batching)))

async def main():
    import socket
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(Ceiling, '127.0.0.1', int(flag('http-port')), backlog=2048)
    for s in srv.sockets: s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    await srv.serve_forever()

if __name__ == '__main__':
    import gc, uvloop
    gc.freeze()
    uvloop.install()
    asyncio.run(main())
