"""Differential HTTP fuzzing: the cases of tests/http_fuzz.py sent to real Triton 2.51 and to triton-mini
(same models, both in model-control-mode none), answers compared. Prints the differences grouped by
(kind of mutation, Triton's status, triton-mini's status) with an example each, and writes them all to
bench/results/fuzz_vs_triton-<seed>.jsonl. A tool for finding fidelity gaps, not a pass/fail check: some
differences are intended (see tests/conformance/cases.py and the notebooks' "How real Triton differs").

    python bench/fuzz_http_vs_triton.py --cases 5000 --seed 3
"""
import argparse, collections, json, sys, tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
import http_fuzz                                   # noqa: E402
from triton_servers import MiniProcess, RealTriton  # noqa: E402


def answer(port, case):
    try:
        status, body = http_fuzz.send(port, case)
        try: doc = json.loads(body) if body else None
        except ValueError: doc = body[:100].decode('latin-1')
        return status, doc.get('error') if isinstance(doc, dict) and 'error' in doc else None
    except (TimeoutError, OSError, AssertionError) as e: return 'failed', str(e)[:80]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--cases', type=int, default=5000)
    ap.add_argument('--seed', type=int, default=3)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp())
    mine = MiniProcess(http_fuzz.repository(root / 'mine'), grpc=False)
    triton = RealTriton(http_fuzz.repository(root / 'triton'))
    groups, rows = collections.defaultdict(list), []
    try:
        for case in http_fuzz.cases(a.seed, a.cases):
            if case.raw is not None: continue          # HTTP-level garbage: libevhtp and httptools differ by design
            theirs, ours = answer(triton.http_port, case), answer(mine.http_port, case)
            if theirs != ours:
                groups[(case.note, theirs[0], ours[0])].append((case, theirs, ours))
                rows.append({'case': json.loads(case.to_json()), 'triton': theirs, 'triton_mini': ours})
    finally:
        triton.stop(); mine.stop()
    (HERE / 'results').mkdir(exist_ok=True)
    (HERE / 'results' / f'fuzz_vs_triton-{a.seed}.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in rows))
    for (note, t, m), items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        case, theirs, ours = items[0]
        print(f'{len(items):5d}  {note:8s} Triton {t} / triton-mini {m}\n       {case.wire()[:220]!r}\n'
              f'       Triton: {str(theirs[1])[:160]}\n       mini:   {str(ours[1])[:160]}')
    print(f'{len(rows)} differences in {a.cases} cases')


if __name__ == '__main__':
    main()
