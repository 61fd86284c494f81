#!/usr/bin/env python
"""Time to first token and tokens/s through the OpenAI API: triton-mini's OpenAI front end (--openai-port, over the
bundled qwen_gguf_stream model.py) against llama-cpp-python's own `llama_cpp.server`, same GGUF, same prompt, greedy,
one stream alone and two at once, rounds interleaved; and the same model.py on real Triton 2.51 (Python backend, its
`generate_stream` endpoint: Triton has no OpenAI API over the Python backend) against triton-mini's `generate_stream`.
(Issue 15.)

    python bench/openai_llm.py                   # ~4 min; writes bench/results/<date>-openai-llm.md
    python bench/openai_llm.py --rounds 1 --no-save --no-triton
    python bench/openai_llm.py --rounds 0 --interleaved 30   # only the interleaved time to first token

The GGUF is write_tiny_gguf's random-weight model made big enough that a token takes milliseconds (8 layers, 512
wide): the figures compare serving stacks, not models. Configurations, each a separate server process:
- triton-mini, 1 instance x 2 llama.cpp threads, and 2 instances x 1 thread (process mode: each instance its own stub);
- llama_cpp.server with n_threads 2 and with n_threads 1 (it serves one model object: concurrent streams take turns);
- real Triton 2.51 (tools/real_triton.py) and triton-mini over `generate_stream` (server-sent events of the KServe
  generate extension), 1 x 2 and 2 x 1: llama-cpp-python is installed into the oracle's environment from pip's cache
  (the same wheel) on first use.
Time to first token is the median over `--ttft-requests` one-stream requests (one request is a few ms wide and noisy).
Needs `pip install 'llama-cpp-python[server]' openai` (the server extra: fastapi, sse-starlette, starlette-context, pydantic-settings).
"""
import argparse, datetime, os, shutil, socket, statistics, subprocess, sys, tempfile, threading, time, urllib.request
from pathlib import Path

import json, http.client
import openai

ROOT = Path(__file__).resolve().parents[1]
PROMPT, MAX_TOKENS = 'Once upon a time', 96


def free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def wait_ready(port, proc, timeout=120, path='/v1/models'):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if proc.poll() is not None: raise RuntimeError(f'server exited with {proc.returncode}')
        try:
            with urllib.request.urlopen(f'http://127.0.0.1:{port}{path}', timeout=2) as r:
                if r.status == 200: return
        except OSError: time.sleep(0.3)
    raise TimeoutError('server did not become ready')


def make_repo(root:Path, gguf:Path, count:int, threads:int) -> Path:
    repo = root / f'repo_{count}x{threads}'
    if repo.exists(): return repo
    src = ROOT / 'model_repository' / 'qwen_gguf_stream'
    (repo / 'qwen_gguf_stream' / '1').mkdir(parents=True)
    shutil.copy(src / '1' / 'model.py', repo / 'qwen_gguf_stream' / '1' / 'model.py')
    (repo / 'qwen_gguf_stream' / '1' / 'model.gguf').symlink_to(gguf)
    cfg = (src / 'config.pbtxt').read_text()
    cfg = cfg.replace('instance_group [ { count: 1  kind: KIND_CPU } ]', f'instance_group [ {{ count: {count}  kind: KIND_CPU }} ]')
    cfg = cfg.replace('parameters { key: "n_threads" value: { string_value: "1" } }', f'parameters {{ key: "n_threads" value: {{ string_value: "{threads}" }} }}')
    assert f'count: {count}' in cfg and f'string_value: "{threads}"' in cfg
    (repo / 'qwen_gguf_stream' / 'config.pbtxt').write_text(cfg)
    return repo


def triton_env():
    "The oracle's environment with llama-cpp-python in it (the wheel pip built for this venv, from pip's cache)."
    sys.path.insert(0, str(ROOT / 'tools')); import real_triton
    real_triton.install()
    py = str(real_triton.venv_python())
    if subprocess.run([py, '-c', 'import llama_cpp'], capture_output=True).returncode:
        from importlib.metadata import version
        subprocess.run([py, '-m', 'pip', 'install', '-q', '--disable-pip-version-check', f"llama-cpp-python=={version('llama_cpp_python')}"], check=True)
    return {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}   # our pb_utils shim must not shadow Triton's


