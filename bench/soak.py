"""Soak test: triton-mini (a subprocess) under steady mixed traffic for a while, its RSS, open file descriptors and
thread count sampled over time (issue 18). Flat lines are the point: a leak shows as a slope.

The traffic, from `--clients` threads: JSON and binary inference, generate, generate_stream (a decoupled model
streaming 3 responses), health checks, metrics scrapes, a share of hostile requests from tests/http_fuzz.py,
and connection churn (every client reconnects now and then). A request fails when a valid request is not
answered 200 with the right outputs, or a hostile one breaks a promise of tests/http_fuzz.py `check`.

    python bench/soak.py                       # 10 minutes
    python bench/soak.py --duration 60 --interval 2

Writes bench/results/<date>-soak.json (the samples and the totals) and bench/results/<date>-soak.png.
"""
import argparse, datetime, http.client, json, random, struct, sys, tempfile, threading, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
import http_fuzz                                   # noqa: E402
from triton_servers import MiniProcess, copy_models   # noqa: E402

OK = json.dumps({'inputs': [{'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]},
                            {'name': 'INPUT1', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 1, 1, 1]}]}).encode()
BIN_HEAD = json.dumps({'inputs': [{'name': 'X', 'datatype': 'INT32', 'shape': [1, 3], 'parameters': {'binary_data_size': 12}}],
                       'outputs': [{'name': 'Y', 'parameters': {'binary_data': True}}]}).encode()
BIN = BIN_HEAD + struct.pack('<3i', 7, 8, 9)


class Counters:
    def __init__(self): self.lock, self.requests, self.failures, self.examples = threading.Lock(), 0, 0, []
    def add(self, ok:bool, what:str=''):
        with self.lock:
            self.requests += 1
            if not ok:
                self.failures += 1
                if len(self.examples) < 20: self.examples.append(what)


def valid_request(conn, r:random.Random) -> tuple:
    "One valid request on a kept-alive connection; (ok, what)."
    k = r.random()
    if k < 0.40:
        conn.request('POST', '/v2/models/add_sub/infer', OK)
        resp = conn.getresponse(); body = resp.read()
        return resp.status == 200 and b'[2.0,3.0,4.0,5.0]' in body, f'infer {resp.status} {body[:100]!r}'
    if k < 0.60:
        conn.request('POST', '/v2/models/identity_int32/infer', BIN, {'Inference-Header-Content-Length': str(len(BIN_HEAD))})
        resp = conn.getresponse(); body = resp.read()
        return resp.status == 200 and body.endswith(struct.pack('<3i', 7, 8, 9)), f'binary {resp.status} {body[:100]!r}'
    if k < 0.72:
        conn.request('POST', '/v2/models/gen/generate', json.dumps({'text_input': 'soak', 'max_tokens': 2}))
        resp = conn.getresponse(); body = resp.read()
        return resp.status == 200 and b'echo: soak' in body, f'generate {resp.status} {body[:100]!r}'
    if k < 0.82:
        conn.request('POST', '/v2/models/decoupled/generate_stream', json.dumps({'text_input': 'soak', 'N': 3}))
        resp = conn.getresponse(); body = resp.read()
        return resp.status == 200 and body.count(b'data: ') == 3, f'stream {resp.status} {body[:100]!r}'
    conn.request('GET', '/v2/health/ready')
    resp = conn.getresponse(); resp.read()
    return resp.status == 200, f'ready {resp.status}'


def client(port:int, seed:int, stop:threading.Event, counts:Counters, hostile_share:float):
    r, conn, fuzz = random.Random(seed), None, http_fuzz.cases(seed, 10**9)
    while not stop.is_set():
        if r.random() < hostile_share:          # a fresh connection each: they often end badly on purpose
            case = next(fuzz)
            try:
                status, body = http_fuzz.send(port, case)
                http_fuzz.check(case, status, body); counts.add(True)
            except (AssertionError, TimeoutError, OSError) as e: counts.add(False, f'hostile: {e} {case.wire()[:120]!r}')
            continue
        try:
            if conn is None or r.random() < 0.01:    # connection churn
                if conn is not None: conn.close()
                conn = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
            counts.add(*valid_request(conn, r))
        except (OSError, http.client.HTTPException) as e:
            counts.add(False, f'valid: {e!r}')
            conn = None


