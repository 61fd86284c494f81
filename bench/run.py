#!/usr/bin/env python
"""Throughput and latency of real Triton and triton-mini serving the same identity Python model.

Each server runs alone, pinned (its whole process tree) to one core; wrk, pinned to another core, POSTs the
JSON infer body of bench/repo/identity (FP32 [1,16], max_batch_size 8, one instance, no dynamic batching)
for `--duration` seconds at each concurrency. Rounds are interleaved (Triton, mini, Triton, mini, ...) so slow
drifts of a shared machine hit both; the table reports the median over rounds and the ratios mini / Triton.

    python bench/run.py                                   # both, concurrency 1 8 64, 3 rounds of 10 s
    python bench/run.py --only mini --concurrency 8 --rounds 2
    python bench/run.py --only mini --profile 20          # py-spy triton-mini under load at concurrency 8

Results (a markdown table, raw numbers, load average) go to bench/results/<date>.md; a profile to
bench/results/<date>-profile.md. Needs `wrk` and `taskset` (Debian packages wrk, util-linux); the profile
needs py-spy (pip). The oracle is $TRITON_ORACLE, else <repo>/../shared/oracle/real-triton, else
tools/real_triton.py (which installs Triton from PyPI on first use).
"""
from __future__ import annotations
import argparse, collections, datetime, json, os, platform, shutil, signal, socket, statistics, subprocess, sys, tempfile, time
import urllib.error, urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
# bench/grpc_run.py does `import run`: run as a script, that must be this module (one Server, one NAMES, one MINI_GRPC)
sys.modules.setdefault('run', sys.modules[__name__])
ORACLE = os.environ.get('TRITON_ORACLE') or str(ROOT.parent / 'shared' / 'oracle' / 'real-triton')
if 'TRITON_ORACLE' not in os.environ and not os.access(ORACLE, os.X_OK): ORACLE = str(ROOT / 'tools' / 'real_triton.py')
MODEL = 'identity'   # --model: identity (FP32 [1,16] echoed), or mlp / mlp_batched / mlp_adaptive (FP32 [1,64] in)
def body_for(model:str) -> str:
    n = 16 if model == 'identity' else 64
    return json.dumps({'inputs': [{'name': 'INPUT0', 'shape': [1, n], 'datatype': 'FP32', 'data': [float(i % 7) for i in range(n)]}]})
BODY = body_for(MODEL)
ECHO_MODELS = {'identity', 'identity_big'}   # answer their input (bench/perf_vs_wrk.py adds its `slow`)
# --workload: what wrk POSTs. small: the model's JSON body above; json256k / binary256k: a 256 KB FP32 tensor
# ([1, 65536]) to identity_big as JSON `data`, or as a binary part with the output asked for binary too.
WORKLOAD = 'small'
BIG = 65536
def big_json() -> str:
    return json.dumps({'inputs': [{'name': 'INPUT0', 'shape': [1, BIG], 'datatype': 'FP32', 'data': [float(i % 7) for i in range(BIG)]}]})
def big_binary() -> tuple:
    "(body, header length): the JSON header, then the raw little-endian FP32 bytes."
    import struct
    head = json.dumps({'inputs': [{'name': 'INPUT0', 'shape': [1, BIG], 'datatype': 'FP32', 'parameters': {'binary_data_size': 4 * BIG}}],
                       'outputs': [{'name': 'OUTPUT0', 'parameters': {'binary_data': True}}]}).encode()
    return head + struct.pack(f'<{BIG}f', *(float(i % 7) for i in range(BIG))), len(head)
NAMES = {'triton': 'real Triton 2.51', 'mini': 'triton-mini', 'exp': 'triton-mini experiment',
         'uvicorn': 'bare uvicorn (ceiling)', 'mlserver': 'MLServer'}
# --mlserver / $MLSERVER / `mlserver` on PATH: MLServer's command, serving bench/mlserver_runtime.py's runtimes
MLSERVER = os.environ.get('MLSERVER') or shutil.which('mlserver')
EXP_LAUNCHER = None
MINI_LAUNCHER = None   # --mini-launcher: a script run instead of `python -m triton_mini` (same flags)
MINI_FLAGS = []        # --mini-flags: more flags for triton-mini (and the experiment), e.g. --python-backend-mode=process
EXTRA_FLAGS = {}       # kind -> more flags for that server only (bench/grpc_run.py --exp-flags)
EXP_MODE = None        # --both-modes: `exp` is triton-mini with Python models in this mode (the one `mini` does not use)
ROOTS = {}             # kind -> the checkout whose triton_mini that server runs (default: this one)
MINI_GRPC = False      # serve gRPC from triton-mini too (bench/grpc_run.py); Server.grpc_port is the port either way

