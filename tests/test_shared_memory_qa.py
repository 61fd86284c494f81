"""Triton's L0_shared_memory QA on triton-mini's system shared-memory extension (nbs/06a_shared_memory, the front ends
in 08_http and 08a_grpc/08e_grpc_extensions): its test.sh itself, run by bash.

The QA is NVIDIA's, read at test time from a git directory of triton-inference-server/server (`$TRITON_SERVER_REPO`,
tag v2.51.0) and never copied into the project. test.sh starts the server once per case and client type (http, grpc)
on `models/` and runs shared_memory_test.py's 14 SharedMemoryTest cases: creating, registering, re-registering and
unregistering regions (one, all), inferences of `simple` with inputs and outputs in shared memory (mixed with a raw
input, a too big input region, output windows out of bounds), registrations out of bounds, and a leak check of the
client library's create/destroy. Then it stages qa/python_models/execute_delayed_model (a Python model that sleeps
15 s) as `python_models/simple` and runs TestSharedMemoryUnregister's case over HTTP and gRPC: while an inference
reads two regions and writes two, unregistering them all and each one must be refused with Triton's texts, and both
must succeed after the response. It prints `*** Test Passed` and exits 0 only when every run passes.

What this module provides, as the QA container does:
- `models/simple`: Triton's example model `simple` (a TensorFlow graphdef in the container, made by its
  gen_qa_model scripts, not in git); the Python-backend stand-in `tests/models/triton_examples/simple` (same
  inputs, outputs and sums) is copied there, as tests/test_triton_examples.py copies it for tritonclient's examples;
- `$TRITON_DIR/bin/tritonserver`, a script running `python -m triton_mini --backend-directory=$TRITON_DIR/backends`.
test.sh finds the server as `${TRITON_DIR}/bin/tritonserver` itself (`$TRITON_DIR` is set to that folder).
Adapted, and why: its `pip3 install psutil` would install into this environment from the package registry; psutil
is one of triton-mini's own requirements (settings.ini), so that line is rewritten to `python3 -c 'import psutil'`
(the leak case still fails if psutil is missing). Nothing else changes. test.sh has no CUDA part at this tag (CUDA shared memory is L0_cuda_shared_memory's, which needs a GPU and
is not run).

Measured on branch shm (2026-12-08, test.sh about 3.5 min, on ports 38000-38002 in a copy whose clients and util.sh were rewritten to them):
the first run found one difference, now fixed: triton-mini let a client unregister regions an inference was using
(test_unregister_shm_during_inference_http and _grpc); Triton refuses, and so does triton-mini now (06a's `Lease`:
a region is in use from the request's decoding until its outputs are written). Everything else passes over HTTP and
gRPC but the known failure below, which is the client library's and not the server's.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import qa_test_sh as qa
from triton_servers import copy_models, default_ports

QA = 'qa/L0_shared_memory'
# (case, client type): why it fails on triton-mini (test.sh still runs it; the test fails if another case fails, or this one passes)
_CLIENT_2_73 = ("the installed tritonclient (2.73) says 'unable to create the shared memory region' for a region of "
                "size -1, where the case expects 2.51's 'unable to initialize the size': the client library's version, "
                "not the server (the case never reaches a server)")
KNOWN_FAILURES = {('test_invalid_create_shm', 'http'): _CLIENT_2_73, ('test_invalid_create_shm', 'grpc'): _CLIENT_2_73}


def stage(root:Path) -> Path:
    """qa/common, qa/L0_shared_memory and the model its test.sh copies (qa/python_models/execute_delayed_model) under
    `root`, `models/simple` (the stand-in, docstring) and a TRITON_DIR whose bin/tritonserver is triton-mini;
    returns the QA's folder."""
    qa.extract(root, 'qa/common', QA, 'qa/python_models/execute_delayed_model')
    copy_models(root / QA / 'models', 'triton_examples/simple')
    qa.triton_dir(root)
    return root / QA


def script(where:Path) -> str:
    "test.sh with the adaptation of the docstring."
    text = (where / 'test.sh').read_text()
    line = 'pip3 install psutil\n'
    assert line in text, 'test.sh no longer installs psutil'
    return text.replace(line, "python3 -c 'import psutil'\n")


def failures(where:Path) -> set:
    "{(case, client type)} that failed, from client.log's `Test: <case>, client type: <type>` blocks and the two unregister logs."
    failed = set()
    log = where / 'client.log'
    for block in re.split(r'^(?=Test: )', log.read_text() if log.exists() else '', flags=re.M):
        if (m := re.match(r'Test: (test_\w+), client type: (\w+)', block)) and re.search(r'^(FAIL|ERROR): ', block, re.M):
            failed.add((m[1], m[2]))
    for kind in ('http', 'grpc'):
        log = where / f'unregister_shm.{kind}.client.log'
        if not log.exists() or re.search(r'^(FAIL|ERROR): ', log.read_text(), re.M) or not re.search(r'^OK$', log.read_text(), re.M):
            failed.add((f'test_unregister_shm_during_inference_{kind}', kind))
    return failed


def logs(where:Path) -> str:
    return '\n'.join(f'{p.name}:\n{p.read_text()[-6000:]}' for p in sorted(where.glob('*client.log')))


@pytest.mark.slow
@pytest.mark.default_ports
@qa.ci_budget
def test_shared_memory_test_sh(tmp_path):
    """test.sh passes whole: all 14 cases and the unregister-during-inference case, over HTTP and gRPC (while
    KNOWN_FAILURES is not empty: exactly those runs fail, and test.sh's other checks hold)."""
    where = stage(tmp_path)
    with default_ports():
        rc, out = qa.run_bash(['-c', script(where)], where, qa.environment(tmp_path), timeout=1500)
    report = f'{out[-6000:]}\n{logs(where)}'
    if not KNOWN_FAILURES:
        assert rc == 0 and '*** Test Passed\n' in out, report   # test.sh: echo -e "\n***\n*** Test Passed\n***"
    assert failures(where) == set(KNOWN_FAILURES), report            # the client runs: exactly the known ones fail
    for mark in ('*** Failed to start', '*** Test Server shut down non-gracefully', '*** Test Result Verification Failed'):
        assert mark not in out, report                               # and test.sh's own checks hold
