"""Triton's L0_rate_limiter QA on triton-mini's rate limiter (nbs/05d_rate_limiter): its test.sh itself, run by bash.

The QA is NVIDIA's, read at test time from a git directory of triton-inference-server/server (`$TRITON_SERVER_REPO`,
tag v2.51.0) and never copied into the project. test.sh runs whole and unchanged: it stages its models (qa/custom_models' `custom_zero_1_float32`, Triton's identity backend with `execute_delay_ms: 100`,
twice with different `rate_limiter` resources and priorities, and `custom_sequence_int32`), starts the server
(`$TRITON_DIR/bin/tritonserver`, through qa/common/util.sh's run_server) 13 times with `--rate-limit=execution_count`
and various `--rate-limit-resource` values, greps the logs of the four starts that must fail (`Resource count for
"resource1" is limited to 1 which will prevent scheduling ...`, `Resource "resource2" is present as both global and
device-specific resource ...`), runs rate_limiter_test.py's cases (cross-model prioritisation with limited and plenty
resources, one model with two instances, dynamic batching, a sequence) and compares the durations of the limited and
plenty runs; it prints `*** Test Passed ***` and exits 0 only when every check holds.

What this module provides, as the QA container does:
- `$TRITON_DIR/bin/tritonserver`: a script that runs `python -m triton_mini` with test.sh's arguments, after
  `--backend-directory=$TRITON_DIR/backends` (Triton's default backend directory, next to bin/);
- `$TRITON_DIR/backends/sequence/model.py`: Triton's QA test backend `sequence` (src/test/sequence, the container's
  libtriton_sequence.so) ported as a Python-based backend (tests/qa_backends/sequence);
- `qa/custom_models/custom_sequence_int32/1/`, which Dockerfile.QA makes (with the backend's library in it).
Adapted, and why: the instance groups test.sh appends say `kind: KIND_GPU`; with no GPU the core refuses that kind
(as Triton does without one) before the rate limiter sees it, so those `echo` lines write KIND_CPU. A CPU instance's
device-specific resources are those of device 0, as a GPU instance's on device 0 in NVIDIA's run. Its other
KIND_GPU (a `sed` on custom_sequence_int32, whose config says KIND_CPU) matches nothing in either run and is left.
The real Triton of the oracle has no identity backend: test.sh's own checks are the judge.

Measured on main (2026-12-07, 2 min 39 s with the default ports to itself): every expected load failure and its log
text, the cross-model prioritisation cases (limited and plenty resources), the two-instance cases and their durations,
and the sequence case pass. Its runs found three differences, now fixed: a batch which waited for its instance never
took the requests queued meanwhile (05d's `_grow` now does); two workers of one model each held a half-full batch
waiting for the rate limiter, splitting the arrivals, where Triton grows one payload at a time (05d's `_join`); and the
dynamic batcher ignored Triton's testing hook TRITONSERVER_DELAY_SCHEDULER (05's appendix). With those,
test_single_model_dynamic_batching's batches all leave at size 4, as the case expects, and test.sh passes whole.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import qa_test_sh as qa
from triton_servers import default_ports

# client case: why it fails on triton-mini (test.sh still runs it; the test fails if another case fails, or this one passes)
KNOWN_FAILURES = {}


def stage(root:Path) -> Path:
    """qa/common, qa/custom_models and qa/L0_rate_limiter under `root`, the version directory Dockerfile.QA makes for
    custom_sequence_int32, and a TRITON_DIR whose bin/tritonserver is triton-mini: (L0_rate_limiter's folder)."""
    qa.extract(root, 'qa/common', 'qa/custom_models', 'qa/L0_rate_limiter')
    (root / 'qa' / 'custom_models' / 'custom_sequence_int32' / '1').mkdir(parents=True, exist_ok=True)   # Dockerfile.QA's mkdir
    qa.triton_dir(root)
    return root / 'qa' / 'L0_rate_limiter'


@pytest.mark.slow
@pytest.mark.default_ports
def test_rate_limiter_test_sh(tmp_path):
    """test.sh passes whole: every expected load failure, every client case, the limited run slower than the plenty one
    (while KNOWN_FAILURES is not empty: exactly those client cases fail, and all of test.sh's other checks hold)."""
    where = stage(tmp_path)
    script = (where / 'test.sh').read_text().replace('echo "kind: KIND_GPU', 'echo "kind: KIND_CPU')   # docstring
    with default_ports():
        rc, out = qa.run_bash(['-c', script], where, qa.environment(tmp_path), timeout=1500)
    client = (where / 'client.log').read_text() if (where / 'client.log').exists() else ''
    report = f'{out[-6000:]}\nclient.log:\n{client[-6000:]}'
    if not KNOWN_FAILURES:
        assert rc == 0 and '*** Test Passed\n' in out, report   # test.sh: echo -e "\n***\n*** Test Passed\n***"
    failed = {name for _, name in re.findall(r'^(FAIL|ERROR): (test_\w+)', client, re.M)}
    assert failed == set(KNOWN_FAILURES), report                       # the client cases: exactly the known ones fail
    for mark in ('*** Failed. Expected error message', '*** Failed to start', 'Error: Test with limited resources',
                 '*** Unexpected success', 'Test Result Verification Failed'):
        assert mark not in out, report                                 # and every check of test.sh's own holds
