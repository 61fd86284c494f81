"""Seeded HTTP fuzzing of a triton-mini process (issue 18): the corpus in tests/fuzz_corpus/http.jsonl, then
10,000 generated cases (tests/http_fuzz.py). Every answer must arrive within its deadline, carry no Python
exception name, and be a JSON `{"error": ...}` when it is an error, with no 5xx but Triton's own; at the end
the server is still healthy and its memory did not grow. Failing cases are written to
tests/artifacts/fuzz_failures.jsonl, ready to be added to the corpus. `bench/fuzz_http.py` runs longer.

    FUZZ_SEED=7 FUZZ_CASES=50000 pytest tests/test_http_fuzz.py     # another seed, more cases
"""
import os, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import http_fuzz
from triton_servers import MiniProcess

ARTIFACTS = Path(__file__).resolve().parent / 'artifacts'
SEED, N = int(os.environ.get('FUZZ_SEED', 18)), int(os.environ.get('FUZZ_CASES', 10_000))


def run_cases(port, cases, workers=4) -> list:
    "Send every case (several at a time); returns [(case, what went wrong)]."
    def one(case):
        try:
            status, body = http_fuzz.send(port, case)
            http_fuzz.check(case, status, body)
        except (AssertionError, TimeoutError) as e: return case, str(e)
        except OSError as e: return case, f'connection failed: {e!r}'
        return None
    with ThreadPoolExecutor(workers) as pool:
        return [f for f in pool.map(one, cases) if f is not None]


@pytest.mark.slow
def test_fuzz_http(tmp_path):
    repo = http_fuzz.repository(tmp_path / 'models')
    s = MiniProcess(repo, '--http-header-timeout-secs=10', '--http-body-timeout-secs=10', grpc=False)
    try:
        log_before = len(s.lines)
        failures = run_cases(s.http_port, http_fuzz.corpus())
        generated = list(http_fuzz.cases(SEED, N))
        failures += run_cases(s.http_port, generated[:N // 10])
        rss_warm = s.rss()
        failures += run_cases(s.http_port, generated[N // 10:])
        growth = s.rss() - rss_warm
        if failures:
            ARTIFACTS.mkdir(exist_ok=True)
            (ARTIFACTS / 'fuzz_failures.jsonl').write_text(''.join(c.to_json() + '\n' for c, _ in failures))
        assert not failures, f'{len(failures)} failing cases, e.g. {failures[0][1]} for {failures[0][0].wire()[:300]!r}'
        assert s.request('GET', '/v2/health/ready')[0] == 200
        assert s.request('POST', '/v2/models/add_sub/infer', {'inputs': [
            {'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]},
            {'name': 'INPUT1', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 1, 1, 1]}]})[0] == 200
        assert growth < 64 << 20, f'RSS grew by {growth >> 20} MB over {N - N // 10} cases'
        logged = s.lines[log_before:]
        assert len(logged) < 50, f'{len(logged)} log lines for {N} cases:\n' + '\n'.join(logged[:20])
    finally: assert s.stop() == 0


@pytest.mark.slow
def test_fuzz_http_heavy(tmp_path):
    "Issue 26's shapes (many BYTES elements, big bad JSON, NaN, deep nesting, deep file: keys), seeded; health stays fast."
    from triton_servers import request
    repo = http_fuzz.repository(tmp_path / 'models')
    s = MiniProcess(repo, '--http-header-timeout-secs=10', '--http-body-timeout-secs=10', grpc=False)
    waits, done = [], threading.Event()
    def poll():
        while not done.is_set():
            t = time.perf_counter()
            assert request(s.http_port, 'GET', '/v2/health/live', timeout=30)[0] == 200
            waits.append(time.perf_counter() - t)
            time.sleep(0.01)
    try:
        cases = list(http_fuzz.heavy_cases(SEED, int(os.environ.get('FUZZ_HEAVY_CASES', 40))))
        failures = run_cases(s.http_port, cases[:4], workers=2)
        rss_warm = s.rss()
        t = threading.Thread(target=poll); t.start()
        time.sleep(2); quiet, n_quiet = max(waits), len(waits)   # the machine's own noise first (the poller alone): the bound sits on top of it
        try: failures += run_cases(s.http_port, cases[4:], workers=2)
        finally: done.set(); t.join()
        growth = s.rss() - rss_warm
        assert not failures, f'{len(failures)} failing cases, e.g. {failures[0][1]} for {failures[0][0].note}'
        assert s.request('GET', '/v2/health/ready')[0] == 200
        assert growth < 200 << 20, f'RSS grew by {growth >> 20} MB over {len(cases) - 4} heavy cases'
        # a loop blocked by the heavy cases slows a check for each case it chews on (36 here), or one for seconds; a
        # check past the bound now and then is the machine (two loaded cores: 514 ms once, 928 and 628 ms in one run at
        # load 12), so one in ten heavy cases is allowed, each under 2 s
        slow = sorted((w for w in waits[n_quiet:] if w >= 0.5 + quiet), reverse=True)
        allowed = max(1, (len(cases) - 4) // 10)
        assert len(slow) <= allowed and (not slow or slow[0] < 2), f'health checks of {[round(w * 1000) for w in slow[:10]]} ms during the heavy cases ({quiet * 1000:.0f} ms quiet)'
    finally: assert s.stop() == 0
