"""Issue 26's figures side by side: triton-mini and the real Triton 2.51 (tools/real_triton.py), one after the other
on the same models (conformance add_sub and identity_bytes), each measured alone.

1. Row 6: /v2/health/live latency (polled every 5 ms) while a 63 MiB JSON body that fails to parse late
   (`{"inputs": [1,1,...,x]}`) is read and parsed: sent plain, sent as its 64 KB gzip, and 4 plain ones in parallel
   (sent by curl: another process).
2. Row 2: RSS growth of the server process after 50 of those gzip bodies (after 3 to warm up), and its peak.
3. Row 3: a 50 MB gRPC request of 5.5 million small BYTES elements to identity_bytes (which echoes them): how long
   it takes, /v2/health/live and ServerLive latency meanwhile, the peak RSS (server and its children: Triton's
   Python stubs).

    python bench/reliability_vs_triton.py            # both servers, about 2 minutes; prints a JSON summary
    python bench/reliability_vs_triton.py --only mini
"""
import argparse, gzip, http.client, json, statistics, struct, subprocess, sys, tempfile, threading, time
from pathlib import Path

import grpc
import psutil
from tritonclient.grpc import service_pb2 as pb

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
from triton_servers import MiniProcess, RealTriton, copy_models   # noqa: E402

