"""A short run of bench/soak.py (issue 26): 20 s of mixed good and hostile traffic over HTTP and gRPC against the
`triton-mini` command. Every good request answered right, every hostile one within tests/http_fuzz.py's and
tests/test_grpc_fuzz.py's promises, the server exits cleanly, and health stays answered under the load. The five-minute
run and its figures: bench/results/2026-12-04-reliability.md."""
import json, subprocess, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow
def test_short_soak(tmp_path):
    summary = tmp_path / 'summary.json'
    run = subprocess.run([sys.executable, str(ROOT / 'bench' / 'soak.py'), '--duration', '20', '--interval', '2', '--no-save',
                          '--summary', str(summary)], capture_output=True, text=True, timeout=240)
    assert summary.exists(), run.stdout[-3000:] + run.stderr[-3000:]
    s = json.loads(summary.read_text())
    assert (s['good_failures'], s['hostile_failures'], s['exit_code']) == (0, 0, 0), (s['failure_examples'], s['hostile_failure_examples'])
    assert s['good_requests'] > 500 and s['hostile_requests'] > 20
    assert s['rss_mb']['peak'] < s['rss_mb']['at_start'] + 500, s['rss_mb']     # no runaway: issue 26 row 2 was +252 MB a request
    for key in ('health_live_http', 'health_live_grpc'):                          # 30 s would be a failed poll
        assert s[key]['n'] > 50 and s[key]['max_ms'] < 5000, s[key]
    assert run.returncode == 0
