#!/usr/bin/env python
"""The server's fixed cost per call against bare uvicorn's (issue 44): triton-mini serving a tiny ONNX model ([1, 16] in,
four 16x16 layers, `count: 2`) and bench/uvicorn_bare.py answering the very bytes triton-mini answered, each loaded by
the same 8 tritonclient.http threads (binary tensors, one connection each), two rounds interleaved. Printed: the
server process's CPU per call (user + system; system alone in brackets) and calls/s.

    python bench/fixed_cost_vs_bare.py

What triton-mini costs over bare uvicorn is its own work per call (parsing, tensors, the hand-off to the instance and
back, the response); bare uvicorn's is what any server on uvicorn pays (HTTP parsing, the socket writes).
"""
import http.client, subprocess, sys, tempfile, threading, time
from pathlib import Path
HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE)); sys.path.insert(0, str(HERE.parent / 'tests'))
import backends_vs_runtime as b
b.shape_model(1, 16)
from triton_servers import MiniProcess, free_port
import tritonclient.http as httpclient, psutil
cfg, make, direct, inp_name = b.setups(['onnx'], 1)['onnx']
repo = Path(tempfile.mkdtemp()) / 'models'; (repo / 'onnx').mkdir(parents=True)
(repo / 'onnx' / 'config.pbtxt').write_text(cfg + 'instance_group [{ count: 2 kind: KIND_CPU }]\n'); make(repo / 'onnx')

def drive(port, pid, seconds=8):
    stop = time.monotonic() + seconds; count = [0]
    def client():
        c = httpclient.InferenceServerClient(f'127.0.0.1:{port}')
        inp = httpclient.InferInput('INPUT0', [1, 16], 'FP32'); inp.set_data_from_numpy(b.X, binary_data=True)
        while time.monotonic() < stop: c.infer('onnx', [inp]); count[0] += 1
    ts = [threading.Thread(target=client) for _ in range(8)]; [t.start() for t in ts]
    time.sleep(2); p = psutil.Process(pid); t0 = p.cpu_times(); n0 = count[0]; time.sleep(seconds - 3)
    t1 = p.cpu_times(); n = count[0] - n0; [t.join() for t in ts]
    return (t1.user - t0.user + t1.system - t0.system) / n * 1e6, (t1.system - t0.system) / n * 1e6, n / (seconds - 3)

s = MiniProcess(repo, metrics=False, grpc=False)
try:
    inp = httpclient.InferInput('INPUT0', [1, 16], 'FP32'); inp.set_data_from_numpy(b.X, binary_data=True)
    body, json_size = httpclient.InferenceServerClient.generate_request_body([inp])
    conn = http.client.HTTPConnection('127.0.0.1', s.http_port)
    conn.request('POST', '/v2/models/onnx/infer', body, {'Inference-Header-Content-Length': str(json_size)})
    r = conn.getresponse(); answer = r.read(); hl = r.getheader('Inference-Header-Content-Length')
    print('answer', len(answer), 'header length', hl)
    answers = Path(tempfile.mkdtemp()); (answers / 'json').write_bytes(answer)
    if hl: (answers / 'binary').write_bytes(answer); (answers / 'binary.header_length').write_text(hl)
    results = {}
    port = free_port()
    bare = subprocess.Popen([sys.executable, str(HERE / 'uvicorn_bare.py'), f'--http-port={port}', f'--answers={answers}'])
    time.sleep(3)
    for rnd in range(2):
        results.setdefault('triton-mini', []).append(drive(s.http_port, s.proc.pid))
        results.setdefault('bare uvicorn', []).append(drive(port, bare.pid))
    bare.kill()
finally: s.stop()
for k, v in results.items(): print(k, ' | '.join(f'CPU {a:.0f} µs/call (system {sy:.0f}), {n:,.0f} calls/s' for a, sy, n in v))
