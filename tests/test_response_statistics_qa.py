"""Triton's L0_response_statistics QA on triton-mini's statistics extension (`response_stats`: nbs/05_scheduler's
appendix "Response statistics", 07_server, the stub's reports in 04c_stub_process): its test.sh itself, run by bash.

The QA is NVIDIA's, read at test time from a git directory of triton-inference-server/server (`$TRITON_SERVER_REPO`,
tag v2.51.0) and never copied into the project. test.sh stages two decoupled models of Triton's test backend `square`:
square_int32 (CUSTOM_INFER_DELAY_NS 0.4 s, CUSTOM_OUTPUT_DELAY_NS 0.2 s, CUSTOM_FAIL_COUNT 2, CUSTOM_EMPTY_COUNT 1) and
square_int32_slow (1.2 s, 0.8 s, CUSTOM_CANCEL_DELAY_NS 0.4 s), starts the server once and runs
response_statistics_test.py: gRPC streams of 4, 6 and 3 responses to square_int32, then of 4 to square_int32_slow and
one of 4 it cancels after the first response; after each, the statistics of HTTP and gRPC must agree, and
`response_stats` must hold, per response index, the expected counts of compute_infer, compute_output, success, fail,
empty_response and cancel, each duration within 10 % of the model's delays times the count. It prints `*** Test Passed`
and exits 0 only when both cases pass.

What this module provides, as the QA container does:
- `$TRITON_DIR/backends/square/model.py`: Triton's `square` test backend (square_backend's src/square.cc, the
  container's libtriton_square.so) ported as a Python-based backend (tests/qa_backends/square), with its delays,
  simulated failures and empty responses, its cancellation check per response, and its reports to the response
  statistics (TRITONBACKEND_ModelInstanceReportResponseStatistics: 05_scheduler's `report_response_statistics`);
- `$TRITON_DIR/bin/tritonserver`, a script running `python -m triton_mini --backend-directory=$TRITON_DIR/backends`.
Adapted, and why: test.sh names its server `SERVER=/opt/tritonserver/bin/tritonserver` (the container's path); that one
line is rewritten to `${TRITON_DIR}/bin/tritonserver`. Nothing else changes.

Measured on branch stats (2026-12-07; test.sh about 30 s, on ports 38000-38002 in a copy whose clients and util.sh
were rewritten to them): the first run found the difference, now fixed: triton-mini's `response_stats` was always
empty, as a Python-backend model's is in Triton (python_backend never reports response statistics), but Triton's core
counts what a backend reports (core backend_model_instance.cc, infer_stats.cc) and triton-mini had no way to report.
It now has one (05_scheduler's appendix), which a model in a stub process reaches too (04c's appendix), and both cases
pass over HTTP and gRPC.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import qa_test_sh as qa
from triton_servers import default_ports

QA = 'qa/L0_response_statistics'
# client case: why it fails on triton-mini (test.sh still runs it; the test fails if another case fails, or this one passes)
KNOWN_FAILURES = {}


def stage(root:Path) -> Path:
    "qa/common and the QA under `root`, with a TRITON_DIR whose bin/tritonserver is triton-mini; the QA's folder."
    return qa.stage(root, QA)


@pytest.mark.slow
@pytest.mark.default_ports
def test_response_statistics_test_sh(tmp_path):
    """test.sh passes whole: both client cases, over HTTP and gRPC (while KNOWN_FAILURES is not empty: exactly those
    cases fail, and test.sh's other checks hold)."""
    where = stage(tmp_path)
    script = qa.container_server((where / 'test.sh').read_text())        # docstring
    with default_ports():
        rc, out = qa.run_bash(['-c', script], where, qa.environment(tmp_path), timeout=900)
    log = where / 'response_statistics_test.log'
    client = log.read_text() if log.exists() else ''
    report = f'{out[-6000:]}\nresponse_statistics_test.log:\n{client[-12000:]}'
    if not KNOWN_FAILURES:
        assert rc == 0 and '*** Test Passed\n' in out, report   # test.sh: echo -e "\n***\n*** Test Passed\n***"
    failed = {name for _, name in re.findall(r'^(FAIL|ERROR): (test_\w+)', client, re.M)}
    assert failed == set(KNOWN_FAILURES), report                       # the client cases: exactly the known ones fail
    assert '*** Failed to start' not in out, report                    # and test.sh's own check holds
