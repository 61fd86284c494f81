#!/usr/bin/env python
"""Issue 44's measure: each CPU backend served by `triton-mini` against calling its runtime directly in a loop (the floor
of any server), on one model per backend that takes a millisecond or more, at c=1 and c=8.

For each backend whose runtime is installed (onnxruntime; torch, openvino, treelite with their extras): the model is
made here (no weights committed), the runtime is called directly from `c` threads for `--seconds` (on as many copies of
the model as the server has instances, shared round-robin by the threads: each instance loads its own copy, and two copies
of the MLP's weights do not fit the cache as one does, which costs the direct loop 25-35% of its CPU per call on this
machine with torch; before 2026-12-07 the floor had one copy per thread for onnx and openvino and one in all for
pytorch and fil), then the same
inputs go to `triton-mini` through tritonclient.http (binary tensors, one connection per thread; or tritonclient.grpc,
one channel per thread, with `--protocols grpc`) for as long. The
report: calls/s both ways and the server's share (1 - served/direct); the CPU each call cost both ways (this process,
plus the server's process when served: the client's work is in it) and the server's share of that (1 - direct/served);
and the server's process alone, without the client: its CPU per call against the runtime's own (server/direct - 1),
the cost the server adds. On 2 cores the client's CPU comes out of the runtime's share too, so the calls/s include
what tritonclient costs; the last column does not.

    python bench/backends_vs_runtime.py                 # every backend found, c = 1 8, 5 s each
    python bench/backends_vs_runtime.py --backends fil onnx --seconds 10
    python bench/backends_vs_runtime.py --threads 1 --instances 2     # one thread per call both ways, two instances
    python bench/backends_vs_runtime.py --protocols http grpc         # served through tritonclient.grpc too
    python bench/backends_vs_runtime.py --rows 1 --width 2048         # the MLPs compute-bound: 8 KB each way, not 128 KB
"""
import argparse, sys, tempfile, threading, time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
from triton_servers import MiniProcess   # noqa: E402

def shape_model(rows:int, width:int):
    "The MLP's request (`rows` x `width` FP32) and its four `width` x `width` layers (module globals, read by the setups)."
    global ROWS, WIDTH, X, WEIGHTS
    ROWS, WIDTH = rows, width
    X = np.random.default_rng(0).random((ROWS, WIDTH), dtype=np.float32)
    WEIGHTS = [np.random.default_rng(i).standard_normal((WIDTH, WIDTH)).astype(np.float32) / WIDTH ** 0.5 for i in range(4)]

shape_model(64, 512)   # 128 KB each way, a few ms: the bench's first model; `--rows 1 --width 2048`: 8 KB, compute-bound


def onnx_model(folder:Path):
    "Four chained MatMul + Relu layers, [64, 512] in and out: a few ms on one core."
    from onnx import helper, numpy_helper
    from triton_mini.onnx_backend import make_onnx_model, save_onnx
    nodes, last = [], 'INPUT0'
    for i in range(4):
        nodes += [helper.make_node('MatMul', [last, f'W{i}'], [f'M{i}']), helper.make_node('Relu', [f'M{i}'], [f'R{i}'])]
        last = f'R{i}'
    nodes.append(helper.make_node('Identity', [last], ['OUTPUT0']))
    model = make_onnx_model(nodes, [('INPUT0', np.float32, ('batch', WIDTH))], [('OUTPUT0', np.float32, ('batch', WIDTH))],
                            [numpy_helper.from_array(w, f'W{i}') for i, w in enumerate(WEIGHTS)])
    return save_onnx(model, folder / '1' / 'model.onnx')


