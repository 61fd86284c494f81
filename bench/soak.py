"""Soak test: triton-mini (a subprocess) under steady mixed traffic for a while, its RSS, open file descriptors and
thread count sampled over time (issue 18). Flat lines are the point: a leak shows as a slope.

The traffic, from `--clients` HTTP threads: JSON and binary inference, sequences of 3 on a sequence model (seq_string),
generate, generate_stream (a decoupled model streaming 3 responses), health checks, metrics scrapes, a share of
hostile requests (tests/http_fuzz.py's cases and, half of them, issue 26's heavy shapes), and connection churn
(every client reconnects now and then). From `--grpc-clients` gRPC threads: ModelInfer, sequences of 3, streams
of a decoupled model, ServerReady, and a share of hostile calls (tests/test_grpc_fuzz.py's random cases and, half
of them, issue 26's heavy shapes: many BYTES elements, bad and over-long correlation ids, huge parameters, deep
load configs (refused here: model control mode none), streams cancelled with sequence STARTs queued). Meanwhile /v2/health/live and ServerLive are polled
every 100 ms: their latency under the load is reported (p50, p99, max).

A good request fails when it is not answered 200/OK with the right outputs; a hostile one fails when it breaks a
promise of tests/http_fuzz.py `check` or tests/test_grpc_fuzz.py `problems`. Both are counted apart.

    python bench/soak.py                       # 10 minutes
    python bench/soak.py --duration 60 --interval 2

Writes bench/results/<date>-soak.json (the samples and the totals) and bench/results/<date>-soak.png.
"""
import argparse, datetime, http.client, json, random, statistics, struct, sys, tempfile, threading, time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
import http_fuzz                                   # noqa: E402
import test_grpc_fuzz as grpc_fuzz                 # noqa: E402
from triton_servers import MiniProcess, copy_models   # noqa: E402
import grpc                                        # noqa: E402
from tritonclient.grpc import service_pb2 as pb    # noqa: E402

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
    if k < 0.66:                                   # a sequence of 3 on seq_string (a sum kept by the model): 1, 2, 3
        sid, sums = f'soak-http-{id(conn)}-{r.randrange(8)}', []   # ids reused (the model keeps one sum per id), never at once
        for i in range(3):
            body = json.dumps({'parameters': {'sequence_id': sid, 'sequence_start': i == 0, 'sequence_end': i == 2},
                               'inputs': [{'name': 'IN', 'datatype': 'INT32', 'shape': [1, 1], 'data': [1]}]})
            conn.request('POST', '/v2/models/seq_string/infer', body)
            resp = conn.getresponse(); doc = resp.read()
            if resp.status != 200: return False, f'sequence {resp.status} {doc[:100]!r}'
            sums += [o['data'] for o in json.loads(doc)['outputs'] if o['name'] == 'SUM'][0]
        return sums == [1, 2, 3], f'sequence sums {sums}'
    if k < 0.74:
        conn.request('POST', '/v2/models/gen/generate', json.dumps({'text_input': 'soak', 'max_tokens': 2}))
        resp = conn.getresponse(); body = resp.read()
        return resp.status == 200 and b'echo: soak' in body, f'generate {resp.status} {body[:100]!r}'
    if k < 0.84:
        conn.request('POST', '/v2/models/decoupled/generate_stream', json.dumps({'text_input': 'soak', 'N': 3}))
        resp = conn.getresponse(); body = resp.read()
        return resp.status == 200 and body.count(b'data: ') == 3, f'stream {resp.status} {body[:100]!r}'
    conn.request('GET', '/v2/health/ready')
    resp = conn.getresponse(); resp.read()
    return resp.status == 200, f'ready {resp.status}'