def start(kind, root, gguf, count, threads, api='openai', mode='process'):
    port = free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    if kind == 'triton':
        cmd = [sys.executable, str(ROOT / 'tools' / 'real_triton.py'), f'--model-repository={make_repo(root, gguf, count, threads)}',
               f'--http-port={port}', f'--grpc-port={free_port()}', f'--metrics-port={free_port()}', '--log-info=false']
        proc = subprocess.Popen(cmd, env=triton_env(), cwd=root, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_ready(port, proc, path='/v2/health/ready')
        return proc, port, 'qwen_gguf_stream'
    if kind == 'mini':
        http = free_port()
        cmd = [sys.executable, '-m', 'triton_mini', '--model-repository', str(make_repo(root, gguf, count, threads)),
               f'--python-backend-mode={mode}', '--allow-grpc=false', '--allow-metrics=false', f'--http-port={http}',
               f'--openai-port={port}', '--log-info=false']
        model = 'qwen_gguf_stream'
        if api == 'generate':
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_ready(port, proc)
            return proc, http, model
        if api == 'both':   # one server, both APIs: (proc, OpenAI port, HTTP port, model)
            proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            wait_ready(port, proc)
            return proc, port, http, model
    else:
        cmd = [sys.executable, '-m', 'llama_cpp.server', '--model', str(gguf), '--n_threads', str(threads), '--host', '127.0.0.1',
               '--port', str(port), '--n_ctx', '512', '--verbose', 'false']
        model = str(gguf)
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait_ready(port, proc)
    return proc, port, model


def one_stream(client, model):
    t0, first, tokens = time.perf_counter(), None, 0
    for c in client.completions.create(model=model, prompt=PROMPT, max_tokens=MAX_TOKENS, temperature=0, stream=True):
        if c.choices and c.choices[0].text:
            tokens += 1
            if first is None: first = time.perf_counter() - t0
    return first, tokens, time.perf_counter() - t0


def generate_stream(port, model):
    "One streamed generation over KServe's generate extension (SSE), the same greedy request: (TTFT, tokens, seconds)."
    body = json.dumps({'prompt': PROMPT, 'max_tokens': MAX_TOKENS, 'temperature': 0.0})
    t0, first, tokens = time.perf_counter(), None, 0
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=300)
    conn.request('POST', f'/v2/models/{model}/generate_stream', body, {'Content-Type': 'application/json'})
    r = conn.getresponse()
    assert r.status == 200, r.read()
    for line in r:
        if line.startswith(b'data:') and json.loads(line[5:]).get('generated_text'):
            tokens += 1
            if first is None: first = time.perf_counter() - t0
    conn.close()
    return first, tokens, time.perf_counter() - t0


def measure(port, model, streams, api='openai', ttft_requests=1):
    if api == 'openai':
        client = openai.OpenAI(base_url=f'http://127.0.0.1:{port}/v1', api_key='x', max_retries=0, timeout=300)
        run = lambda: one_stream(client, model)
    else: run = lambda: generate_stream(port, model)
    warm = [threading.Thread(target=run) for _ in range(2)]   # warm every instance (up to 2)
    for t in warm: t.start()
    for t in warm: t.join()
    out, threads = [], [threading.Thread(target=lambda: out.append(run())) for _ in range(streams)]
    t0 = time.perf_counter()
    for t in threads: t.start()
    for t in threads: t.join()
    wall = time.perf_counter() - t0
    ttft = statistics.mean(o[0] for o in out)
    if streams == 1 and ttft_requests > 1: ttft = statistics.median([ttft] + [run()[0] for _ in range(ttft_requests - 1)])
    return {'ttft_ms': 1000 * ttft, 'tokens_per_s': sum(o[1] for o in out) / wall}


CONFIGS = [('mini', 1, 2, 'triton-mini, 1 instance x 2 threads'), ('mini', 2, 1, 'triton-mini, 2 instances x 1 thread'),
           ('llama', 1, 2, 'llama_cpp.server, n_threads 2'), ('llama', 1, 1, 'llama_cpp.server, n_threads 1')]