def setups(names, threads:int=0) -> dict:
    """name -> (config text, make(folder), direct, input name[, rows]). `direct()` loads one copy of the runtime's model
    and returns `for_thread()`, which gives one calling thread its callable running one request's rows on that copy.
    `threads` > 0: each runtime call uses that many threads, directly and served (the runtime's own parameter)."""
    out = {}
    def param(key): return f'parameters [{{ key: "{key}" value: {{ string_value: "{threads}" }} }}]\n' if threads else ''
    io = 'input [{ name: "%s" data_type: TYPE_FP32 dims: [ %d ] }]\noutput [{ name: "%s" data_type: TYPE_FP32 dims: [ %d ] }]\n'
    if 'onnx' in names:
        def direct():
            import onnxruntime as ort
            so = ort.SessionOptions()
            if threads: so.intra_op_num_threads = threads
            s = ort.InferenceSession(str(onnx_path), so, providers=['CPUExecutionProvider'])
            return lambda: lambda: s.run(['OUTPUT0'], {'INPUT0': X})   # Run is thread-safe: threads share the session
        onnx_path = Path(tempfile.mkdtemp()) / 'm' / '1' / 'model.onnx'
        onnx_model(onnx_path.parent.parent)
        out['onnx'] = ('backend: "onnxruntime"\nmax_batch_size: 1024\n' + io % ('INPUT0', WIDTH, 'OUTPUT0', WIDTH) + param('intra_op_thread_count'),
                       lambda f: onnx_model(f), direct, 'INPUT0')
    if 'openvino' in names:
        try:
            import openvino   # noqa: F401
            def direct_ov():
                import openvino as ov
                c = ov.Core().compile_model(str(ov_path), 'CPU', {'INFERENCE_NUM_THREADS': threads} if threads else {})
                def for_thread():
                    req = c.create_infer_request()   # an infer request serves one thread at a time
                    return lambda: req.infer({0: X})
                return for_thread
            ov_path = Path(tempfile.mkdtemp()) / 'm' / '1' / 'model.onnx'
            onnx_model(ov_path.parent.parent)
            out['openvino'] = ('backend: "openvino"\ndefault_model_filename: "model.onnx"\nmax_batch_size: 1024\n' + io % ('INPUT0', WIDTH, 'OUTPUT0', WIDTH)
                               + param('INFERENCE_NUM_THREADS'), lambda f: onnx_model(f), direct_ov, 'INPUT0')
        except ImportError: print('openvino: not installed, skipped')
    if 'pytorch' in names:
        try:
            import torch
            net = torch.nn.Sequential(*[m for w in WEIGHTS for m in (torch.nn.Linear(WIDTH, WIDTH, bias=False), torch.nn.ReLU())]).eval()
            scripted = torch.jit.script(net)
            def save_pt(f):
                (f / '1').mkdir(parents=True, exist_ok=True); scripted.save(str(f / '1' / 'model.pt'))
            pt_path = Path(tempfile.mkdtemp()) / 'model.pt'
            scripted.save(str(pt_path))
            def direct_pt():
                if threads: torch.set_num_threads(threads)     # process-wide, as INTRA_OP_THREAD_COUNT is in the server
                module, x = torch.jit.load(str(pt_path), map_location='cpu').eval(), torch.from_numpy(X)   # a copy, as each instance loads
                def call():
                    with torch.inference_mode(): return module(x).numpy()
                return lambda: call
            out['pytorch'] = ('backend: "pytorch"\nmax_batch_size: 1024\n' + io % ('INPUT__0', WIDTH, 'OUTPUT__0', WIDTH) + param('INTRA_OP_THREAD_COUNT'),
                              save_pt, direct_pt, 'INPUT__0')
        except ImportError: print('pytorch: torch not installed, skipped')
    if 'fil' in names:
        try:
            import treelite, treelite.gtil, xgboost as xgb
            rows = np.random.default_rng(1).random((2000, 16), dtype=np.float32)
            booster = xgb.train({'objective': 'binary:logistic', 'max_depth': 8}, xgb.DMatrix(rows, label=rows[:, 0] > 0.5), 300)
            fx = rows[:256]
            def save_fil(f):
                (f / '1').mkdir(parents=True, exist_ok=True); booster.save_model(f / '1' / 'xgboost.json')
            def direct_fil():
                path = Path(tempfile.mkdtemp()) / 'x.json'; booster.save_model(path)
                forest = treelite.frontend.load_xgboost_model(str(path), format_choice='json')
                return lambda: lambda: treelite.gtil.predict(forest, fx, nthread=threads or -1)
            cfg = ('backend: "fil"\nmax_batch_size: 4096\n' + io % ('input__0', 16, 'output__0', 1)
                   + 'parameters [{ key: "model_type" value: { string_value: "xgboost_json" } },'
                     ' { key: "output_class" value: { string_value: "false" } }'
                   + (f', {{ key: "cpu_nthread" value: {{ string_value: "{threads}" }} }}' if threads else '') + ']\n')
            out['fil'] = (cfg, save_fil, direct_fil, 'input__0', fx)
        except ImportError: print('fil: treelite or xgboost not installed, skipped')
    return out


def cpu_seconds(pids, own:bool=True) -> float:
    "User + system CPU seconds used so far by the processes `pids` (with their children), and this one unless `own` is False."
    import psutil
    procs = [psutil.Process()] * own + [q for pid in pids for p in [psutil.Process(pid)] for q in [p, *p.children(recursive=True)]]
    return sum(t.user + t.system + t.children_user + t.children_system for t in (p.cpu_times() for p in procs))


