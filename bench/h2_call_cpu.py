#!/usr/bin/env python
"""CPU per unary call in the h2 transport alone (nbs/08f_grpc_h2.ipynb): an H2Protocol on a fake transport is fed
20,000 unary calls (HEADERS + DATA of a 64-byte message) to an echo handler, on one event loop; process time per call,
best of 5. Run it for two checkouts, alternating, to compare a change to the frame loop without sockets or a client:

    python bench/h2_call_cpu.py CHECKOUT      # prints microseconds of CPU per call for that checkout's grpc_h2
"""
import sys, time, asyncio
sys.path.insert(0, sys.argv[1])
import hpack
from triton_mini import grpc_h2 as h
print(h.__file__, file=sys.stderr)
class T:
    def __init__(self): self.n = 0
    def write(self, b): self.n += len(b)
    def is_closing(self): return False
    def close(self): pass
    def abort(self): pass
    def can_write_eof(self): return True
    def write_eof(self): pass
async def echo(req, ctx): return req
async def main(n):
    p = h.H2Protocol({'/s/m': h.Method(echo, bytes, bytes)})
    t = T(); p.connection_made(t)
    import struct
    p.data_received(h.PREFACE + h.frame(h.SETTINGS, 0, 0) + h.frame(h.SETTINGS, h.ACK, 0) + h.frame(h.WINDOW_UPDATE, 0, 0, struct.pack('>I', 2**31 - 1 - 65535)))
    enc = hpack.Encoder()
    head = [(':method', 'POST'), (':scheme', 'http'), (':path', '/s/m'), (':authority', 'x'), ('content-type', 'application/grpc'), ('te', 'trailers')]
    msg = b'\x00' + (64).to_bytes(4, 'big') + bytes(64)
    calls = [h.frame(h.HEADERS, h.END_HEADERS, 2 * i + 1, enc.encode(head)) + h.frame(h.DATA, h.END_STREAM, 2 * i + 1, msg) for i in range(n)]
    t0 = time.process_time()
    for c in calls:
        p.data_received(c)
        await asyncio.sleep(0); await asyncio.sleep(0)
    dt = time.process_time() - t0
    assert not p.streams, len(p.streams)
    return dt / n * 1e6
best = min(asyncio.run(main(20000)) for _ in range(5))
print(f'{best:.2f}')
