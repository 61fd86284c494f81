"""A long HTTP fuzzing run against a triton-mini process (issue 18): the same generator and checks as
tests/test_http_fuzz.py, as many cases as you ask for, with a summary of what failed (grouped by the check
that broke) and the failing cases written to bench/results/fuzz_failures-<seed>.jsonl (add the interesting
ones to tests/fuzz_corpus/http.jsonl).

    python bench/fuzz_http.py --cases 100000 --seed 1
    python bench/fuzz_http.py --cases 0 --heavy 500 --seed 1    # only issue 26's heavy shapes

`--heavy N` adds N of issue 26's shapes (many BYTES elements, big bad JSON, NaN, deep nesting, deep `file:`
keys) after the ordinary cases, and reports the slowest health check seen while they ran.
"""
import argparse, collections, json, sys, tempfile, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
import http_fuzz                                  # noqa: E402
from triton_servers import MiniProcess  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--cases', type=int, default=100_000)
    ap.add_argument('--seed', type=int, default=1)
    ap.add_argument('--workers', type=int, default=4)
    ap.add_argument('--heavy', type=int, default=100, help="issue 26's heavy shapes, after the others")
    a = ap.parse_args()
    repo = http_fuzz.repository(Path(tempfile.mkdtemp()) / 'models')
    s = MiniProcess(repo, '--http-header-timeout-secs=10', '--http-body-timeout-secs=10', grpc=False)
    failures, kinds, start, rss0 = [], collections.Counter(), time.monotonic(), s.rss()
    def one(case):
        try:
            status, body = http_fuzz.send(s.http_port, case)
            http_fuzz.check(case, status, body)
            return None
        except (AssertionError, TimeoutError, OSError) as e: return case, f'{type(e).__name__}: {str(e)[:100]}'
    try:
        with ThreadPoolExecutor(a.workers) as pool:
            for i, f in enumerate(pool.map(one, http_fuzz.cases(a.seed, a.cases)), 1):
                if f is not None: failures.append(f); kinds[f[1][:80]] += 1
                if i % 10_000 == 0:
                    print(f'{i} cases, {len(failures)} failures, {time.monotonic() - start:.0f} s, RSS {s.rss() >> 20} MB, '
                          f'{s.fds()} fds, {s.threads()} threads', flush=True)
        worst, done = [0.0], threading.Event()
        def poll():
            while not done.is_set():
                t = time.monotonic()
                try: s.request('GET', '/v2/health/live', timeout=30)
                except OSError: pass
                worst[0] = max(worst[0], time.monotonic() - t); time.sleep(0.01)
        poller = threading.Thread(target=poll); poller.start()
        try:
            with ThreadPoolExecutor(2) as pool:
                for f in pool.map(one, http_fuzz.heavy_cases(a.seed, a.heavy)):
                    if f is not None: failures.append(f); kinds[f[1][:80]] += 1
        finally: done.set(); poller.join()
        healthy = s.request('GET', '/v2/health/ready')[0] == 200
        summary = {'cases': a.cases, 'heavy': a.heavy, 'health_worst_ms_during_heavy': round(worst[0] * 1000), 'seed': a.seed, 'seconds': round(time.monotonic() - start, 1), 'failures': len(failures),
                   'healthy_at_end': healthy, 'rss_start_mb': rss0 >> 20, 'rss_end_mb': s.rss() >> 20, 'log_lines': len(s.lines),
                   'failure_kinds': dict(kinds.most_common(20))}
    finally: code = s.stop()
    summary['exit_code'] = code
    out = HERE / 'results'
    out.mkdir(exist_ok=True)
    (out / f'fuzz_failures-{a.seed}.jsonl').write_text(''.join(c.to_json() + '\n' for c, _ in failures))
    print(json.dumps(summary, indent=2))
    return 0 if not failures and healthy and code == 0 else 1


if __name__ == '__main__':
    sys.exit(main())