def client(port:int, seed:int, stop:threading.Event, counts:Counters, hostile_share:float, bad:Counters):
    r, conn, fuzz, heavy = random.Random(seed), None, http_fuzz.cases(seed, 10**9), http_fuzz.heavy_cases(seed, 10**9)
    while not stop.is_set():
        if r.random() < hostile_share:          # a fresh connection each: they often end badly on purpose
            case = next(heavy if r.random() < 0.5 else fuzz)
            try:
                status, body = http_fuzz.send(port, case)
                http_fuzz.check(case, status, body); bad.add(True)
            except (AssertionError, TimeoutError, OSError) as e: bad.add(False, f'hostile: {e} {case.wire()[:120]!r}')
            continue
        fresh = conn is None or r.random() < 0.01    # connection churn
        try:
            if fresh:
                if conn is not None: conn.close()
                conn = http.client.HTTPConnection('127.0.0.1', port, timeout=30)
            state = r.getstate()
            try: result = valid_request(conn, r)
            except (BrokenPipeError, ConnectionResetError, http.client.RemoteDisconnected):
                if fresh: raise
                # a kept-alive connection the server had closed (idle past its timeout while this thread was starved
                # of CPU): retried once on a new one, as HTTP clients do; a fresh connection failing still counts
                conn.close(); conn = http.client.HTTPConnection('127.0.0.1', port, timeout=30); r.setstate(state)
                result = valid_request(conn, r)
            counts.add(*result)
        except (OSError, http.client.HTTPException) as e:
            counts.add(False, f'valid: {e!r}')
            conn = None


def grpc_valid(channel, r:random.Random) -> tuple:
    "One valid gRPC call; (ok, what)."
    k, ident = r.random(), lambda b: b
    infer = channel.unary_unary('/inference.GRPCInferenceService/ModelInfer', request_serializer=ident,
                                response_deserializer=pb.ModelInferResponse.FromString)
    if k < 0.4:
        out = infer(grpc_fuzz._add_sub().SerializeToString(), timeout=30)
        got = struct.unpack('<4f', out.raw_output_contents[0])
        return got == (2, 4, 6, 8), f'grpc infer {got}'
    if k < 0.65:                                   # a sequence of 3 on seq_string
        sid, sums = f'soak-grpc-{id(channel)}-{r.randrange(8)}', []
        for i in range(3):
            out = infer(grpc_fuzz._seq_request('seq_string', 'string_param', sid, start=i == 0, end=i == 2).SerializeToString(), timeout=30)
            sums.append(struct.unpack('<i', out.raw_output_contents[[o.name for o in out.outputs].index('SUM')])[0])
        return sums == [1, 2, 3], f'grpc sequence sums {sums}'
    if k < 0.85:                                   # a decoupled stream: 3 responses, then the final flag
        req = pb.ModelInferRequest(model_name='decoupled', id='soak')
        req.inputs.add(name='text_input', datatype='BYTES', shape=[1], contents=pb.InferTensorContents(bytes_contents=[b'soak']))
        req.inputs.add(name='N', datatype='INT32', shape=[1], contents=pb.InferTensorContents(int_contents=[3]))
        stream = channel.stream_stream('/inference.GRPCInferenceService/ModelStreamInfer', request_serializer=ident,
                                       response_deserializer=pb.ModelStreamInferResponse.FromString)
        msgs = list(stream(iter([req.SerializeToString()]), timeout=30))
        return len(msgs) == 3 and not any(m.error_message for m in msgs), f'grpc stream {[m.error_message for m in msgs]}'
    ready = channel.unary_unary('/inference.GRPCInferenceService/ServerReady', request_serializer=ident,
                                response_deserializer=pb.ServerReadyResponse.FromString)
    return ready(b'', timeout=30).ready, 'grpc ready'


