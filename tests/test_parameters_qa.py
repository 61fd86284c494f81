"""Triton's L0_parameters QA on request parameters and header forwarding (nbs/08_http, 08a_grpc, 08e_grpc_extensions,
06_ensemble, 04a_python_backend; the pattern itself in 07_server's `header_forward_regex`): its test.sh itself, run by bash.

The QA is NVIDIA's, read at test time from a git directory of triton-inference-server/server (`$TRITON_SERVER_REPO`,
tag v2.51.0) and never copied into the project. test.sh runs whole: its model repository holds `parameter` (a Python
model with no config.pbtxt, completed by its `auto_complete_config`, answering a request's parameters as two string
tensors, `key` and `value`), `identity` (Triton's identity backend) and `ensemble` (identity, then parameter). It
starts the server four times, `--exit-timeout-secs=120` and, by run: no header forwarding (test_params); `--grpc-` and
`--http-header-forward-pattern my_header.*` (test_headers); both `MY_HEADER.*` (case-insensitive: the lower-case
headers are forwarded); only gRPC's, `(?-i)MY_HEADER.*` (case-sensitive: gRPC's lower-case metadata keys are not).
Against each, parameters_test.py (TEST_HEADER names the run) sends string, int, float and bool parameters with five
headers, over HTTP and gRPC, sync, async, asyncio and a gRPC stream, and through the ensemble: the model must see the
parameters and exactly the headers the pattern forwards; a parameter named `triton_...` must be refused (the prefix
is Triton's). It prints `*** Test Passed` and exits 0 only when every run passes.

What this module provides, as the QA container does: `$TRITON_DIR/bin/tritonserver`, a script running `python -m
triton_mini --backend-directory=$TRITON_DIR/backends` (triton-mini's built-in identity backend serves `identity`).
Adapted, and why: test.sh names its server `SERVER=/opt/tritonserver/bin/tritonserver` (the container's path); that
one line is rewritten to `${TRITON_DIR}/bin/tritonserver`. Nothing else changes.

Measured on branch params (2026-12-07; test.sh about 10 s, its ports rewritten to 48000-48002 for the measure): the
first run found one difference, now fixed: the fourth start failed, `Bad option: "--grpc-header-forward-pattern".
invalid regular expression`, since Python's `re` takes no `(?-i)` outside a scoped group. Triton's command line puts
`(?i)` before the pattern and compiles it with RE2, where `(?-i)` turns the case-insensitivity off for the rest of the
pattern (Triton's docs/protocol/extension_parameters.md say so). triton-mini now reads the pattern that way
(07_server's `header_forward_regex`, used by both front ends and the command line), and every case of every run passes.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import qa_test_sh as qa
from triton_servers import default_ports

QA = 'qa/L0_parameters'
# run (test.sh's TEST_HEADER) -> {client case: why it fails on triton-mini} (test.sh still runs it; the test fails if
# another case fails, or this one passes)
KNOWN_FAILURES = {'test_params': {}, 'test_headers': {}, 'test_header_forward_pattern_case_insensitive': {},
                  'test_grpc_header_forward_pattern_case_sensitive': {}}


def stage(root:Path) -> Path:
    "qa/common and the QA under `root`, with a TRITON_DIR whose bin/tritonserver is triton-mini; the QA's folder."
    return qa.stage(root, QA)


def failures_by_run(script:str, out:str) -> dict:
    """{run: failed client cases} from test.sh's output: util.sh's run_server prints `=== Running $SERVER ...` before
    each start (the runs of test.sh's `all_tests`, in order), and test.sh prints client.log when a run fails."""
    runs = re.search(r'^all_tests=\(([^)]*)\)', script, re.M)[1].split()
    runs = [r.strip('"') for r in runs]
    parts = re.split(r'^=== Running .*$', out, flags=re.M)[1:]
    return {run: set(re.findall(r'^(?:FAIL|ERROR): (test_\w+)', part, re.M))
                 | ({'(parameters_test.py failed)'} if '*** Test Failed\n' in part else set())   # test.sh's own verdict
            for run, part in zip(runs, parts)}


@pytest.mark.slow
@pytest.mark.default_ports
def test_parameters_test_sh(tmp_path):
    """test.sh passes whole: every server start, every client case of every run (while KNOWN_FAILURES is not all
    empty: exactly those client cases fail, and test.sh's other checks hold)."""
    where = stage(tmp_path)
    script = qa.container_server((where / 'test.sh').read_text())        # docstring
    with default_ports():
        rc, out = qa.run_bash(['-c', script], where, qa.environment(tmp_path), timeout=900)
    client = (where / 'client.log').read_text() if (where / 'client.log').exists() else ''
    report = f'{out[-12000:]}\nclient.log (the last run):\n{client[-6000:]}'
    assert '*** Failed to start' not in out, report                    # every start, the (?-i) pattern's included
    failed = failures_by_run(script, out)
    assert set(failed) == set(KNOWN_FAILURES), report                   # every run of all_tests ran
    if not any(KNOWN_FAILURES.values()):
        assert rc == 0 and '*** Test Passed\n' in out, report   # test.sh: echo -e "\n***\n*** Test Passed\n***"
    expected = {run: set(cases) | ({'(parameters_test.py failed)'} if cases else set()) for run, cases in KNOWN_FAILURES.items()}
    assert failed == expected, report                                  # exactly the known ones fail, and only their runs