def rate(fn, c:int, seconds:float, pids=()) -> tuple:
    """Calls per second of `fn(thread index)` from `c` threads for `seconds`, the CPU milliseconds each call cost
    this process and `pids` together, and `pids` alone (the server without its client; None without `pids`): on a
    machine shared with other work the calls/s follow the share of the cores the scheduler gives (per thread: 8 busy
    threads get more than 2), the CPU per call much less so."""
    stop, counts = threading.Event(), [0] * c
    def loop(i):
        call = fn(i)
        while not stop.is_set(): call(); counts[i] += 1
    threads = [threading.Thread(target=loop, args=(i,)) for i in range(c)]
    cpu, server = cpu_seconds(pids), cpu_seconds(pids, own=False)
    for t in threads: t.start()
    time.sleep(seconds); stop.set()
    for t in threads: t.join()
    cpu, server, calls = cpu_seconds(pids) - cpu, cpu_seconds(pids, own=False) - server, max(1, sum(counts))
    return calls / seconds, 1e3 * cpu / calls, (1e3 * server / calls if pids else None)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--backends', nargs='+', default=['onnx', 'pytorch', 'openvino', 'fil'])
    ap.add_argument('--concurrency', nargs='+', type=int, default=[1, 8])
    ap.add_argument('--seconds', type=float, default=5)
    ap.add_argument('--instances', nargs='+', type=int, default=[1], help='instance_group counts to serve with, one run each')
    ap.add_argument('--dynamic-batching', action='store_true', help="serve with dynamic_batching { } (Triton's default delay 0)")
    ap.add_argument('--threads', type=int, default=0, help="threads per runtime call, directly and served (0: the runtime's default)")
    ap.add_argument('--protocols', nargs='+', default=['http'], choices=('http', 'grpc'), help='how the served calls travel')
    ap.add_argument('--rows', type=int, default=64, help='rows per request of the MLPs (onnx, pytorch, openvino)')
    ap.add_argument('--width', type=int, default=512, help="the MLPs' width: --rows 1 --width 2048 moves 8 KB for about as much compute")
    a = ap.parse_args()
    shape_model(a.rows, a.width)
    import tritonclient.http as httpclient, tritonclient.grpc as grpcclient
    rows = ['| backend | served as | c | direct calls/s | served calls/s | server share | direct CPU ms/call | served CPU ms/call (server + client) | '
            'server share of CPU | the server\'s own CPU ms/call | its cost over direct |',
            '|---|---|---|---|---|---|---|---|---|---|---|']
    batching = 'dynamic_batching { }\n' if a.dynamic_batching else ''
    for name, (cfg, make, direct, input_name, *data) in setups(a.backends, a.threads).items():
        data = data[0] if data else X
        for count in a.instances:
            repo = Path(tempfile.mkdtemp()) / 'models'
            (repo / name).mkdir(parents=True)
            (repo / name / 'config.pbtxt').write_text(cfg + batching + f'instance_group [{{ count: {count} kind: KIND_CPU }}]\n')
            make(repo / name)
            copies = [direct() for _ in range(count)]   # the floor holds as many copies of the model as the server
            s = MiniProcess(repo, metrics=False, grpc='grpc' in a.protocols)
            label = (f'{count} instance{"s" if count > 1 else ""}' + (', dynamic batching' if batching else '')
                     + (f', {a.threads} thread{"s" if a.threads > 1 else ""} per call' if a.threads else ''))
            try:
                for proto in a.protocols:
                    def client(i, proto=proto):
                        if proto == 'grpc':
                            c = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}')
                            inp = grpcclient.InferInput(input_name, list(data.shape), 'FP32'); inp.set_data_from_numpy(data)
                        else:
                            c = httpclient.InferenceServerClient(f'127.0.0.1:{s.http_port}')
                            inp = httpclient.InferInput(input_name, list(data.shape), 'FP32'); inp.set_data_from_numpy(data, binary_data=True)
                        return lambda: c.infer(name, [inp])
                    client(0)()   # warm up, and check it answers
                    for c in a.concurrency:
                        (d, dcpu, _), (v, vcpu, scpu) = rate(lambda i: copies[i % count](), c, a.seconds), rate(client, c, a.seconds, [s.proc.pid])
                        rows.append(f'| {name} | {label}, {proto.upper() if proto == "http" else "gRPC"} | {c} | {d:,.0f} | {v:,.0f} | '
                                    f'{1 - v / d:.0%} | {dcpu:.2f} | {vcpu:.2f} | {1 - dcpu / vcpu:.0%} | {scpu:.2f} | {scpu / dcpu - 1:+.0%} |')
                        print(rows[-1], flush=True)
            finally: s.stop()
    print(f'MLPs (onnx, pytorch, openvino): [{ROWS}, {WIDTH}] FP32 per request ({ROWS * WIDTH * 4 / 1024:.0f} KB each way), four {WIDTH}x{WIDTH} layers')
    print('\n'.join(rows))


if __name__ == '__main__':
    main()