def scraper(port:int, stop:threading.Event, counts:Counters):
    while not stop.wait(1.0):
        try:
            c = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
            c.request('GET', '/metrics'); resp = c.getresponse(); body = resp.read(); c.close()
            counts.add(resp.status == 200 and b'nv_inference_request_success' in body, f'metrics {resp.status}')
        except OSError as e: counts.add(False, f'metrics: {e!r}')


def plot(samples:list, path:Path, title:str):
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    t = [s['t'] / 60 for s in samples]
    fig, axes = plt.subplots(4, 1, figsize=(9, 9), sharex=True)
    series = [('rss_mb', 'RSS (MB)'), ('fds', 'open file descriptors'), ('threads', 'threads'), ('rps', 'requests/s')]
    for ax, (key, label) in zip(axes, series):
        ax.plot(t, [s[key] for s in samples], lw=1.5)
        ax.set_ylabel(label); ax.grid(alpha=0.3); ax.set_ylim(bottom=0)
    axes[-1].set_xlabel('minutes')
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--duration', type=float, default=600, help='seconds (default 600)')
    ap.add_argument('--interval', type=float, default=5, help='seconds between samples')
    ap.add_argument('--clients', type=int, default=4)
    ap.add_argument('--hostile', type=float, default=0.05, help='share of hostile requests')
    ap.add_argument('--no-save', action='store_true')
    a = ap.parse_args()
    repo = copy_models(Path(tempfile.mkdtemp()) / 'models', *(f'conformance/{m}' for m in ('add_sub', 'identity_int32', 'gen', 'decoupled', 'identity_bytes')))
    s = MiniProcess(repo, '--http-header-timeout-secs=10', '--http-body-timeout-secs=10', grpc=False)
    stop, counts, samples = threading.Event(), Counters(), []
    threads = [threading.Thread(target=client, args=(s.http_port, i, stop, counts, a.hostile), daemon=True) for i in range(a.clients)]
    threads.append(threading.Thread(target=scraper, args=(s.metrics_port, stop, counts), daemon=True))
    start = time.monotonic()
    for t in threads: t.start()
    last_n, last_t = 0, start
    try:
        while (now := time.monotonic()) - start < a.duration:
            time.sleep(min(a.interval, max(0.0, a.duration - (now - start))))
            now, n = time.monotonic(), counts.requests
            samples.append({'t': round(now - start, 1), 'rss_mb': round(s.rss() / 2**20, 1), 'fds': s.fds(), 'threads': s.threads(),
                            'requests': n, 'failures': counts.failures, 'rps': round((n - last_n) / (now - last_t), 1)})
            last_n, last_t = n, now
            print(json.dumps(samples[-1]), flush=True)
    finally:
        stop.set()
        for t in threads: t.join(60)
        code = s.stop()
    summary = {'duration_s': a.duration, 'clients': a.clients, 'hostile_share': a.hostile, 'requests': counts.requests,
               'failures': counts.failures, 'failure_examples': counts.examples, 'exit_code': code,
               'start': samples[0] if samples else None, 'end': samples[-1] if samples else None,
               'log_lines': len(s.lines), 'samples': samples}
    print(json.dumps({k: v for k, v in summary.items() if k != 'samples'}, indent=2))
    if not a.no_save and samples:
        (HERE / 'results').mkdir(exist_ok=True)
        stem = HERE / 'results' / f'{datetime.date.today().isoformat()}-soak'
        stem.with_suffix('.json').write_text(json.dumps(summary, indent=1))
        plot(samples, stem.with_suffix('.png'), f'triton-mini soak: {counts.requests:,} requests, {counts.failures} failures, '
                                                 f'{a.clients} clients, {a.duration / 60:g} min')
        print(f'wrote {stem}.json and .png')
    return 0 if counts.failures == 0 and code == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
