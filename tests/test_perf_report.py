"""tools/perf_report.py: issue 14's targets judged from a bench/run.py --matrix JSON (no benchmark runs here)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
from perf_report import TARGETS, evaluate, markdown


def run_of(results:dict) -> dict:
    "A matrix JSON with only these medians: {workload: {server: {concurrency: (req/s, p99 ms)}}}."
    return {'settings': {'concurrency': [1, 8, 64]},
            'workloads': {w: {'results': {k: {str(c): {'rps': r, 'p99_ms': p} for c, (r, p) in cs.items()} for k, cs in ks.items()}}
                          for w, ks in results.items()}}


def test_each_target_is_met_not_met_or_not_measured():
    data = run_of({'identity': {'triton': {1: (100, 1.0)}, 'mini': {1: (130, 1.1)}},
                   'mlp': {'mini': {1: (1000, 1.0)}}, 'mlp_adaptive': {'mini': {1: (899, 1.0)}}})
    got = {(t['workload'], t['concurrency'], t['measure']): t for t in evaluate(data)}
    assert len(got) == len(TARGETS)
    assert got['identity', 1, 'rps']['met'] is True and abs(got['identity', 1, 'rps']['value'] - 1.3) < 1e-9   # >= 1.2x
    assert got['identity', 1, 'p99']['met'] is False                                # 1.1x Triton's p99: over the bar
    assert got['identity', 8, 'rps']['met'] is None and got['identity', 8, 'rps']['value'] is None   # not run
    assert got['mlp_adaptive', 1, 'rps']['met'] is False                            # 0.899x its own unbatched: under 0.9x


def test_the_table_says_so():
    data = run_of({'identity': {'triton': {c: (100, 1.0) for c in (1, 8, 64)}, 'mini': {c: (190, 0.9) for c in (1, 8, 64)}}})
    md = markdown(data)
    assert '| identity FP32[1,16], JSON | 8 | 100 | 190 | 1.90× | 0.90× | req/s ≥ 1.8×: 1.90× met; p99 ≤ 1×: 0.90× met |' in md
    assert 'req/s ≥ 3×: not measured' not in md                                    # workloads not in the run: no rows
    assert md.endswith('6 of 18 targets met in this run.')
