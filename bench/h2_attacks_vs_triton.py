#!/usr/bin/env python
"""Issue 40's gRPC attacks, side by side: the served triton-mini (its default h2 transport) and the real Triton 2.51
(tools/real_triton.py), each attacked alone on the same model (conformance add_sub) while a second client polls
HTTP /v2/health/live and gRPC ServerLive every 20 ms. For each attack: the worst poll latency (s), the server's RSS
growth at its peak (MiB, the server process and its children), and how the attacking connection ended.

    python bench/h2_attacks_vs_triton.py              # both servers (a few minutes); prints a Markdown table
    python bench/h2_attacks_vs_triton.py --only mini

The attacks are tests/test_grpc_h2_attacks.py's (which asserts on triton-mini alone, in CI).
"""
import argparse, struct, sys, tempfile, threading, time
from pathlib import Path

import psutil

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
import tritonclient.grpc as grpcclient   # noqa: E402
from triton_servers import MiniProcess, RealTriton, copy_models, request   # noqa: E402
from test_grpc_h2_attacks import Raw, gzip_zeros, head, send_message, INFER, MB   # noqa: E402
from triton_mini.grpc_h2 import (frame, HEADERS, CONTINUATION, SETTINGS, RST_STREAM, DATA, PING, GOAWAY,   # noqa: E402
                                 END_HEADERS, END_STREAM)


def rss_tree(pid) -> int:
    p = psutil.Process(pid)
    total = p.memory_info().rss
    for c in p.children(recursive=True):
        try: total += c.memory_info().rss
        except psutil.Error: pass
    return total


def ending(c:Raw, timeout=30) -> str:
    got = c.frames(lambda got: any(f[0] == GOAWAY for f in got), timeout)
    goaways = [f for f in got if f[0] == GOAWAY]
    if goaways: return f'GOAWAY {struct.unpack(">I", goaways[-1][3][4:8])[0]}'
    headers = [f for f in got if f[0] == HEADERS]
    return 'closed' if c.closed else ('answered' if headers else 'no answer')


def flood(c:Raw, data:bytes):
    for i in range(0, len(data), MB):
        if not c.send(data[i:i + MB]): break


def attacks():
    block = head()
    yield 'H1 CONTINUATION flood (24 MiB)', lambda c: (c.send(frame(HEADERS, 0, 1, block)),
                                                      flood(c, frame(CONTINUATION, 0, 1, bytes(16384)) * (24 * 64)))
    yield 'H2 gzip bomb (1 MB -> 1 GiB)', lambda c: send_message(c, 1, gzip_zeros(1024))
    yield 'H3 3,000 streams + 50 SETTINGS frames', lambda c: (
        c.send(b''.join(frame(HEADERS, END_HEADERS, sid, block) for sid in range(1, 6001, 2))),
        c.send(frame(SETTINGS, 0, 0, struct.pack('>HI', 4, 1 << 20) * 2730) * 50))
    yield 'M3 500,000 SETTINGS frames', lambda c: flood(c, frame(SETTINGS, 0, 0) * 500_000)
    yield 'rapid reset (100,000 streams)', lambda c: flood(c, b''.join(
        frame(HEADERS, END_HEADERS | END_STREAM, sid, block) + frame(RST_STREAM, 0, sid, struct.pack('>I', 8)) for sid in range(1, 200_001, 2)))
    yield 'PING flood (100,000)', lambda c: flood(c, frame(PING, 0, 0, b'12345678') * 100_000)


def measure(server, attack) -> dict:
    worst, done, peak = [0.0], threading.Event(), [0]
    base = rss_tree(server.proc.pid)
    client = grpcclient.InferenceServerClient(f'127.0.0.1:{server.grpc_port}')
    def poll():
        while not done.is_set():
            t = time.perf_counter()
            try:
                request(server.http_port, 'GET', '/v2/health/live', timeout=60); client.is_server_live(client_timeout=60)
            except Exception: pass
            worst[0] = max(worst[0], time.perf_counter() - t); time.sleep(0.02)
    def memory():
        while not done.is_set():
            try: peak[0] = max(peak[0], rss_tree(server.proc.pid))
            except psutil.Error: pass
            time.sleep(0.01)
    threads = [threading.Thread(target=poll), threading.Thread(target=memory)]
    for t in threads: t.start()
    c = Raw(server.grpc_port)
    t0 = time.perf_counter()
    try: attack(c); end = ending(c)
    except OSError as e: end = type(e).__name__
    took = time.perf_counter() - t0
    c.close(); time.sleep(0.5); done.set()
    for t in threads: t.join()
    client.close()
    return {'worst_s': round(worst[0], 3), 'rss_mib': round((peak[0] - base) / MB), 'ending': end, 'took_s': round(took, 2)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--only', choices=('mini', 'triton'))
    args = ap.parse_args()
    repo = copy_models(Path(tempfile.mkdtemp()) / 'models', 'conformance/add_sub')
    results = {}
    for label, make in (('mini', lambda: MiniProcess(repo)), ('triton', lambda: RealTriton(repo))):
        if args.only and args.only != label: continue
        server = make()
        try: results[label] = {name: measure(server, attack) for name, attack in attacks()}
        finally: server.stop()
    names = [n for n, _ in attacks()]
    print('| attack | ' + ' | '.join(f'{l}: worst poll s / RSS MiB / ending' for l in results) + ' |')
    print('|---|' + '---|' * len(results))
    for n in names:
        print(f'| {n} | ' + ' | '.join(f"{r[n]['worst_s']} / {r[n]['rss_mib']} / {r[n]['ending']}" for r in results.values()) + ' |')


if __name__ == '__main__':
    main()
