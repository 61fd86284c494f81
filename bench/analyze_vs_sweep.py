"""Issue 46's criterion for `triton-mini analyze`: the quick search's pick is within 10% of the best config of a full
(brute) sweep, on this machine, for the bundled batching model (model_repository/linear_onnx) and for a llama.cpp
model (the bundled qwen_gguf's config and model.py with a larger random-weight GGUF, so that threads matter; the
search then varies instances x n_threads within the cores).

    python bench/analyze_vs_sweep.py                              # both models (about 10 minutes on 2 cores)
    python bench/analyze_vs_sweep.py --models qwen_gguf --rounds 2 --no-save

Per model: the quick search, then the brute sweep, in the same sitting. A config measured twice with short windows on
a loaded 2-core machine can differ by 2x (2026-12-06-analyze.md), more than the top configs differ, so the two picks
are then measured again, interleaved (pick, best, pick, best, ...) for --rounds rounds, and the criterion is judged
on the medians of those re-measurements: pick / best >= 0.9. When quick picked brute's best config the ratio is 1.
Writes results/<date>-analyze-threads.md (numbered when the day has one) unless --no-save."""
import argparse, datetime, os, shutil, statistics, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from triton_mini import analyze as az  # noqa: E402
from triton_mini.llm import write_tiny_gguf  # noqa: E402

# the stand-in test_llm.py serves as its slow model: 8 blocks of width 512, so a token costs enough for threads to matter
BIG_GGUF = dict(n_ctx=512, n_layer=8, n_embd=512, n_head=8, n_ff=1376)


def llama_repository(tmp:Path) -> Path:
    "qwen_gguf (seed 003's config and model.py) with the larger random GGUF."
    repo = tmp / 'llama_repo'
    shutil.copytree(ROOT / 'model_repository/qwen_gguf', repo / 'qwen_gguf', ignore=shutil.ignore_patterns('model.gguf'))
    write_tiny_gguf(repo / 'qwen_gguf/1/model.gguf', **BIG_GGUF)
    return repo


def flags(model, repo, a, mode, out) -> list:
    common = ['--model-repository', str(repo), '-m', model, '--run-config-search-mode', mode, '--export-path', str(out),
              '-p', str(a.p), '--max-trials', str(a.max_trials), '--cpu-cores', str(os.cpu_count())]
    if model == 'qwen_gguf': return common + ['--concurrency', a.llm_concurrency, '--output-tokens-mean', str(a.output_tokens)]
    return common + ['--concurrency', a.concurrency]


def remeasure(args, cand) -> float:
    "One more measurement of `cand`: its best point's throughput."
    folder, config = az.load_config(args.model_repository, args.model)
    ms = az.measure(args, folder, config, cand, log=lambda *_: None)
    return az.best_point(ms, args.objective, args.budget_ms)[0].throughput if ms else 0.0


def compare(model, repo, a, tmp) -> dict:
    runs = {}
    for mode in ('quick', 'brute'):
        args = az.parse_args(flags(model, repo, a, mode, tmp / f'{model}-{mode}'))
        ranked, names, sentence = az.analyze(args, log=lambda *_: None)
        runs[mode] = dict(args=args, ranked=ranked, names=names, sentence=sentence)
    pick, best = runs['quick']['ranked'][0][0], runs['brute']['ranked'][0][0]
    measured = {c for c, _, _ in runs['brute']['ranked']}
    again = {pick: [], best: []}
    if pick != best:
        for _ in range(a.rounds):
            for c in (pick, best): again[c].append(remeasure(runs["brute"]["args"], c))
    ratio = 1.0 if pick == best else statistics.median(again[pick]) / statistics.median(again[best])
    return dict(runs=runs, pick=pick, best=best, in_brute=pick in measured, again=again, ratio=ratio)


def section(model, r, a) -> list:
    q, b = r['runs']['quick'], r['runs']['brute']
    unit = b['ranked'][0][1].unit
    own = next(m for c, m, _ in q['ranked'] if c == r['pick'])
    same = next(m for c, m, _ in b['ranked'] if c == r['pick'])
    lines = [f'## `{model}`', '',
             f'- quick search: {len(q["ranked"])} configs measured; pick **{r["pick"].describe()}**: {own.throughput:.1f} {unit} in its own run, '
             f'{same.throughput:.1f} in the brute sweep; among brute\'s measured configs: {"yes" if r["in_brute"] else "NO"}',
             f'- brute sweep: {len(b["ranked"])} configs measured; best **{r["best"].describe()}**: {b["ranked"][0][1].throughput:.1f} {unit} '
             f'at concurrency {b["ranked"][0][1].concurrency} (p99 {b["ranked"][0][1].p99_ms:.2f} ms)']
    if r['pick'] == r['best']: lines.append('- quick picked the brute sweep\'s best config: ratio 100%')
    else:
        fmt = lambda xs: ', '.join(f'{x:.1f}' for x in xs)
        lines.append(f'- measured again, interleaved ({a.rounds} rounds): pick {fmt(r["again"][r["pick"]])}; best {fmt(r["again"][r["best"]])} {unit}')
        lines.append(f'- pick / best (medians of the re-measurements): {r["ratio"]:.0%}')
    lines += [f'- criterion (within 10%): {"met" if r["ratio"] >= 0.9 and r["in_brute"] else "NOT met"}',
              f'- the quick report\'s sentence: {q["sentence"]}', '',
              f'| config (brute sweep, best first) | best concurrency | {unit} | p99 ms |', '|---|---|---|---|']
    lines += [f'| {c.describe()} | {m.concurrency} | {m.throughput:.1f} | {m.p99_ms:.2f} |' for c, m, _ in b['ranked']]
    return lines + ['']


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--models', nargs='+', default=['linear_onnx', 'qwen_gguf'])
    p.add_argument('--concurrency', default='1,4'); p.add_argument('--llm-concurrency', default='1,2,4')
    p.add_argument('--output-tokens', type=int, default=32)
    p.add_argument('-p', type=int, default=2000); p.add_argument('--max-trials', type=int, default=3)
    p.add_argument('--rounds', type=int, default=3)
    p.add_argument('--no-save', action='store_true')
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix='analyze_vs_sweep_'))
    load0 = os.getloadavg()
    results = {}
    for model in a.models:
        repo = llama_repository(tmp) if model == 'qwen_gguf' else ROOT / 'model_repository'
        results[model] = compare(model, repo, a, tmp)
    load1 = os.getloadavg()
    lines = [f'# triton-mini analyze: quick search vs full sweep, with llama.cpp threads ({datetime.date.today()})', '',
             f'{os.cpu_count()} cores; load average {load0[0]:.1f} at the start, {load1[0]:.1f} at the end (other test runs share the machine). '
             f'`python bench/analyze_vs_sweep.py` with {a.p} ms windows x {a.max_trials} trials; linear_onnx at concurrency {a.concurrency} '
             f'(perf, infer/s), qwen_gguf at {a.llm_concurrency} (genai-perf\'s generate load, {a.output_tokens} tokens per request, requests/s; '
             f'GGUF {BIG_GGUF}).', '']
    for model, r in results.items(): lines += section(model, r, a)
    text = '\n'.join(lines)
    print(text)
    if not a.no_save:
        path = next(p for n in range(1, 1000)   # never over an earlier run's file: the day may have several
                    if not (p := ROOT / 'bench/results' / f'{datetime.date.today()}-analyze-threads{"" if n == 1 else f"-{n}"}.md').exists())
        path.write_text(text); print(f'written {path}')
    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == '__main__': main()