LUA = '''
wrk.method = "POST"
local f = io.open("%s", "rb")
wrk.body = f:read("*a")
f:close()
%s
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('BENCH {"requests": %%d, "duration_us": %%d, "p50_us": %%.1f, "p99_us": %%.1f, ' ..
    '"mean_us": %%.1f, "non2xx": %%d, "socket_errors": %%d}\\n', summary.requests, summary.duration,
    latency:percentile(50), latency:percentile(99), latency.mean, e.status, e.connect + e.read + e.write + e.timeout))
end
'''


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]

def http(port:int, path:str, body:bytes|None=None, timeout:float=5) -> tuple:
    req = urllib.request.Request(f'http://127.0.0.1:{port}{path}', data=body, method='POST' if body is not None else 'GET',
                                 headers={'Content-Type': 'application/json'} if body is not None else {})   # MLServer needs it
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r: return r.status, r.read()
    except urllib.error.HTTPError as e: return e.code, e.read()


# ---------------------------------------------------------------------------------------------------------
# Servers

def descendants(pid:int) -> list:
    "pid and every process below it (from /proc)."
    children = collections.defaultdict(list)
    for p in Path('/proc').iterdir():
        if not p.name.isdigit(): continue
        try: ppid = int((p / 'stat').read_text().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError): continue
        children[ppid].append(int(p.name))
    out, todo = [], [pid]
    while todo:
        q = todo.pop(); out.append(q); todo += children.get(q, [])
    return out

def pin_tree(pid:int, core) -> tuple:
    "Pin every thread of every process in the tree to `core`, a core or a list like '0,1' (inherited from taskset; this makes sure)."
    procs = threads = 0
    for p in descendants(pid):
        procs += 1
        for t in Path(f'/proc/{p}/task').glob('*'):
            try: os.sched_setaffinity(int(t.name), cpu_set(core)); threads += 1
            except OSError: pass
    return procs, threads

def cpu_set(core) -> set:
    "'0' or '0,1' (or an int) as a set of cores."
    return {int(c) for c in str(core).split(',')}

