#!/usr/bin/env python
"""Frame parsing cost: the h2 transport's hand parser (nbs/08f_grpc_h2.ipynb, `data_received`'s loop) against
hyperframe's (`Frame.parse_frame_header` + `parse_body`, the frame layer of the `h2` package), on the frames a
unary ModelInfer sends (HEADERS of an indexed block, DATA of a 64-byte message), 5,000 calls, best of 5 runs.

    python bench/h2_frame_parse.py            # prints microseconds per frame for each, and the ratio

Issue 40 asked for a maintained frame layer where it does not cost the speed the transport exists for.
"""
import time

import hpack

from triton_mini.grpc_h2 import frame, HEADERS, DATA, END_HEADERS, END_STREAM

BLOCK = hpack.Encoder().encode([(':path', '/inference.GRPCInferenceService/ModelInfer'), ('content-type', 'application/grpc')])
CALLS = 5000
BUF = (frame(HEADERS, END_HEADERS, 1, BLOCK) + frame(DATA, END_STREAM, 1, b'\x00\x00\x00\x00\x40' + bytes(64))) * CALLS

def hand(buf):
    pos, n, count = 0, len(buf), 0
    while n - pos >= 9:
        length = int.from_bytes(buf[pos:pos + 3], 'big')
        kind, flags, sid = buf[pos + 3], buf[pos + 4], int.from_bytes(buf[pos + 5:pos + 9], 'big') & 0x7fffffff
        payload = buf[pos + 9:pos + 9 + length]
        pos += 9 + length; count += 1
    return count

def hyperframe(buf):
    from hyperframe.frame import Frame
    pos, n, count, view = 0, len(buf), 0, memoryview(buf)
    while n - pos >= 9:
        f, length = Frame.parse_frame_header(view[pos:pos + 9])
        f.parse_body(view[pos + 9:pos + 9 + length])
        pos += 9 + length; count += 1
    return count

if __name__ == '__main__':
    best = {}
    for fn in (hand, hyperframe):
        times = []
        for _ in range(5):
            t = time.perf_counter(); frames = fn(BUF); times.append(time.perf_counter() - t)
        best[fn.__name__] = min(times) / frames * 1e6
        print(f'{fn.__name__:10s} {best[fn.__name__]:6.2f} us/frame')
    print(f'hyperframe / hand: {best["hyperframe"] / best["hand"]:.1f}x')
