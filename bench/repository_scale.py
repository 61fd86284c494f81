#!/usr/bin/env python
"""What a big repository costs: the time to load N Python models and the idle memory of the serving process tree,
real Triton 2.51 against triton-mini (stub processes, and the thread mode), same repository, one run. (Issue 14's
"cost growth": a 100-model repository loads in < 5 s; idle RSS per Python model <= real Triton's.)

    python bench/repository_scale.py                      # N = 1 and 100; writes bench/results/<date>-repository-scale.md
    python bench/repository_scale.py --models 1 20 --no-save

The repository is N copies of bench/repo/identity (FP32 [1,16] echoed, one instance). Load time: from starting
the server to `/v2/health/ready` answering 200 (every model loaded), then one inference per model checks them.
Memory: after 3 s idle, summed over the server and every process below it (Triton's and triton-mini's stubs):
RSS (what `ps` shows; pages shared between processes counted in each) and PSS (shared pages split among their
sharers: the honest total). Per model: (total at N - total at 1) / (N - 1). Servers are not pinned: a user's
machine loads with every core (2 here).
"""
import argparse, datetime, json, os, shutil, signal, socket, statistics, subprocess, sys, tempfile, time, urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent; ROOT = HERE.parent
sys.path.insert(0, str(HERE))
from run import ORACLE, descendants   # the oracle launcher and /proc's process tree, as bench/run.py finds them

BODY = json.dumps({'inputs': [{'name': 'INPUT0', 'shape': [1, 16], 'datatype': 'FP32', 'data': [1.0] * 16}]}).encode()


def free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]


def make_repo(root:Path, n:int) -> Path:
    repo = root / f'repo_{n}'
    for i in range(n): shutil.copytree(HERE / 'repo' / 'identity', repo / f'identity_{i:03d}')
    for i in range(n):
        cfg = repo / f'identity_{i:03d}' / 'config.pbtxt'
        cfg.write_text(cfg.read_text().replace('name: "identity"', f'name: "identity_{i:03d}"'))
    return repo


def memory(pid:int) -> tuple:
    "(RSS, PSS) in bytes of `pid` and every process below it."
    rss = pss = 0
    for p in descendants(pid):   # pid itself included
        try: text = Path(f'/proc/{p}/smaps_rollup').read_text()
        except OSError: continue
        for line in text.splitlines():
            k, v = line.split(':', 1)[0], line.split()[1:2]
            if k == 'Rss': rss += int(v[0]) * 1024
            elif k == 'Pss': pss += int(v[0]) * 1024
    return rss, pss


def ready(port:int) -> bool:
    try:
        with urllib.request.urlopen(f'http://127.0.0.1:{port}/v2/health/ready', timeout=1) as r: return r.status == 200
    except OSError: return False


def measure(kind:str, repo:Path, n:int, workdir:Path, base:Path|None=None) -> dict:
    port = free_port()
    if kind == 'triton':
        oracle = [sys.executable, ORACLE] if ORACLE.endswith('.py') else [ORACLE]
        argv = [*oracle, f'--model-repository={repo}', f'--http-port={port}', f'--grpc-port={free_port()}', f'--metrics-port={free_port()}']
        env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'}
    else:
        argv = [sys.executable, '-m', 'triton_mini', f'--model-repository={repo}', f'--http-port={port}', '--allow-grpc=false',
                '--allow-metrics=false', f"--python-backend-mode={kind.split('-')[1]}"]
        env = dict(os.environ, PYTHONPATH=str(base if kind.startswith('base') else ROOT))
    log = workdir / f'{kind}-{n}.log'
    t0 = time.monotonic()
    proc = subprocess.Popen(argv, cwd=workdir, env=env, start_new_session=True, stdout=open(log, 'w'), stderr=subprocess.STDOUT)
    try:
        while not ready(port):
            if proc.poll() is not None or time.monotonic() - t0 > 600: raise RuntimeError(f'{kind} did not get ready:\n{log.read_text()[-2000:]}')
            time.sleep(0.05)
        load_s = time.monotonic() - t0
        for i in range(n):   # every model answers
            req = urllib.request.Request(f'http://127.0.0.1:{port}/v2/models/identity_{i:03d}/infer', BODY)
            with urllib.request.urlopen(req, timeout=30) as r: assert json.loads(r.read())['outputs'][0]['data'] == [1.0] * 16
        time.sleep(3)
        rss, pss = memory(proc.pid)
        return {'load_s': load_s, 'rss': rss, 'pss': pss, 'procs': len(descendants(proc.pid))}
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try: proc.wait(60)
        except subprocess.TimeoutExpired: os.killpg(proc.pid, signal.SIGKILL); proc.wait()


KINDS = {'triton': 'real Triton 2.51', 'mini-process': 'triton-mini, stub processes', 'mini-thread': 'triton-mini, thread mode',
         'base-process': 'triton-mini at --base, stub processes'}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--models', type=int, nargs='+', default=[1, 100])
    ap.add_argument('--only', nargs='+', choices=list(KINDS), default=[k for k in KINDS if k != 'base-process'])
    ap.add_argument('--base', type=Path, help='another tree of triton_mini (a worktree at the commit before a change): '
                    'its stub processes are measured as base-process, in the same run')
    ap.add_argument('--no-save', action='store_true')
    args = ap.parse_args()
    if 'base-process' in args.only and args.base is None: ap.error('base-process needs --base')
    root = Path(tempfile.mkdtemp(prefix='repo_scale_'))
    results = {}
    try:
        for n in args.models:
            repo = make_repo(root, n)
            for kind in args.only:
                results[kind, n] = r = measure(kind, repo, n, root, args.base)
                print(f"{KINDS[kind]}, {n} model(s): ready in {r['load_s']:.2f} s, {r['procs']} processes, RSS {r['rss'] / 2**20:.0f} MiB, "
                      f"PSS {r['pss'] / 2**20:.0f} MiB", flush=True)
    finally: shutil.rmtree(root, ignore_errors=True)
    lo, hi = min(args.models), max(args.models)
    lines = [f'| server | load {hi} models, s | processes | RSS at {hi}, MiB | PSS at {hi}, MiB | RSS per model, MiB | PSS per model, MiB | RSS at {lo}, MiB |',
             '|---|---|---|---|---|---|---|---|']
    for kind in args.only:
        a, b = results[kind, lo], results[kind, hi]
        per = lambda k: (b[k] - a[k]) / (hi - lo) / 2**20 if hi > lo else float('nan')
        lines.append(f"| {KINDS[kind]} | {b['load_s']:.2f} | {b['procs']} | {b['rss'] / 2**20:.0f} | {b['pss'] / 2**20:.0f} | "
                     f"{per('rss'):.1f} | {per('pss'):.1f} | {a['rss'] / 2**20:.0f} |")
    text = '\n'.join(lines) + f"\n\nOne run, load average {os.getloadavg()[0]:.2f} at the end on {os.cpu_count()} cores.\n"
    print(text)
    if not args.no_save:
        out = HERE / 'results' / f'{datetime.date.today()}-repository-scale.md'
        out.write_text(f'# Repository scale: load time and idle memory ({datetime.datetime.now():%Y-%m-%d %H:%M})\n\n'
                       f'`{" ".join(["python bench/repository_scale.py", *sys.argv[1:]])}`\n\n' + text)


if __name__ == '__main__': main()