class Server:
    def __init__(self, kind:str, repo:Path, workdir:Path, core):
        self.kind, self.port = kind, free_port()
        metrics, grpc = free_port(), free_port()
        self.grpc_port = grpc
        env = dict(os.environ, PYTHONPATH=str(ROOTS.get(kind, ROOT)))
        if kind == 'uvicorn':
            argv = [sys.executable, str(HERE / 'uvicorn_bare.py'), f'--http-port={self.port}', f'--answers={workdir / "answers"}']
        elif kind == 'mlserver':
            argv, env['PYTHONPATH'] = [MLSERVER, 'start', str(mlserver_dir(workdir, self.port, grpc, metrics))], str(HERE)
        elif kind == 'triton':
            oracle = [sys.executable, ORACLE] if ORACLE.endswith('.py') else [ORACLE]
            argv = [*oracle, f'--model-repository={repo}', f'--http-port={self.port}', f'--grpc-port={grpc}',
                    f'--metrics-port={metrics}']
        else:
            script = EXP_LAUNCHER if kind == 'exp' else MINI_LAUNCHER
            launcher = ['-m', 'triton_mini'] if script is None else [script]
            argv = [sys.executable, *launcher, f'--model-repository={repo}', f'--http-port={self.port}',
                    f'--metrics-port={metrics}', *([f'--grpc-port={grpc}'] if MINI_GRPC else ['--allow-grpc=false']), *MINI_FLAGS,
                    *EXTRA_FLAGS.get(kind, ())]
        self.log = workdir / f'{kind}.log'
        # cwd outside the checkout: the oracle's Python backend would import our triton_python_backend_utils.py
        self.proc = subprocess.Popen(['taskset', '-c', str(core), *argv], cwd=workdir, env=env, start_new_session=True,
                                     stdout=open(self.log, 'w'), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 300
        while True:
            if self.proc.poll() is not None: raise RuntimeError(f'{kind} exited:\n{self.log.read_text()[-3000:]}')
            try:
                if http(self.port, f'/v2/models/{MODEL}/ready', timeout=1)[0] == 200: break
            except OSError: pass
            if time.monotonic() > deadline: self.stop(); raise RuntimeError(f'{kind} not ready:\n{self.log.read_text()[-3000:]}')
            time.sleep(0.2)
        self.pinned = pin_tree(self.proc.pid, core)
        status, body = http(self.port, f'/v2/models/{MODEL}/infer', BODY.encode())
        out = json.loads(body)['outputs'][0] if status == 200 else None
        expected = json.loads(BODY)['inputs'][0]['data'] if MODEL in ECHO_MODELS else None   # the MLP: 10 numbers
        if out is None or (out['data'] != expected if expected else len(out['data']) != 10 or
                           not all(abs(a - b) < 1e-3 for a, b in zip(out['data'], mlp_answer()))):
            self.stop(); raise RuntimeError(f'{kind} answered {status} {body[:300]!r}')

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try: self.proc.wait(40)
            except subprocess.TimeoutExpired: os.killpg(self.proc.pid, signal.SIGKILL); self.proc.wait()

    def server_pid(self) -> int:
        "The server process itself (below taskset's exec and the oracle's shell wrapper, which both exec)."
        return self.proc.pid


def mlp_answer() -> list:
    "What bench/repo/mlp answers to body_for('mlp') (the same seeded weights): every server must agree."
    import numpy as np
    rng = np.random.default_rng(0)
    h = np.array([json.loads(body_for('mlp'))['inputs'][0]['data']], dtype=np.float32)
    for i, (a, b) in enumerate(((64, 256), (256, 256), (256, 10))):
        h = h @ (rng.standard_normal((a, b)).astype(np.float32) / np.sqrt(a))
        if i < 2: h = np.maximum(h, 0)
    return h[0].tolist()

def write_answers(workdir:Path):
    "The bare uvicorn ceiling's precomputed answers to the current workload (what Triton answers, byte for byte in spirit)."
    d = workdir / 'answers'; d.mkdir(exist_ok=True)
    req = json.loads(BODY)['inputs'][0]
    data = req['data'] if MODEL in ('identity', 'identity_big') else mlp_answer()
    shape = req['shape'] if MODEL in ('identity', 'identity_big') else [1, 10]
    out = {'name': 'OUTPUT0', 'datatype': 'FP32', 'shape': shape}
    (d / 'json').write_text(json.dumps({'model_name': MODEL, 'model_version': '1', 'outputs': [dict(out, data=data)]}))
    head = json.dumps({'model_name': MODEL, 'model_version': '1',
                       'outputs': [dict(out, parameters={'binary_data_size': 4 * len(data)})]}).encode()
    import struct
    (d / 'binary').write_bytes(head + struct.pack(f'<{len(data)}f', *data))
    (d / 'binary.header_length').write_text(str(len(head)))

def mlserver_dir(workdir:Path, http_port:int, grpc_port:int, metrics_port:int) -> Path:
    "An MLServer folder serving MODEL with bench/mlserver_runtime.py: inference in the server process (one core)."
    d = workdir / f'mlserver-{http_port}'
    (d / MODEL).mkdir(parents=True)
    (d / 'settings.json').write_text(json.dumps({'http_port': http_port, 'grpc_port': grpc_port, 'metrics_port': metrics_port,
                                                 'parallel_workers': 0, 'debug': False}))
    batching = {'max_batch_size': 8, 'max_batch_time': 0.002} if MODEL in ('mlp_batched', 'mlp_adaptive') else {}
    (d / MODEL / 'model-settings.json').write_text(json.dumps({
        'name': MODEL, 'implementation': 'mlserver_runtime.' + ('MLP' if MODEL.startswith('mlp') else 'Identity'), **batching}))
    return d


# ---------------------------------------------------------------------------------------------------------
# Load

def wrk(port:int, concurrency:int, seconds:int, core:int, script:Path) -> dict:
    cmd = ['taskset', '-c', str(core), 'wrk', '-t1', f'-c{concurrency}', f'-d{seconds}s', '--timeout', '10s',
           '-s', str(script), f'http://127.0.0.1:{port}/v2/models/{MODEL}/infer']
    load = os.getloadavg()[0]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    line = next((l for l in out.splitlines() if l.startswith('BENCH ')), None)
    if line is None: raise RuntimeError(f'wrk printed no summary:\n{out}')
    r = json.loads(line[len('BENCH '):])
    r['rps'] = r['requests'] / (r['duration_us'] / 1e6)
    r['load'] = load
    return r

def run(args, work:Path, repo:Path, script:Path) -> dict:
    results = collections.defaultdict(list)   # (kind, concurrency) -> [wrk result per round]
    for rnd in range(1, args.rounds + 1):
        for kind in args.only:
            server = Server(kind, repo, work, args.server_core)
            try:
                print(f'round {rnd}/{args.rounds} {NAMES[kind]}: pinned {server.pinned[0]} processes / '
                      f'{server.pinned[1]} threads to core {args.server_core}', flush=True)
                wrk(server.port, 8, args.warmup, args.client_core, script)
                for c in args.concurrency:
                    r = wrk(server.port, c, args.duration, args.client_core, script)
                    results[kind, c].append(r)
                    print(f'  c={c:<3} {r["rps"]:9.0f} req/s  p50 {r["p50_us"] / 1000:7.2f} ms  p99 {r["p99_us"] / 1000:7.2f} ms'
                          f'  errors {r["non2xx"] + r["socket_errors"]}  load {r["load"]:.2f}', flush=True)
            finally: server.stop()
    return results


# ---------------------------------------------------------------------------------------------------------
# Report

def median(results, kind, c, key): return statistics.median(r[key] for r in results[kind, c])

def report(args, results, load_before, load_after) -> str:
    lines = [f'# Benchmark {datetime.datetime.now():%Y-%m-%d %H:%M}', '',
             (f'identity Python model, FP32 [1,16]' if MODEL == 'identity' else
              f'identity_big, FP32 [1,{BIG}] (256 KB) as ' + ('JSON' if WORKLOAD == 'json256k' else 'binary input and output') if MODEL == 'identity_big'
              else f'`{MODEL}` (numpy MLP 64-256-256-10), FP32 [1,64]')
             + f' {"" if WORKLOAD == "binary256k" else "JSON "}infer; each server pinned to core {args.server_core}, wrk (1 thread) '
             f'to core {args.client_core}; {args.rounds} interleaved round(s) of {args.duration:g} s per concurrency after a '
             f'{args.warmup:g} s warm-up; medians over rounds.', '',
             f'Machine: {os.cpu_count()} cores, {cpu_model()}; load average (1 min) {load_before:.2f} before, '
             f'{load_after:.2f} after; triton-mini at {git_rev()}'
             + (f', flags `{" ".join(MINI_FLAGS)}`' if MINI_FLAGS else '') + '.', '',
             '| concurrency | server | req/s | p50 ms | p99 ms | errors | req/s per round |', '|---|---|---|---|---|---|---|']
    for c in args.concurrency:
        for kind in args.only:
            rs = results[kind, c]
            per_round = ', '.join(format(r['rps'], ',.0f') for r in rs)
            lines.append(f'| {c} | {NAMES[kind]} | {median(results, kind, c, "rps"):,.0f} | '
                         f'{median(results, kind, c, "p50_us") / 1000:.2f} | {median(results, kind, c, "p99_us") / 1000:.2f} | '
                         f'{sum(r["non2xx"] + r["socket_errors"] for r in rs)} | {per_round} |')
    for a, b in (('mini', 'triton'), ('exp', 'mini'), ('exp', 'triton')):
        if a not in args.only or b not in args.only: continue
        lines += ['', f'| concurrency | req/s {a} / {b} | p50 {a} / {b} | p99 {a} / {b} |', '|---|---|---|---|']
        for c in args.concurrency:
            ratio = lambda key: median(results, a, c, key) / median(results, b, c, key)
            lines.append(f'| {c} | {ratio("rps"):.3g}x | {ratio("p50_us"):.3g}x | {ratio("p99_us"):.3g}x |')
    lines += ['', '<details><summary>raw wrk results</summary>', '', '```json',
              json.dumps({f'{k} c={c}': v for (k, c), v in results.items()}, indent=1), '```', '</details>']
    return '\n'.join(lines) + '\n'

def cpu_model() -> str:
    try: return next(l.split(':', 1)[1].strip() for l in open('/proc/cpuinfo') if l.startswith('model name'))
    except (OSError, StopIteration): return platform.processor() or 'unknown CPU'

def git_rev() -> str:
    try:
        rev = subprocess.run(['git', '-C', str(ROOT), 'rev-parse', '--short', 'HEAD'], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(['git', '-C', str(ROOT), 'status', '--porcelain', '--', 'triton_mini'], capture_output=True, text=True).stdout.strip()
        return rev + (' (with uncommitted changes in triton_mini/)' if dirty else '')
    except OSError: return 'unknown'

def result_path(suffix:str='', ext:str='.md') -> Path:
    "bench/results/<date><suffix>.md, numbered when that day already has one."
    day = f'{datetime.date.today():%Y-%m-%d}'
    for n in range(1, 1000):
        p = HERE / 'results' / f'{day}{"" if n == 1 else f"-{n}"}{suffix}{ext}'
        if not p.exists(): return p
    raise RuntimeError('too many results today')


# ---------------------------------------------------------------------------------------------------------
# Profile (py-spy on triton-mini under load)

def profile(args, work:Path, repo:Path, script:Path) -> str:
    "Two py-spy recordings of triton-mini under load (at --profile-concurrency): every thread, then only GIL holders."
    c = args.profile_concurrency
    pyspy = shutil.which('py-spy') or str(Path(sys.executable).with_name('py-spy'))
    server = Server('mini', repo, work, args.server_core)
    raws = {'all': work / 'profile-all.txt', 'gil': work / 'profile-gil.txt'}
    try:
        wrk(server.port, c, args.warmup, args.client_core, script)
        load = subprocess.Popen(['taskset', '-c', str(args.client_core), 'wrk', '-t1', f'-c{c}', f'-d{2 * args.profile + 4}s',
                                 '--timeout', '10s', '-s', str(script), f'http://127.0.0.1:{server.port}/v2/models/{MODEL}/infer'],
                                stdout=subprocess.PIPE, text=True)
        time.sleep(1)   # let wrk ramp up before sampling
        for kind, raw in raws.items():
            subprocess.run(['taskset', '-c', str(args.client_core), pyspy, 'record', '-p', str(server.server_pid()),
                            '-d', str(args.profile), '-r', '200', '--nonblocking', '--threads', '-f', 'raw', '-o', str(raw),
                            *(['--gil'] if kind == 'gil' else [])], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        out = load.communicate()[0]
    finally: server.stop()
    line = next((l for l in out.splitlines() if l.startswith('BENCH ')), '')
    rps = json.loads(line[6:])['requests'] / (json.loads(line[6:])['duration_us'] / 1e6) if line else float('nan')
    if not args.no_save:
        for kind, raw in raws.items(): shutil.copy(raw, result_path(f'-profile-{kind}', '.stacks.tmp'))  # git-ignored
    head = [f'# Profile of {NAMES["mini"]} under load ({datetime.datetime.now():%Y-%m-%d %H:%M})', '',
            f'`py-spy record --nonblocking --threads -r 200` for {args.profile} s, twice (all threads; then `--gil`: only the '
            f'thread holding the GIL), on the triton-mini process while wrk POSTs the {MODEL} infer body at concurrency {c} '
            f'({rps:,.0f} req/s over both recordings); server on core {args.server_core}, wrk and py-spy on core '
            f'{args.client_core}. Under uvloop the event loop itself is C: its samples show as `Runner.run` / `run` self time.', '']
    return '\n'.join(head + summarize_profile(raws['all'].read_text(), 'All non-idle samples')
                      + summarize_profile(raws['gil'].read_text(), 'Samples holding the GIL (Python CPU time)'))

def summarize_profile(text:str, title:str, top:int=25) -> list:
    "Tables of where the samples are: by thread, by file and by function (self and inclusive)."
    stacks = []
    for line in text.splitlines():
        stack, _, n = line.rpartition(' ')
        if stack and n.isdigit(): stacks.append((stack.split(";"), int(n)))
    total = sum(n for _, n in stacks) or 1
    by_thread, self_t, incl, files = (collections.Counter() for _ in range(4))
    for frames, n in stacks:
        by_thread[frames[0].split(': ', 1)[-1]] += n
        body = frames[1:] or ['(no Python frame)']
        self_t[body[-1]] += n
        for f in set(body): incl[f] += n
        files[body[-1] if body[-1].startswith('(') else body[-1].rsplit('(', 1)[-1].split(':')[0]] += n
    def table(name, counter, k):
        return [f'### {name}', '', '| % | where |', '|---|---|'] + \
               [f'| {100 * n / total:.1f} | `{short(w)}` |' for w, n in counter.most_common(k)] + ['']
    return ([f'## {title}: {total} samples', ''] + table('By thread', by_thread, 10) + table('By file (self)', files, 15)
            + table('By function (self)', self_t, top) + table('By function (inclusive)', incl, top))

def short(frame:str) -> str:
    for prefix in (str(ROOT) + '/', '/work/venv/lib/python3.11/site-packages/', '/usr/lib/python3.11/', sys.prefix + '/lib/python3.11/'):
        frame = frame.replace(prefix, '')
    return frame


# ---------------------------------------------------------------------------------------------------------
# Configuration of one workload, and the whole matrix (issue 14)

# name -> (--workload, --model): what bench/run.py measured as separate runs before --matrix; 'grpc': identity over
# gRPC, loaded by h2load with bench/grpc_run.py's functions instead of wrk (GRPC: which RPC)
MATRIX = {'identity': ('small', 'identity'), 'mlp': ('small', 'mlp'), 'mlp_batched': ('small', 'mlp_batched'),
          'mlp_adaptive': ('small', 'mlp_adaptive'), 'json256k': ('json256k', None), 'binary256k': ('binary256k', None),
          'grpc_unary': ('grpc', 'identity'), 'grpc_stream': ('grpc', 'identity')}
GRPC = {'grpc_unary': 'unary', 'grpc_stream': 'stream'}
# Servers left out of a workload: MLServer has no binary tensor extension; adaptive_queue_delay is triton-mini's
# (Triton runs mlp_batched's rule on it, and the bar compares with Triton's mlp_batched), so only triton-mini runs it;
# the gRPC workloads compare triton-mini with Triton only (the uvicorn ceiling is HTTP; MLServer's gRPC is not measured).
SKIP = {'binary256k': {'mlserver'}, 'mlp_adaptive': {'triton', 'uvicorn', 'mlserver', 'exp'},
        **{name: {'uvicorn', 'mlserver'} for name in GRPC}}

def configure(name:str):
    "Set the model, JSON body and wire body (with wrk's headers) for a workload or a bench/repo model name."
    global WORKLOAD, MODEL, BODY, WIRE_BODY, WIRE_HEADERS
    WORKLOAD, model = MATRIX.get(name, ('small', name))
    if WORKLOAD in ('small', 'grpc'): MODEL, BODY = model, body_for(model)
    else: MODEL, BODY = 'identity_big', big_json()
    WIRE_BODY, WIRE_HEADERS = BODY.encode(), 'wrk.headers["Content-Type"] = "application/json"'
    if WORKLOAD == 'binary256k':
        WIRE_BODY, n = big_binary()
        WIRE_HEADERS = f'wrk.headers["Content-Type"] = "application/octet-stream"\nwrk.headers["Inference-Header-Content-Length"] = "{n}"'

def write_load(work:Path) -> Path:
    "wrk's Lua script and body for the configured workload (and the ceiling's answers to it)."
    script = work / 'infer.lua'
    (work / 'body').write_bytes(WIRE_BODY)
    script.write_text(LUA % (work / 'body', WIRE_HEADERS))
    write_answers(work)
    return script

def python_backend_mode() -> str:
    "The mode triton-mini ran Python models in: its --python-backend-mode flag, else the command's default."
    for f in MINI_FLAGS:
        if f.startswith('--python-backend-mode='): return f.split('=', 1)[1]
    # what `triton-mini` serves with when no flag says: stub processes since issue 42 (threads before: see the JSON's date)
    return os.environ.get('TRITON_MINI_PYTHON_BACKEND_MODE') or 'process'   # SERVED_PYTHON_BACKEND_MODE (07_server)

def summary(rs:list) -> dict:
    "Medians over rounds of one (server, workload, concurrency), and each round's req/s."
    med = lambda key: statistics.median(r[key] for r in rs)
    return {'rps': med('rps'), 'p50_ms': med('p50_us') / 1000, 'p99_ms': med('p99_us') / 1000,
            'errors': sum(r['non2xx'] + r['socket_errors'] for r in rs), 'rps_rounds': [r['rps'] for r in rs]}

def matrix(args, work:Path, repo:Path, names:list):
    "Every workload of `names`, each with its servers interleaved over rounds; one JSON with medians, ratios and targets."
    global MINI_GRPC
    sys.path.insert(0, str(ROOT / 'tools'))
    import perf_report
    started, before, servers = datetime.datetime.now(), os.getloadavg()[0], list(args.only)
    workloads = {}
    for name in names:
        configure(name)
        script = write_load(work)
        args.only = [k for k in servers if k not in SKIP.get(name, ())]
        print(f'== {name} ({MODEL}, {WORKLOAD}): {", ".join(args.only)}', flush=True)
        MINI_GRPC = name in GRPC   # triton-mini serves gRPC only where it is measured: the HTTP rows stay as before
        if name in GRPC:
            import grpc_run
            results = grpc_run.workload(args, work, repo, GRPC[name])
            workloads[name] = {'model': MODEL, 'workload': WORKLOAD, 'rpc': GRPC[name], 'load': 'h2load',
                               **({'stream_messages': grpc_run.STREAM_MESSAGES} if name == 'grpc_stream' else {}),
                               'servers': list(args.only), 'results': results}
            continue
        results = run(args, work, repo, script)
        workloads[name] = {'model': MODEL, 'workload': WORKLOAD, 'servers': list(args.only),
                           'results': {k: {str(c): summary(results[k, c]) for c in args.concurrency} for k in args.only}}
    MINI_GRPC = False
    data = {'date': f'{started:%Y-%m-%d %H:%M}', 'commit': git_rev(),
            'machine': f'{os.cpu_count()} cores, {cpu_model()}', 'load_before': before, 'load_after': os.getloadavg()[0],
            'python_backend_mode': python_backend_mode(), 'mini_flags': MINI_FLAGS,
            **({'exp_mode': EXP_MODE} if EXP_MODE and 'exp' in servers else {}),
            'command': 'python bench/run.py ' + ' '.join(sys.argv[1:]),
            'settings': {'rounds': args.rounds, 'duration_s': args.duration, 'warmup_s': args.warmup,
                         'concurrency': args.concurrency, 'server_core': args.server_core, 'client_core': args.client_core},
            'servers': {k: NAMES[k] for k in servers}, 'workloads': workloads}
    data['targets'] = perf_report.evaluate(data)
    if not args.no_save:
        (out := result_path('-matrix', '.json')).parent.mkdir(exist_ok=True)
        out.write_text(json.dumps(data, indent=1) + '\n'); print(f'written to {out.relative_to(ROOT)}')
    print(perf_report.markdown(data))


# ---------------------------------------------------------------------------------------------------------

def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('--only', choices=('triton', 'mini', 'exp', 'uvicorn', 'mlserver'), action='append',
                   help='run just this server (repeatable); default triton and mini (--matrix: and uvicorn, mlserver where found)')
    p.add_argument('--concurrency', type=int, nargs='+', default=[1, 8, 64])
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--duration', type=int, default=10, help='seconds per measurement')
    p.add_argument('--warmup', type=int, default=3, help='seconds of load after each start, not measured')
    p.add_argument('--server-core', default='0', help="the core the server's whole tree is pinned to, or a list ('0,1': a laptop's freedom, the stub beside the server)")
    p.add_argument('--client-core', type=int, default=1)
    p.add_argument('--profile', type=int, default=0, metavar='SECONDS', help='then py-spy triton-mini for this long at --profile-concurrency')
    p.add_argument('--profile-concurrency', type=int, default=8, metavar='C', help="wrk's connections while profiling (default 8)")
    p.add_argument('--no-save', action='store_true', help='print only; write nothing to bench/results')
    p.add_argument('--mini-launcher', metavar='SCRIPT', help='measure an experiment: run this Python script with the flags '
                   'instead of `python -m triton_mini` (e.g. one that patches triton_mini, then calls triton_mini.cli.main)')
    p.add_argument('--exp-launcher', metavar='SCRIPT', help='add a third server, `exp`: triton-mini run by this script, '
                   'interleaved with the others and reported as ratios to triton-mini (before/after in one run)')
    p.add_argument('--model', default='identity', choices=('identity', 'mlp', 'mlp_batched', 'mlp_adaptive'),
                   help='the model of bench/repo to load (identity; a numpy MLP unbatched, dynamically batched, or with adaptive_queue_delay)')
    p.add_argument('--workload', default='small', choices=('small', 'json256k', 'binary256k'),
                   help="small: the model's own JSON body; json256k / binary256k: a 256 KB FP32 tensor to identity_big, "
                   'as JSON data or as binary input and output')
    p.add_argument('--mini-flags', default='', metavar='FLAGS', help='more flags for triton-mini and the experiment, '
                   "one string: --mini-flags='--python-backend-mode=process'")
    p.add_argument('--matrix', nargs='*', metavar='WORKLOAD', choices=MATRIX,
                   help=f'issue 14\'s whole matrix in one run (default every workload: {" ".join(MATRIX)}), every server '
                   'found (triton, mini, the bare uvicorn ceiling, MLServer; gRPC: triton and mini, loaded by h2load as in '
                   'bench/grpc_run.py); writes results/<date>-matrix.json (tools/perf_report.py turns it into README\'s table and chart)')
    p.add_argument('--mlserver', metavar='COMMAND', help='MLServer\'s `mlserver` command (default $MLSERVER, else on PATH)')
    p.add_argument('--both-modes', action='store_true', help='add `exp`: triton-mini with Python models in the other '
                   'mode (--python-backend-mode=thread beside the served default, stub processes), so the run shows both '
                   'modes beside real Triton (issue 42)')
    args = p.parse_args(argv)
    global MINI_LAUNCHER, EXP_LAUNCHER, MINI_FLAGS, MLSERVER, EXP_MODE
    if args.mlserver: MLSERVER = args.mlserver
    if args.matrix is not None: args.workload, args.model = 'small', 'identity'
    configure(args.workload if args.workload != 'small' else args.model)
    MINI_FLAGS = args.mini_flags.split()
    if args.exp_launcher:
        EXP_LAUNCHER = str(Path(args.exp_launcher).resolve())
        NAMES['exp'] = f'triton-mini via {Path(args.exp_launcher).name}'
        if args.only and 'exp' not in args.only: args.only.append('exp')
    if args.both_modes:
        if args.exp_launcher: sys.exit('--both-modes and --exp-launcher both define `exp`: choose one')
        EXP_MODE = {'process': 'thread', 'thread': 'process'}[python_backend_mode()]
        EXTRA_FLAGS['exp'] = [f'--python-backend-mode={EXP_MODE}']
        NAMES['exp'] = f'triton-mini ({EXP_MODE} mode)'
        if args.only and 'exp' not in args.only: args.only.append('exp')
    if args.mini_launcher:
        MINI_LAUNCHER = str(Path(args.mini_launcher).resolve())
        NAMES['mini'] = f'triton-mini via {Path(args.mini_launcher).name}' + (' + MINI_UVLOOP' if os.environ.get('MINI_UVLOOP') else '')
    if args.matrix is not None and not args.only:
        args.only = ['triton', 'mini'] + (['exp'] if EXP_MODE else []) + ['uvicorn'] + (['mlserver'] if MLSERVER else [])
    args.only = args.only or ['triton', 'mini'] + (['exp'] if args.exp_launcher or EXP_MODE else [])
    if 'mlserver' in args.only and not MLSERVER: sys.exit('mlserver not found (pip install mlserver; --mlserver or $MLSERVER)')
    if 'mlserver' in args.only:   # `mlserver, version 1.7.1`
        NAMES['mlserver'] = 'MLServer ' + subprocess.run([MLSERVER, '--version'], capture_output=True, text=True).stdout.split()[-1]
    grpc = args.matrix is not None and any(n in GRPC for n in args.matrix or MATRIX)
    for tool in ('wrk', 'taskset') + (('h2load',) if grpc else ()):
        if shutil.which(tool) is None:
            sys.exit(f'{tool} not found (apt-get install {dict(wrk="wrk", h2load="nghttp2-client").get(tool, "util-linux")})')
    if 'triton' in args.only and not os.access(ORACLE, os.X_OK): sys.exit(f'real Triton oracle not found at {ORACLE} (set TRITON_ORACLE)')
    with tempfile.TemporaryDirectory(prefix='triton_mini_bench_') as tmp:
        work = Path(tmp)
        repo = work / 'repo'
        shutil.copytree(HERE / 'repo', repo)
        if args.matrix is not None: return matrix(args, work, repo, args.matrix or list(MATRIX))
        script = write_load(work)
        if args.rounds > 0:
            before = os.getloadavg()[0]
            results = run(args, work, repo, script)
            text = report(args, results, before, os.getloadavg()[0])
            print('\n' + text.split('<details>')[0])
            if not args.no_save:
                (out := result_path('' if MODEL == 'identity' else f'-{WORKLOAD if WORKLOAD != "small" else MODEL}')).parent.mkdir(exist_ok=True)
                out.write_text(text); print(f'written to {out.relative_to(ROOT)}')
        if args.profile:
            text = profile(args, work, repo, script)
            print(text)
            if not args.no_save:
                (out := result_path('-profile')).parent.mkdir(exist_ok=True)
                out.write_text(text); print(f'written to {out.relative_to(ROOT)}')

if __name__ == '__main__':
    main()
