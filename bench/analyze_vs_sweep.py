"""Issue 46's criterion for `triton-mini analyze`: the quick search's pick is within 10% of the best config of a full
(brute) sweep, on the bundled batching model (model_repository/linear_onnx), on this machine.

    python bench/analyze_vs_sweep.py                       # concurrency 1,4, 1 s windows x 2 (about 4 minutes on 2 cores)
    python bench/analyze_vs_sweep.py --model linear_onnx --concurrency 1,2,4,8 -p 2000 --no-save

Both searches run through `triton_mini.analyze.analyze`; the pick is compared with the brute sweep's best twice: by
the quick run's own measurement of it, and by the brute sweep's measurement of the same config (same run, same drift).
Writes results/<date>-analyze.md unless --no-save."""
import argparse, datetime, os, sys, tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from triton_mini import analyze as az  # noqa: E402


def run(mode, a, out):
    args = az.parse_args(['--model-repository', str(ROOT / 'model_repository'), '-m', a.model, '--run-config-search-mode', mode,
                          '--concurrency', a.concurrency, '-p', str(a.p), '--max-trials', str(a.max_trials), '--export-path', str(out)])
    ranked, names, sentence = az.analyze(args, log=lambda *_: None)
    return ranked, names, sentence


def main():
    p = argparse.ArgumentParser()
    p.add_argument('--model', default='linear_onnx'); p.add_argument('--concurrency', default='1,4')
    p.add_argument('-p', type=int, default=1000); p.add_argument('--max-trials', type=int, default=2)
    p.add_argument('--no-save', action='store_true')
    a = p.parse_args()
    tmp = Path(tempfile.mkdtemp())
    brute, bnames, _ = run('brute', a, tmp / 'brute')
    quick, qnames, qsentence = run('quick', a, tmp / 'quick')
    best_c, best_m, _ = brute[0]
    pick_c, pick_m, _ = quick[0]
    in_brute = next(m for c, m, _ in brute if c == pick_c)
    r_own, r_same = pick_m.throughput / best_m.throughput, in_brute.throughput / best_m.throughput
    ok = min(r_own, r_same) >= 0.9   # both: the same config measured twice can differ by more than 10% with short windows
    lines = [f'# triton-mini analyze: quick search vs full sweep ({datetime.date.today()})', '',
             f'Model `{a.model}` (bundled repository), {os.cpu_count()} cores, concurrency {a.concurrency}, '
             f'{a.p} ms windows x {a.max_trials}. `python bench/analyze_vs_sweep.py`', '',
             f'- brute sweep: {len(brute)} configs measured; best {best_c.describe()}: {best_m.throughput:.0f} infer/s at concurrency {best_m.concurrency} (p99 {best_m.p99_ms:.2f} ms)',
             f'- quick search: {len(quick)} configs measured; pick {pick_c.describe()}: {pick_m.throughput:.0f} infer/s in its own run, '
             f'{in_brute.throughput:.0f} infer/s in the brute sweep',
             f'- pick / best: {r_own:.0%} (quick run), {r_same:.0%} (same sweep) -> criterion (within 10%) {"met" if ok else "NOT met"}',
             f'- the report\'s sentence: {qsentence}', '', '| config (brute sweep) | best concurrency | infer/s | p99 ms |', '|---|---|---|---|']
    lines += [f'| {c.describe()} | {m.concurrency} | {m.throughput:.0f} | {m.p99_ms:.2f} |' for c, m, _ in brute]
    text = '\n'.join(lines) + '\n'
    print(text)
    if not a.no_save:
        path = ROOT / 'bench/results' / f'{datetime.date.today()}-analyze.md'
        path.write_text(text); print(f'written {path}')


if __name__ == '__main__': main()