TRITON_CONFIGS = [('triton', 1, 2, 'real Triton 2.51 generate_stream, 1 instance x 2 threads'),
                  ('mini', 1, 2, 'triton-mini generate_stream, 1 instance x 2 threads'),
                  ('triton', 2, 1, 'real Triton 2.51 generate_stream, 2 instances x 1 thread'),
                  ('mini', 2, 1, 'triton-mini generate_stream, 2 instances x 1 thread')]


def interleaved_ttft(root, gguf, requests:int, triton:bool, pause:float=0.2) -> str:
    """Time to first token, one stream, 1 instance x 2 threads: every server started at once and idle but one, one
    request to each in turn, `requests` times. Drifts of a shared machine (other jobs, clock, caches) then hit every
    server alike, which separate rounds do not: TTFT is a few ms and its ratio moved 0.95x-1.31x between rounds."""
    servers, runs = [], {}
    try:
        proc, oport, hport, model = start('mini', root, gguf, 1, 2, 'both'); servers.append(proc)
        client = openai.OpenAI(base_url=f'http://127.0.0.1:{oport}/v1', api_key='x', max_retries=0, timeout=300)
        runs['triton-mini, OpenAI API'] = lambda c=client, m=model: one_stream(c, m)
        runs['triton-mini, generate_stream'] = lambda p=hport, m=model: generate_stream(p, m)
        proc, tport, tmodel = start('mini', root, gguf, 1, 2, 'generate', mode='thread'); servers.append(proc)
        runs['triton-mini (thread mode), generate_stream'] = lambda p=tport, m=tmodel: generate_stream(p, m)
        proc, lport, lmodel = start('llama', root, gguf, 1, 2); servers.append(proc)
        lclient = openai.OpenAI(base_url=f'http://127.0.0.1:{lport}/v1', api_key='x', max_retries=0, timeout=300)
        runs['llama_cpp.server, OpenAI API'] = lambda c=lclient, m=lmodel: one_stream(c, m)
        if triton:
            proc, rport, rmodel = start('triton', root, gguf, 1, 2); servers.append(proc)
            runs['real Triton 2.51, generate_stream'] = lambda p=rport, m=rmodel: generate_stream(p, m)
        for run in runs.values(): run(); run()   # warm-up
        ttft = {label: [] for label in runs}
        for _ in range(requests):
            for label, run in runs.items():
                time.sleep(pause)   # the last server's llama.cpp threads go idle (they poll a while after a token)
                ttft[label].append(1000 * run()[0])
    finally:
        for proc in servers: proc.terminate(); proc.wait(30)
    med = {label: statistics.median(v) for label, v in ttft.items()}
    lines = [f'| server, API | TTFT median ms | p90 ms |', '|---|---|---|']
    lines += [f'| {label} | {med[label]:.2f} | {sorted(v)[int(0.9 * len(v))]:.2f} |' for label, v in ttft.items()]
    text = '\n'.join(lines) + (f"\n\nInterleaved, {requests} requests each: triton-mini / llama_cpp.server over the OpenAI API "
                              f"{med['triton-mini, OpenAI API'] / med['llama_cpp.server, OpenAI API']:.2f}x")
    if triton: text += (f"; over generate_stream triton-mini / real Triton {med['triton-mini, generate_stream'] / med['real Triton 2.51, generate_stream']:.2f}x "
                        f"(thread mode {med['triton-mini (thread mode), generate_stream'] / med['real Triton 2.51, generate_stream']:.2f}x)")
    return text + '.\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--rounds', type=int, default=2)
    ap.add_argument('--no-save', action='store_true')
    ap.add_argument('--no-triton', action='store_true', help='leave out real Triton (and triton-mini over generate_stream)')
    ap.add_argument('--ttft-requests', type=int, default=10, help='one-stream requests whose median is the TTFT')
    ap.add_argument('--interleaved', type=int, default=30, metavar='N', help='TTFT with every server up at once, N requests to each in turn (0: skip)')
    ap.add_argument('--pause', type=float, default=0.2, help='seconds between interleaved requests')
    args = ap.parse_args()
    configs = CONFIGS + ([] if args.no_triton else TRITON_CONFIGS)
    sys.path.insert(0, str(ROOT))
    from triton_mini.llm import write_tiny_gguf
    root = Path(tempfile.mkdtemp(prefix='openai_llm_'))
    gguf = root / 'model.gguf'
    write_tiny_gguf(gguf, n_ctx=512, n_layer=8, n_embd=512, n_head=8, n_ff=1376)
    results = {c[3]: {1: [], 2: []} for c in configs}
    for r in range(args.rounds):
        for kind, count, threads, label in configs:
            api = 'generate' if 'generate_stream' in label else 'openai'
            proc, port, model = start(kind, root, gguf, count, threads, api)
            try:
                for streams in (1, 2): results[label][streams].append(measure(port, model, streams, api, args.ttft_requests))
            finally: proc.terminate(); proc.wait(30)
            print(f'round {r + 1}: {label}: ' + ', '.join(f"{s} stream(s) {results[label][s][-1]['tokens_per_s']:.0f} tok/s, "
                                                         f"TTFT {results[label][s][-1]['ttft_ms']:.1f} ms" for s in (1, 2)), flush=True)
    if args.rounds == 0:   # the interleaved TTFT alone
        print(interleaved_ttft(root, gguf, args.interleaved, not args.no_triton, args.pause)); shutil.rmtree(root, ignore_errors=True); return
    med = {label: {s: {k: statistics.median(x[k] for x in v) for k in ('ttft_ms', 'tokens_per_s')} for s, v in d.items()}
           for label, d in results.items()}
    lines = ['| configuration | 1 stream tok/s | 1 stream TTFT ms | 2 streams tok/s (total) | 2 streams TTFT ms (mean) |', '|---|---|---|---|---|']
    for label, d in med.items():
        lines.append(f"| {label} | {d[1]['tokens_per_s']:.0f} | {d[1]['ttft_ms']:.1f} | {d[2]['tokens_per_s']:.0f} | {d[2]['ttft_ms']:.1f} |")
    best1 = med['triton-mini, 1 instance x 2 threads'][1]; anchor1 = med['llama_cpp.server, n_threads 2'][1]
    best2 = med['triton-mini, 2 instances x 1 thread'][2]; anchor2 = max((med[l][2] for l in med if l.startswith('llama')), key=lambda d: d['tokens_per_s'])
    ratios = (f"One stream, 2 threads each: triton-mini / llama_cpp.server tokens/s {best1['tokens_per_s'] / anchor1['tokens_per_s']:.2f}x, "
              f"TTFT {best1['ttft_ms'] / anchor1['ttft_ms']:.2f}x. Two streams: triton-mini with 2 instances / llama_cpp.server's best "
              f"{best2['tokens_per_s'] / anchor2['tokens_per_s']:.2f}x tokens/s.")
    if not args.no_triton:
        t1, m1 = med['real Triton 2.51 generate_stream, 1 instance x 2 threads'][1], med['triton-mini generate_stream, 1 instance x 2 threads'][1]
        t2, m2 = med['real Triton 2.51 generate_stream, 2 instances x 1 thread'][2], med['triton-mini generate_stream, 2 instances x 1 thread'][2]
        ratios += (f" Same model.py over generate_stream, triton-mini / real Triton: one stream (1 x 2) {m1['tokens_per_s'] / t1['tokens_per_s']:.2f}x "
                   f"tokens/s, TTFT {m1['ttft_ms'] / t1['ttft_ms']:.2f}x; two streams (2 x 1) {m2['tokens_per_s'] / t2['tokens_per_s']:.2f}x tokens/s.")
    if args.interleaved:
        ratios += '\n\n## Time to first token, interleaved\n\n' + interleaved_ttft(root, gguf, args.interleaved, not args.no_triton, args.pause)
    load = os.getloadavg()[0]
    text = '\n'.join(lines) + f'\n\n{ratios}\n\nMedians over {args.rounds} round(s), one-stream TTFT the median of {args.ttft_requests} requests, {MAX_TOKENS} tokens greedy, load average at the end {load:.2f} on {os.cpu_count()} cores.\n'
    print(text)
    if not args.no_save:
        out = ROOT / 'bench' / 'results' / f'{datetime.date.today()}-openai-llm.md'
        out.write_text(f'# LLM serving: triton-mini vs llama_cpp.server and real Triton ({datetime.datetime.now():%Y-%m-%d %H:%M})\n\n`python bench/openai_llm.py`\n\n' + text)
    shutil.rmtree(root, ignore_errors=True)


if __name__ == '__main__': main()
