"""README's performance table and chart from one `bench/run.py --matrix` run's JSON (issue 14).

    python tools/perf_report.py                              # the newest bench/results/*-matrix.json: table to stdout
    python tools/perf_report.py RUN.json --chart nbs/images/perf.png

`evaluate` holds issue 14's targets (each a ratio against real Triton 2.51 measured in the same run) and says of each
whether the run met it; bench/run.py stores that list in the JSON, and nbs/index.ipynb shows `markdown(...)` and the
chart, so README.md is regenerated from the committed JSON (tools/nb.py run index && tools/build_readme.py).
"""
from __future__ import annotations
import argparse, json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / 'bench' / 'results'

# The mode `triton-mini` runs Python models in when no flag says (issue 42; triton_mini.server.SERVED_PYTHON_BACKEND_MODE):
# a run in another mode says so in its caption, so no figure is read as the default's.
SERVED_DEFAULT_MODE = 'process'
MODE_WORDS = {'process': 'stub processes', 'thread': 'threads'}

# The workloads in README's order, with the words the table uses.
# gRPC rows count inferences/s (a ModelStreamInfer stream carries 32); their p50/p99 are per call, or per whole stream.
LABELS = {'identity': 'identity FP32[1,16], JSON', 'mlp': 'numpy MLP, no batching', 'mlp_batched': 'MLP, dynamic batching 2 ms',
          'mlp_adaptive': 'MLP, adaptive_queue_delay', 'json256k': '256 KB tensor, JSON', 'binary256k': '256 KB tensor, binary',
          'grpc_unary': 'identity, gRPC ModelInfer', 'grpc_stream': 'identity, gRPC ModelStreamInfer'}

def _t(workload, c, measure, bar, num=None, den=None, issue=14):
    """One target: `measure` is 'rps' (at least `bar` times) or 'p99' (at most `bar` times), of num over den. 'mini'
    in num or den stands for the triton-mini server in the mode the target's issue is about (see `mode_kind`)."""
    return {'workload': workload, 'concurrency': c, 'measure': measure, 'bar': bar, 'issue': issue,
            'num': num or ['mini', workload, c], 'den': den or ['triton', workload, c]}

# Issue 14's targets, as written there ("Targets", each a ratio against real Triton in the same run).
TARGETS = ([_t('identity', 1, 'rps', 1.2), _t('identity', 8, 'rps', 1.8), _t('identity', 64, 'rps', 1.8)]
           + [_t('identity', c, 'p99', 1.0) for c in (1, 8, 64)]
           + [_t('mlp', c, m, b) for c in (8, 64) for m, b in (('rps', 1.3), ('p99', 1.0))]
           + [_t('mlp_batched', 64, 'rps', 1.3)]
           + [_t('json256k', c, 'rps', 3.0) for c in (1, 8, 64)]
           + [_t('binary256k', c, 'rps', 2.0) for c in (8, 64)]
           # "gRPC unary (tritonclient.grpc-style) >= 1.2x; streaming >= 1.5x": at every concurrency
           + [_t('grpc_unary', c, 'rps', 1.2) for c in (1, 8, 64)]
           + [_t('grpc_stream', c, 'rps', 1.5) for c in (1, 8, 64)]
           # the idle-aware batcher's bar: at c=1 >= 0.9x its own unbatched model, at c=64 >= 1.0x Triton's batched
           + [_t('mlp_adaptive', 1, 'rps', 0.9, den=['mini', 'mlp', 1]),
              _t('mlp_adaptive', 64, 'rps', 1.0, den=['triton', 'mlp_batched', 64])])

# Issue 42's targets for the served default, stub processes ("Targets for the default mode"); issue 14's were set
# when Python models ran on threads, and judge the thread-mode server of a run.
ISSUE_MODE = {14: 'thread', 42: 'process'}
TARGETS += ([_t('identity', 1, 'rps', 0.8, issue=42)] + [_t('identity', c, 'rps', 1.2, issue=42) for c in (8, 64)]
            + [_t('mlp', c, 'rps', 1.2, issue=42) for c in (8, 64)] + [_t('mlp_batched', 64, 'rps', 1.2, issue=42)]
            + [_t('binary256k', c, 'rps', 1.5, issue=42) for c in (8, 64)]
            + [_t(w, c, 'p99', 1.0, issue=42) for w in ('identity', 'mlp', 'mlp_batched', 'binary256k') for c in (8, 64)])

def mode_kind(data, mode:str) -> str|None:
    "Which server of the run is triton-mini with Python models in `mode`: 'mini', 'exp' (`--both-modes`), or None."
    if data.get('python_backend_mode', 'thread') == mode: return 'mini'
    return 'exp' if data.get('exp_mode') == mode else None

def _get(data, kind, workload, c, key):
    """A median from the run, or None when that server did not run that workload, the run has no such figure (h2load
    without latencies), or the answers were wrong (gRPC: h2load counts an error in the trailers as a success)."""
    r = data['workloads'].get(workload, {}).get('results', {}).get(kind, {}).get(str(c))
    return None if r is None or r.get('answers_ok') is False else r.get(key)

