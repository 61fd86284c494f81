#!/usr/bin/env python
"""Ping-pong of a 300-byte message between two processes: one socketpair used both ways (the stub's `work` channel
today), one socketpair per direction, or one pipe per direction. µs per round trip and voluntary context switches per
round trip of each side (/proc/PID/status). Run on one core, as served: `taskset -c 0 python bench/channel_pingpong.py`.

The likely reason (read from the kernel's design, not traced here): a reader of a unix stream socket frees the skb
it read, and the kernel then wakes whoever sleeps on the *sender's*
socket (`unix_write_space`); with one socket used both ways, that is the sender itself, waiting in `recv` for its
answer: a wake-up for nothing, then back to sleep."""
import os, socket, sys, time
from pathlib import Path
N = 20000
def vol(pid): 
    st = dict(l.split(':\t') for l in Path(f'/proc/{pid}/status').read_text().splitlines() if ':\t' in l)
    return int(st['voluntary_ctxt_switches'])
def run(kind):
    if kind == 'one socketpair':
        a, b = socket.socketpair(); s_send, s_recv, c_send, c_recv = a.send, a.recv, b.send, b.recv
    elif kind == 'two socketpairs':
        a1, b1 = socket.socketpair(); a2, b2 = socket.socketpair()
        s_send, c_recv, c_send, s_recv = a1.send, b1.recv, b2.send, a2.recv
    else:
        r1, w1 = os.pipe(); r2, w2 = os.pipe()
        s_send, c_recv = (lambda d: os.write(w1, d)), (lambda n: os.read(r1, n))
        c_send, s_recv = (lambda d: os.write(w2, d)), (lambda n: os.read(r2, n))
    msg = b'x' * 300
    pid = os.fork()
    if pid == 0:
        for _ in range(N + 1): c_recv(65536); c_send(msg)
        os._exit(0)
    s_send(msg); s_recv(65536)
    v0, c0, t0 = vol(os.getpid()), vol(pid), time.perf_counter()
    for _ in range(N): s_send(msg); s_recv(65536)
    t1, v1, c1 = time.perf_counter(), vol(os.getpid()), vol(pid)
    os.waitpid(pid, 0)
    print(f'{kind:16s} {(t1 - t0) / N * 1e6:6.1f} us/round trip; voluntary switches per round trip: parent {(v1 - v0) / N:.2f}, child {(c1 - c0) / N:.2f}')
for k in sys.argv[1:] or ['one socketpair', 'two socketpairs', 'pipes']: run(k)
