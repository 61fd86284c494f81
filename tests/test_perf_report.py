"""tools/perf_report.py: issue 14's targets judged from a bench/run.py --matrix JSON (no benchmark runs here)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
from perf_report import LABELS, SERVED_DEFAULT_MODE, TARGETS, evaluate, markdown, mode_kind, run_caption


def run_of(results:dict) -> dict:
    "A matrix JSON with only these medians: {workload: {server: {concurrency: (req/s, p99 ms)}}}."
    return {'settings': {'concurrency': [1, 8, 64]},
            'workloads': {w: {'results': {k: {str(c): {'rps': r, 'p99_ms': p} for c, (r, p) in cs.items()} for k, cs in ks.items()}}
                          for w, ks in results.items()}}


def test_each_target_is_met_not_met_or_not_measured():
    data = run_of({'identity': {'triton': {1: (100, 1.0)}, 'mini': {1: (130, 1.1)}},
                   'mlp': {'mini': {1: (1000, 1.0)}}, 'mlp_adaptive': {'mini': {1: (899, 1.0)}}})
    got = {(t['workload'], t['concurrency'], t['measure']): t for t in evaluate(data)}
    # a run without a mode is a thread-mode run (before issue 42): issue 14's targets of the workloads it ran, no others
    assert len(got) == sum(t['workload'] in ('identity', 'mlp', 'mlp_adaptive') and t['issue'] == 14 for t in TARGETS)
    assert got['identity', 1, 'rps']['met'] is True and abs(got['identity', 1, 'rps']['value'] - 1.3) < 1e-9   # >= 1.2x
    assert got['identity', 1, 'p99']['met'] is False                                # 1.1x Triton's p99: over the bar
    assert got['identity', 8, 'rps']['met'] is None and got['identity', 8, 'rps']['value'] is None   # not run
    assert got['mlp_adaptive', 1, 'rps']['met'] is False                            # 0.899x its own unbatched: under 0.9x


def test_the_table_says_so():
    data = run_of({'identity': {'triton': {c: (100, 1.0) for c in (1, 8, 64)}, 'mini': {c: (190, 0.9) for c in (1, 8, 64)}}})
    md = markdown(data)
    assert '| triton-mini req/s (thread mode) |' in md                             # a run without the key: before the flip
    assert '| identity FP32[1,16], JSON | 8 | 100 | 190 | 1.90× | 0.90× | req/s ≥ 1.8×: 1.90× met; p99 ≤ 1×: 0.90× met |' in md
    assert 'req/s ≥ 3×: not measured' not in md                                    # workloads not in the run: no rows
    assert md.endswith('6 of 6 targets met in this run.')                          # nor targets


def test_grpc_rows():
    "bench/run.py --matrix grpc_unary grpc_stream: unary >= 1.2x and streaming >= 1.5x Triton at each c, p99 when h2load gave it."
    data = run_of({'grpc_unary': {'triton': {c: (1000, 2.0) for c in (1, 8, 64)}, 'mini': {1: (1100, 1.0), 8: (1300, 3.0), 64: (1250, 1.0)}},
                   'grpc_stream': {'triton': {c: (1000, 2.0) for c in (1, 8, 64)}, 'mini': {1: (1600, 1.0), 8: (1400, 1.0), 64: (1500, 1.0)}}})
    for c in (1, 8, 64): del data['workloads']['grpc_stream']['results']['mini'][str(c)]['p99_ms']   # h2load without a log
    data['workloads']['grpc_unary']['results']['mini']['64']['answers_ok'] = False                 # gRPC errors counted as 200s
    got = {(t['workload'], t['concurrency']): t['met'] for t in evaluate(data)}
    assert got == {('grpc_unary', 1): False, ('grpc_unary', 8): True, ('grpc_unary', 64): None,
                   ('grpc_stream', 1): True, ('grpc_stream', 8): False, ('grpc_stream', 64): True}
    md = markdown(data)
    assert f'| {LABELS["grpc_unary"]} | 8 | 1,000 | 1,300 | 1.30× | 1.50× | req/s ≥ 1.2×: 1.30× met |' in md
    assert f'| {LABELS["grpc_unary"]} | 64 | 1,000 | — | — | — | req/s ≥ 1.2×: not measured |' in md
    assert f'| {LABELS["grpc_stream"]} | 8 | 1,000 | 1,400 | 1.40× | — | req/s ≥ 1.5×: 1.40× **not met** |' in md
    assert md.endswith('3 of 6 targets met in this run.')


def test_the_caption_says_which_mode_the_rows_used(tmp_path):
    "A run in thread mode says it is not the served default (issue 42); a run in the default mode says nothing more."
    from triton_mini.server import SERVED_PYTHON_BACKEND_MODE
    assert SERVED_DEFAULT_MODE == SERVED_PYTHON_BACKEND_MODE
    data = {'date': '2026-12-06 10:00', 'commit': 'abc1234', 'machine': '2 cores', 'load_before': 0, 'load_after': 0,
            'command': 'python bench/run.py --matrix', 'settings': {'rounds': 1, 'duration_s': 1, 'warmup_s': 1, 'concurrency': [1]},
            'workloads': {}}
    thread = run_caption({**data, 'python_backend_mode': 'thread'}, tmp_path / 'x-matrix.json')
    assert '**thread mode** (every triton-mini row; not the served default, stub processes since issue 42' in thread
    process = run_caption({**data, 'python_backend_mode': 'process'}, tmp_path / 'x-matrix.json')
    assert '**process mode**;' in process and 'served default' not in process
    assert '(process mode)' in markdown({**data, 'python_backend_mode': 'process'}).splitlines()[0]


def test_both_modes_side_by_side():
    "bench/run.py --matrix --both-modes: stub processes judged by issue 42's targets, threads by issue 14's, one table."
    data = run_of({'identity': {'triton': {c: (100, 1.0) for c in (1, 8, 64)},
                                'mini': {1: (85, 1.2), 8: (110, 0.9), 64: (130, 1.1)},      # stub processes
                                'exp': {1: (125, 0.8), 8: (190, 0.5), 64: (200, 0.5)}}})   # threads
    data.update(python_backend_mode='process', exp_mode='thread')
    assert (mode_kind(data, 'process'), mode_kind(data, 'thread')) == ('mini', 'exp')
    got = {(t['issue'], t['concurrency'], t['measure']): (t['num'][0], t['met']) for t in evaluate(data)}
    assert got[42, 1, 'rps'] == ('mini', True)              # 0.85x >= 0.8x
    assert got[42, 8, 'rps'] == ('mini', False)             # 1.1x < 1.2x
    assert got[42, 64, 'p99'] == ('mini', False)            # 1.1x Triton's p99
    assert got[14, 1, 'rps'] == ('exp', True)               # threads: 1.25x >= 1.2x
    assert got[14, 8, 'rps'] == ('exp', True) and (42, 1, 'p99') not in got   # issue 42 sets no p99 bar at c=1
    md = markdown(data)
    head = md.splitlines()[0]
    assert 'triton-mini req/s (process mode) | processes / Triton |' in head and 'triton-mini req/s (thread mode) | threads / Triton |' in head
    assert ('| identity FP32[1,16], JSON | 1 | 100 | 85 | 0.85× | 1.20× | 125 | 1.25× | 0.80× | '
            'threads req/s ≥ 1.2×: 1.25× met; threads p99 ≤ 1×: 0.80× met; stub processes req/s ≥ 0.8×: 0.85× met |') in md
    alone = dict(data); del alone['exp_mode']                # the same run without the thread-mode server's key
    assert all(t['issue'] == 42 for t in evaluate(alone)) and 'issue 42 targets |' in markdown(alone).splitlines()[0]