def ratio(data, num, den, measure) -> float|None:
    key = 'rps' if measure == 'rps' else 'p99_ms'
    a, b = _get(data, *num, key), _get(data, *den, key)
    return None if a is None or not b else a / b

def evaluate(data) -> list:
    "Every target of the workloads in the run with its ratio and whether it is met (None: not measured in this run)."
    out = []
    for t in TARGETS:
        if t['workload'] not in data['workloads']: continue   # `--matrix identity`: judged on identity's targets alone
        kind = mode_kind(data, ISSUE_MODE[t['issue']])
        if kind is None: continue                              # the run has no server in the mode the target is about
        t = dict(t, num=[kind if x == 'mini' else x for x in t['num']], den=[kind if x == 'mini' else x for x in t['den']])
        r = ratio(data, t['num'], t['den'], t['measure'])
        met = None if r is None else (r >= t['bar'] if t['measure'] == 'rps' else r <= t['bar'])
        out.append(dict(t, value=r, met=met))
    return out

def _x(r) -> str: return '—' if r is None else f'{r:.2f}×'
def _n(v) -> str: return '—' if v is None else f'{v:,.0f}'

def _target_text(t, both=False) -> str:
    what = 'req/s' if t['measure'] == 'rps' else 'p99'
    what = f"{MODE_WORDS[ISSUE_MODE[t['issue']]]} {what}" if both else what   # both modes in the run: say whose target
    sign = '≥' if t['measure'] == 'rps' else '≤'
    who = {'mini': "triton-mini's", 'exp': "triton-mini's", 'triton': "Triton's"}
    den = '' if t['den'][:2] == ['triton', t['workload']] else f' of {who[t["den"][0]]} {t["den"][1]}'
    if t['met'] is None: return f'{what} {sign} {t["bar"]:g}×{den}: not measured'
    return f'{what} {sign} {t["bar"]:g}×{den}: {_x(t["value"])} ' + ('met' if t['met'] else '**not met**')

def markdown(data) -> str:
    "The table README shows: per workload and concurrency, req/s and the ratios against Triton, and the targets."
    targets = evaluate(data)
    has = lambda kind: any(kind in w['results'] for w in data['workloads'].values())
    others = [(k, n) for k, n in (('mlserver', 'MLServer'), ('uvicorn', 'bare uvicorn')) if has(k)]
    mode, exp = data.get('python_backend_mode', 'thread'), data.get('exp_mode')
    both = exp is not None and has('exp')
    modes = [('mini', mode)] + ([('exp', exp)] if both else [])
    short = {'process': 'processes', 'thread': 'threads'}
    lines = [f'| workload | c | Triton req/s | '
             + ''.join(f'triton-mini req/s ({m} mode) | {short[m]} / Triton | p99 {short[m]} / Triton | ' for _, m in modes)
             + ''.join(f'{n} / Triton | ' for _, n in others)
             + ('targets (issue 14: threads; issue 42: stub processes) |' if both else f'issue {14 if mode == "thread" else 42} targets |'),
             '|---|---|---|' + '---|---|---|' * len(modes) + '---|' * len(others) + '---|']
    for w in LABELS:
        if w not in data['workloads']: continue
        for c in data['settings']['concurrency']:
            rps = lambda kind: _get(data, kind, w, c, 'rps')
            cell = lambda kind, key='rps': _x(ratio(data, [kind, w, c], ['triton', w, c], key))
            mine = [_target_text(t, both) for t in targets if t['workload'] == w and t['concurrency'] == c]
            lines.append(f'| {LABELS[w]} | {c} | ' + ' | '.join(
                [_n(rps('triton'))] + [x for k, _ in modes for x in (_n(rps(k)), cell(k), cell(k, 'p99'))]
                + [cell(k) for k, _ in others] + ['; '.join(mine) or '']) + ' |')
    met = sum(bool(t['met']) for t in targets)
    return '\n'.join(lines) + f'\n\n{met} of {len(targets)} targets met in this run.'

def run_caption(data, path:Path) -> str:
    "Which run the table is: date, commit, serving mode, machine, durations, load, command."
    s, flags = data['settings'], ' '.join(data.get('mini_flags') or [])
    where = path.resolve().relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path.name
    mode = data['python_backend_mode']
    other = '' if mode == SERVED_DEFAULT_MODE else (
        f" (every triton-mini row; not the served default, {MODE_WORDS[SERVED_DEFAULT_MODE]} since issue 42, which "
        f"this run did not measure)")
    return (f"Run of {data['date']} (`{where}`): triton-mini at {data['commit']}, Python models in "
            f"**{mode} mode**" + (f' (`{flags}`)' if flags else '') + other + f"; {data['machine']}; "
            f"{s['rounds']} interleaved rounds of {s['duration_s']} s per concurrency after a {s['warmup_s']} s warm-up, "
            f"medians over rounds; load average {data['load_before']:.1f} before, {data['load_after']:.1f} after; "
            f"`{data['command']}`.")