MiB = 2**20
BAD = b'{"inputs": [' + b'1,' * ((63 * MiB - 16) // 2) + b'x]}'     # 63 MiB, fails at its last bytes


def post(port:int, path:str, body:bytes, headers=None, timeout:float=300) -> tuple:
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        c.request('POST', path, body, headers or {}); r = c.getresponse(); return r.status, r.read()
    finally: c.close()


def curl(port:int, path:str, body_file:Path, headers=None, n:int=1) -> tuple:
    "POST a file with `n` curl processes at once (the sender is not this process: its GIL does not slow the poller)."
    args = [a for k, v in (headers or {}).items() for a in ('-H', f'{k}: {v}')]
    procs = [subprocess.Popen(['curl', '-s', '-w', '\n%{http_code}', '-H', 'Content-Type: application/json', *args,
                               '--data-binary', f'@{body_file}', f'http://127.0.0.1:{port}{path}'], stdout=subprocess.PIPE) for _ in range(n)]
    outs = [p.communicate(timeout=300)[0] for p in procs]
    body, _, status = outs[0].rpartition(b'\n')
    return int(status), body


class Sampler:
    "While a block runs: /v2/health/live and ServerLive latencies (every 5 ms) and the peak RSS of `pid` (+ children)."
    def __init__(self, http_port:int, grpc_port:int|None, pid:int):
        self.http_port, self.grpc_port, self.proc = http_port, grpc_port, psutil.Process(pid)
        self.http, self.grpc, self.peak, self.peak_all, self.stop = [], [], 0, 0, threading.Event()

    def _http(self):
        c = http.client.HTTPConnection('127.0.0.1', self.http_port, timeout=60)
        while not self.stop.wait(0.005):
            t0 = time.perf_counter()
            c.request('GET', '/v2/health/live'); r = c.getresponse(); r.read()
            self.http.append(time.perf_counter() - t0)
        c.close()

    def _grpc(self):
        with grpc.insecure_channel(f'127.0.0.1:{self.grpc_port}') as ch:
            live = ch.unary_unary('/inference.GRPCInferenceService/ServerLive', request_serializer=lambda b: b, response_deserializer=lambda b: b)
            while not self.stop.wait(0.005):
                t0 = time.perf_counter(); live(b'', timeout=60); self.grpc.append(time.perf_counter() - t0)

    def _rss(self):
        while not self.stop.wait(0.05):
            try:
                own = self.proc.memory_info().rss
                self.peak = max(self.peak, own)
                self.peak_all = max(self.peak_all, own + sum(c.memory_info().rss for c in self.proc.children(recursive=True)))
            except psutil.Error: pass

    def __enter__(self):
        self.threads = [threading.Thread(target=f, daemon=True) for f in (self._http, self._rss) + ((self._grpc,) if self.grpc_port else ())]
        for t in self.threads: t.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads: t.join(60)

    @staticmethod
    def ms(times:list) -> dict:
        if len(times) < 2: return {'n': len(times), 'max_ms': round(max(times, default=0) * 1000, 1)}
        q = statistics.quantiles(times, n=100)
        return {'n': len(times), 'p50_ms': round(q[49] * 1000, 1), 'max_ms': round(max(times) * 1000, 1)}


def measure(server, label:str) -> dict:
    out, pid = {'server': label}, server.proc.pid
    path = '/v2/models/add_sub/infer'
    gz = gzip.compress(BAD)
    files = Path(tempfile.mkdtemp())
    (files / 'bad.json').write_bytes(BAD); (files / 'bad.json.gz').write_bytes(gz)
    # 1. health while a 63 MiB body is parsed: plain, gzip, 4 plain in parallel
    for name, send in [('plain', lambda: curl(server.http_port, path, files / 'bad.json')),
                       ('gzip_64KB', lambda: curl(server.http_port, path, files / 'bad.json.gz', {'Content-Encoding': 'gzip'})),
                       ('plain_x4', lambda: curl(server.http_port, path, files / 'bad.json', n=4))]:
        with Sampler(server.http_port, None, pid) as s:
            t0 = time.perf_counter(); first = send(); took = time.perf_counter() - t0
        out[f'63MiB_json_{name}'] = {'status': first[0], 'answer': first[1][:90].decode(errors='replace'), 'seconds': round(took, 2),
                                     'health_live': Sampler.ms(s.http)}
    # 2. RSS after 50 bad gzip bodies
    for _ in range(3): post(server.http_port, path, gz, {'Content-Encoding': 'gzip'})
    proc = psutil.Process(pid)
    base = proc.memory_info().rss
    with Sampler(server.http_port, None, pid) as s:
        t0 = time.perf_counter()
        statuses = {post(server.http_port, path, gz, {'Content-Encoding': 'gzip'})[0] for _ in range(50)}
        took = time.perf_counter() - t0
    out['50_bad_gzip_json'] = {'statuses': sorted(statuses), 'seconds': round(took, 1), 'rss_before_mb': round(base / MiB),
                               'rss_after_mb': round(proc.memory_info().rss / MiB), 'rss_peak_mb': round(s.peak / MiB),
                               'growth_mb': round((proc.memory_info().rss - base) / MiB)}
    # 3. 50 MB of small BYTES elements over gRPC
    n = 5_500_000
    raw = b''.join(struct.pack('<I', i % 11) + b'abcdefghij'[:i % 11] for i in range(n))
    req = pb.ModelInferRequest(model_name='identity_bytes', inputs=[pb.ModelInferRequest.InferInputTensor(name='IN', datatype='BYTES', shape=[n])],
                               raw_input_contents=[raw]).SerializeToString()
    opts = [('grpc.max_receive_message_length', -1), ('grpc.max_send_message_length', -1)]
    base = proc.memory_info().rss
    with grpc.insecure_channel(f'127.0.0.1:{server.grpc_port}', options=opts) as ch:
        infer = ch.unary_unary('/inference.GRPCInferenceService/ModelInfer', request_serializer=lambda b: b,
                               response_deserializer=pb.ModelInferResponse.FromString)
        with Sampler(server.http_port, server.grpc_port, pid) as s:
            t0 = time.perf_counter()
            try: reply = infer(req, timeout=300); status, same = 'OK', reply.raw_output_contents[0] == raw
            except grpc.RpcError as e: status, same = f'{e.code().name}: {e.details()[:80]}', False
            took = time.perf_counter() - t0
    out['grpc_50MB_bytes'] = {'request_mb': round(len(req) / MiB, 1), 'elements': n, 'status': status, 'echoed': same,
                              'seconds': round(took, 2), 'health_live': Sampler.ms(s.http), 'grpc_server_live': Sampler.ms(s.grpc),
                              'rss_before_mb': round(base / MiB), 'rss_peak_mb': round(s.peak / MiB),
                              'rss_peak_with_children_mb': round(s.peak_all / MiB)}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--only', choices=['mini', 'triton'])
    a = ap.parse_args()
    repo = copy_models(Path(tempfile.mkdtemp()) / 'models', 'conformance/add_sub', 'conformance/identity_bytes')
    results = []
    for key, label, cls in [('mini', 'triton-mini', MiniProcess), ('triton', 'Triton 2.51', RealTriton)]:
        if a.only and a.only != key: continue
        server = cls(repo)
        try: results.append(measure(server, label))
        finally: server.stop()
        print(json.dumps(results[-1], indent=1), flush=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
