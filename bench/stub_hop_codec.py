"""The stub hop's encoding alone, on two checkouts side by side: what `send_message` / `recv_message` cost per
message for float tensors of 1 KB / 256 KB / 16 MB and a BYTES tensor of a million short elements.

    python bench/stub_hop_codec.py --base /work/main            # this tree ("new") against the checkout at --base ("base")
    python bench/stub_hop_codec.py --base /work/main --rounds 5

For each payload and each tree, in a fresh interpreter (PYTHONPATH = that tree), alternating base/new per round:
- encode: `Channel.pickle` (the pickle and its out-of-band frames), best of N, µs;
- decode: `pickle.loads` of that pickle with those frames (what `recv_message` does after the socket), µs;
- hop: `send_message` from a thread + `recv_message` through a socket pair, best of N, µs;
- GIL: the longest a 1 ms ticker thread waited during encode+decode (what the server's event loop would wait), ms.
Medians over the rounds; the ratio is base / new (> 1: the new tree is faster). Figures from a loaded machine are
noisy: only the ratios of one run mean anything.
"""
import argparse, json, os, statistics, subprocess, sys, threading, time
from pathlib import Path

PAYLOADS = ['fp32 1 KB', 'fp32 256 KB', 'fp32 16 MB', 'BYTES 1e6']


def payload(name):
    import numpy as np
    if name == 'BYTES 1e6': return np.array([b'abcdefghij'[:i % 11] for i in range(1_000_000)], dtype=object)
    n = {'fp32 1 KB': 256, 'fp32 256 KB': 65_536, 'fp32 16 MB': 4 << 20}[name]
    return np.arange(n, dtype=np.float32)


def measure(name, reps):
    "One tree, one payload (run in the child): {'encode', 'decode', 'hop' (µs), 'gil' (ms)}."
    import pickle
    from triton_mini.stub_process import channel_pair, send_message, recv_message
    x = payload(name)
    msg = ('execute', 1, [{'inputs': {'IN': x}}])
    a, b = channel_pair()
    enc, dec, hop, gaps = [], [], [], []
    for _ in range(reps):
        worst, stop = [0.0], threading.Event()
        def tick():
            t = time.perf_counter()
            while not stop.is_set():
                time.sleep(0.001); now = time.perf_counter(); worst[0] = max(worst[0], now - t); t = now
        ticker = threading.Thread(target=tick); ticker.start(); time.sleep(0.005)
        t0 = time.perf_counter(); data, raws = a.pickle(msg)
        t1 = time.perf_counter(); got = pickle.loads(data, buffers=[bytearray(r) for r in raws])
        t2 = time.perf_counter(); stop.set(); ticker.join()
        # decode includes the copy into fresh bytearrays, as recv_message receives each frame into one
        enc.append(t1 - t0); dec.append(t2 - t1); gaps.append(worst[0])
        t = threading.Thread(target=send_message, args=(a, msg))
        t0 = time.perf_counter(); t.start(); got = recv_message(b); hop.append(time.perf_counter() - t0); t.join()
    assert len(got[2][0]['inputs']['IN']) == len(x)
    a.close(); b.close()
    return {'encode': min(enc) * 1e6, 'decode': min(dec) * 1e6, 'hop': min(hop) * 1e6, 'gil': statistics.median(gaps) * 1e3}


def child(tree, name, reps):
    env = dict(os.environ, PYTHONPATH=tree)
    out = subprocess.run([sys.executable, __file__, '--child', name, '--reps', str(reps)], env=env,
                         capture_output=True, text=True, check=True, cwd=tree)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--base', help='the other checkout (e.g. /work/main)', required='--child' not in sys.argv)
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--reps', type=int, default=0, help='messages per measurement (default: by size)')
    p.add_argument('--child', help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.child:
        print(json.dumps(measure(a.child, a.reps))); return
    new = str(Path(__file__).resolve().parents[1])
    trees = {'base': str(Path(a.base).resolve()), 'new': new}
    res = {(t, n): [] for t in trees for n in PAYLOADS}
    for r in range(a.rounds):
        for n in PAYLOADS:
            reps = a.reps or (5 if n in ('fp32 16 MB', 'BYTES 1e6') else 200)
            for t in (('base', 'new') if r % 2 == 0 else ('new', 'base')):
                res[t, n].append(child(trees[t], n, reps))
    print(f'base = {trees["base"]}, new = {trees["new"]}; {a.rounds} rounds, load average {os.getloadavg()[0]:.2f}\n')
    print('| payload | figure | base | new | base / new |\n|---|---|---|---|---|')
    for n in PAYLOADS:
        for k, unit in (('encode', 'µs'), ('decode', 'µs'), ('hop', 'µs'), ('gil', 'ms')):
            b, w = (statistics.median(m[k] for m in res[t, n]) for t in ('base', 'new'))
            print(f'| {n} | {k} ({unit}) | {b:,.1f} | {w:,.1f} | {b / w:.2f}x |')


if __name__ == '__main__': main()