def chart(data, path:Path):
    "Bars: req/s of triton-mini, MLServer and the bare uvicorn ceiling over Triton's, with issue 14's req/s bars."
    import matplotlib
    matplotlib.use('Agg')
    import matplotlib.pyplot as plt
    mini = f"triton-mini ({data.get('python_backend_mode', 'thread')} mode)"
    exp = f"triton-mini ({data['exp_mode']} mode)" if data.get('exp_mode') else None
    kinds = [(k, n, col) for k, n, col in (('mini', mini, '#1f77b4'), ('exp', exp, '#9ecae1'), ('mlserver', 'MLServer', '#ff7f0e'),
                                           ('uvicorn', 'bare uvicorn (ceiling)', '#bbbbbb'))
             if n and any(k in w['results'] for w in data['workloads'].values())]
    groups = [(w, c) for w in LABELS if w in data['workloads'] and 'triton' in data['workloads'][w]['results']
              for c in data['settings']['concurrency']]
    # the served default's req/s bar (issue 42 for stub processes, issue 14 for a thread-mode run)
    served = 42 if data.get('python_backend_mode', 'thread') == 'process' else 14
    bars = {(t['workload'], t['concurrency']): t['bar'] for t in evaluate(data) if t['measure'] == 'rps' and t['den'][0] == 'triton'
            and t['den'][1] == t['workload'] and t['issue'] == served}
    fig, ax = plt.subplots(figsize=(max(10, 0.5 * len(groups)), 3.6), dpi=80)   # 18 groups: 10 in, as before gRPC
    width = 0.8 / len(kinds)
    for i, (k, name, col) in enumerate(kinds):
        xs = [g + (i - (len(kinds) - 1) / 2) * width for g in range(len(groups))]
        ys = [ratio(data, [k, w, c], ['triton', w, c], 'rps') for w, c in groups]
        ax.bar([x for x, y in zip(xs, ys) if y], [y for y in ys if y], width, label=name, color=col)
    for g, key in enumerate(groups):
        if key in bars:
            ax.plot([g - 0.45, g + 0.45], [bars[key]] * 2, color='black', lw=1.5, label=f'issue {served} target' if g == 0 else None)
    ax.axhline(1, color='#d62728', lw=1, ls='--', label='real Triton 2.51')
    ax.set_yscale('log', base=2)
    ax.set_ylim(1 / 8, 48)
    ax.set_yticks([0.25, 0.5, 1, 2, 4, 8, 16, 32], ['¼', '½', '1', '2', '4', '8', '16', '32'])
    ax.set_xticks(range(len(groups)), [f'c={c}' for w, c in groups], fontsize=7)
    for w in dict.fromkeys(w for w, _ in groups):   # the workload's name under its concurrencies
        xs = [g for g, (v, _) in enumerate(groups) if v == w]
        ax.text(sum(xs) / len(xs), -0.14, w, transform=ax.get_xaxis_transform(), ha='center', va='top', fontsize=8)
    ax.set_ylabel('req/s ÷ Triton\'s (same run)')
    ax.set_title(f'bench/run.py --matrix, {data["date"]}, triton-mini at {data["commit"]}', fontsize=9)
    ax.legend(fontsize=7, ncol=5, loc='upper left')
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, metadata={'Software': None})   # no version stamp: the same JSON gives the same bytes
    plt.close(fig)

def latest(results:Path=RESULTS, runs=None) -> Path:
    "The newest committed matrix run (bench/results/<date>[-n]-matrix.json), of `runs` if given."
    runs = sorted(results.glob('*-matrix.json') if runs is None else runs, key=lambda p: (p.name[:10], int(p.name[11:].split('-')[0]) if p.name[11:].split('-')[0].isdigit() else 1))
    if not runs: raise FileNotFoundError(f'no *-matrix.json in {results}: run bench/run.py --matrix')
    return runs[-1]

def latest_full(results:Path=RESULTS) -> Path:
    "The newest committed run that measured every workload of the matrix (a newer run may have measured only some)."
    runs = [p for p in results.glob('*-matrix.json') if set(LABELS) <= set(json.loads(p.read_text())['workloads'])]
    if not runs: raise FileNotFoundError(f'no *-matrix.json in {results} with every workload: run bench/run.py --matrix')
    return latest(results, runs)

if __name__ == '__main__':
    p = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    p.add_argument('json', nargs='?', type=Path, help='a bench/run.py --matrix JSON (default: the newest in bench/results)')
    p.add_argument('--chart', type=Path, metavar='PNG', help='also draw the chart here')
    args = p.parse_args()
    data = json.loads((args.json or latest()).read_text())
    print(markdown(data))
    if args.chart: chart(data, args.chart)