def grpc_client(port:int, seed:int, stop:threading.Event, counts:Counters, hostile_share:float, bad:Counters):
    r = random.Random(seed)
    opts = [('grpc.max_receive_message_length', -1), ('grpc.max_send_message_length', -1)]
    with grpc.insecure_channel(f'127.0.0.1:{port}', options=opts) as channel:
        while not stop.is_set():
            if r.random() < hostile_share:
                method, data = grpc_fuzz.heavy_case(r) if r.random() < 0.5 else grpc_fuzz.random_case(r)
                found = grpc_fuzz.problems(grpc_fuzz.call(channel, method, data, timeout=60))
                bad.add(not found, f'hostile grpc {method}: {found[:1]}')
                continue
            try: counts.add(*grpc_valid(channel, r))
            except grpc.RpcError as e: counts.add(False, f'grpc valid: {e.code().name} {e.details()}')


class HealthPoller:
    "GET /v2/health/live and gRPC ServerLive every 100 ms; their latencies in seconds (a failure counts as 30 s)."
    def __init__(self, http_port:int, grpc_port:int, stop:threading.Event):
        self.http_port, self.stop, self.http = http_port, stop, []
        self.live = grpc_fuzz.LivePoller(grpc_port, every=0.1, stop=stop)
        self.grpc = self.live.times

    def poll_http(self):
        conn = None
        while not self.stop.wait(0.1):
            t0 = time.monotonic()
            try:
                if conn is None: conn = http.client.HTTPConnection('127.0.0.1', self.http_port, timeout=30)
                conn.request('GET', '/v2/health/live'); resp = conn.getresponse(); resp.read()
                self.http.append(time.monotonic() - t0 if resp.status == 200 else 30.0)
            except (OSError, http.client.HTTPException): self.http.append(30.0); conn = None


    @staticmethod
    def figures(times:list) -> dict:
        if not times: return {}
        q = statistics.quantiles(times, n=100) if len(times) > 1 else times * 99
        return {'n': len(times), 'p50_ms': round(q[49] * 1000, 1), 'p99_ms': round(q[98] * 1000, 1), 'max_ms': round(max(times) * 1000, 1)}


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
    ap.add_argument('--clients', type=int, default=4, help='HTTP client threads')
    ap.add_argument('--grpc-clients', type=int, default=2, help='gRPC client threads')
    ap.add_argument('--hostile', type=float, default=0.05, help='share of hostile requests')
    ap.add_argument('--no-save', action='store_true')
    ap.add_argument('--summary', type=Path, help='also write the summary (no samples) to this file')
    ap.add_argument('--mini-flag', action='append', default=[], help='a triton-mini flag, e.g. --mini-flag=--python-backend-mode=process')
    a = ap.parse_args()
    repo = copy_models(Path(tempfile.mkdtemp()) / 'models', *(f'conformance/{m}' for m in ('add_sub', 'identity_int32', 'gen', 'decoupled', 'identity_bytes')),
                       *(f'sequence/{m}' for m in grpc_fuzz.SEQ_MODELS))
    # a client thread starved of CPU for a second (CI on 2 busy cores) would lose its sequence to the default 1 s idle
    # timeout between two steps; 3 s leaves room for that, while sequences hostile clients abandon still free their slot
    # soon (at 60 s they held every slot and valid sequences timed out waiting)
    cfg = repo / 'seq_string' / 'config.pbtxt'
    cfg.write_text(cfg.read_text().replace('sequence_batching {', 'sequence_batching {\n  max_sequence_idle_microseconds: 3000000', 1))
    # model control mode none: hostile loads are refused (explicit mode would let http_fuzz's loads replace add_sub;
    # deep and huge load configs are exercised by tests/test_grpc_fuzz.py's heavy cases instead)
    s = MiniProcess(repo, '--http-header-timeout-secs=10', '--http-body-timeout-secs=10', *a.mini_flag)
    tree_rss = lambda: sum(p.memory_info().rss for p in [s.ps, *s.ps.children(recursive=True)])   # stubs included
    stop, counts, bad, samples, peak = threading.Event(), Counters(), Counters(), [], [0]
    health = HealthPoller(s.http_port, s.grpc_port, stop)
    threads = [threading.Thread(target=client, args=(s.http_port, i, stop, counts, a.hostile, bad), daemon=True) for i in range(a.clients)]
    threads += [threading.Thread(target=grpc_client, args=(s.grpc_port, 1000 + i, stop, counts, a.hostile, bad), daemon=True)
                for i in range(a.grpc_clients)]
    threads.append(threading.Thread(target=scraper, args=(s.metrics_port, stop, counts), daemon=True))
    threads += [threading.Thread(target=health.poll_http, daemon=True), threading.Thread(target=health.live._poll, daemon=True)]
    def rss_peak():
        while not stop.wait(0.25):
            try: peak[0] = max(peak[0], tree_rss())
            except Exception: pass                 # the process is gone: the sampler below notices
    threads.append(threading.Thread(target=rss_peak, daemon=True))
    start, rss_start = time.monotonic(), tree_rss()
    for t in threads: t.start()
    last_n, last_t = 0, start
    try:
        while (now := time.monotonic()) - start < a.duration:
            time.sleep(min(a.interval, max(0.0, a.duration - (now - start))))
            now, n = time.monotonic(), counts.requests + bad.requests
            samples.append({'t': round(now - start, 1), 'rss_mb': round(tree_rss() / 2**20, 1), 'processes': 1 + len(s.ps.children(recursive=True)), 'fds': s.fds(), 'threads': s.threads(),
                            'requests': n, 'failures': counts.failures, 'hostile_failures': bad.failures,
                            'rps': round((n - last_n) / (now - last_t), 1)})
            last_n, last_t = n, now
            print(json.dumps(samples[-1]), flush=True)
    finally:
        stop.set()
        for t in threads: t.join(60)
        code = s.stop()
    mb = lambda b: round(b / 2**20, 1)
    summary = {'mini_flags': a.mini_flag, 'duration_s': a.duration, 'clients': a.clients, 'grpc_clients': a.grpc_clients, 'hostile_share': a.hostile,
               'good_requests': counts.requests, 'good_failures': counts.failures, 'failure_examples': counts.examples,
               'hostile_requests': bad.requests, 'hostile_failures': bad.failures, 'hostile_failure_examples': bad.examples,
               'exit_code': code, 'rss_mb': {'at_start': mb(rss_start), 'first_sample': samples[0]['rss_mb'] if samples else None,
                                             'end': samples[-1]['rss_mb'] if samples else None, 'peak': mb(peak[0])},
               'health_live_http': HealthPoller.figures(health.http), 'health_live_grpc': HealthPoller.figures(health.grpc),
               'start': samples[0] if samples else None, 'end': samples[-1] if samples else None,
               'log_lines': len(s.lines), 'samples': samples}
    print(json.dumps({k: v for k, v in summary.items() if k != 'samples'}, indent=2))
    if a.summary: a.summary.write_text(json.dumps({k: v for k, v in summary.items() if k != 'samples'}, indent=1))
    if not a.no_save and samples:
        (HERE / 'results').mkdir(exist_ok=True)
        mode = next((f.split('=', 1)[1] for f in a.mini_flag if f.startswith('--python-backend-mode=')), None)
        stem = HERE / 'results' / (f'{datetime.date.today().isoformat()}-soak' + (f'-{mode}' if mode else ''))
        stem.with_suffix('.json').write_text(json.dumps(summary, indent=1))
        plot(samples, stem.with_suffix('.png'), f'triton-mini soak: {counts.requests:,} good and {bad.requests:,} hostile requests, '
                                                 f'{counts.failures + bad.failures} failures, {a.clients}+{a.grpc_clients} clients, {a.duration / 60:g} min'
                                                 + (f', {mode} mode' if mode else ''))
        print(f'wrote {stem}.json and .png')
    return 0 if counts.failures == 0 and bad.failures == 0 and code == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
