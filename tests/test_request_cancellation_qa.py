"""Triton's L0_request_cancellation QA on triton-mini's cancellation path (nbs/05_scheduler, 05b_sequence_batcher,
06_ensemble, 08a_grpc, 09_metrics, 04e_pytorch_backend): its test.sh itself, run by bash.

The QA is NVIDIA's, read at test time from a git directory of triton-inference-server/server (`$TRITON_SERVER_REPO`,
tag v2.51.0) and never copied into the project. test.sh runs whole: it makes its models with `echo` (Triton's identity
backend with `execute_delay_ms`, which triton-mini's identity backend honours) and starts the server 7 times:
- gRPC cancellation (grpc_cancellation_test.py, `custom_identity_int32`, execute_delay_ms 10000, one server per case,
  `--log-verbose=1`): async_infer's future cancelled, a stream stopped with `cancel_requests`, grpc.aio's unary call and
  stream cancelled; each must end within 5 s, and test.sh greps each server log for "Cancellation notification received
  for" (triton-mini's gRPC front end writes that line, in Triton's words, when a client's cancel reaches a call:
  08a's `log_cancelled`; it states a real event, followed by the model's name where Triton prints call-state ids);
- the schedulers (scheduler_test.py, `--log-verbose=2`, execute_delay_ms 6000): a request queued in the dynamic
  batcher, a backlogged sequence, requests queued behind a running sequence request (direct and oldest), an ensemble's
  request and two streamed sequences, each cancelled by the client, answered CANCELLED, and counted by
  `nv_inference_request_failure{...,reason="CANCELED"}`;
- implicit state (implicit_state_test.py, the QA's own TorchScript model `implicit_state_model/model.pt` on
  triton-mini's PyTorch backend): a cancelled sequence's slot is reset, and the log never says "Invalid sequence state".
It prints `*** Test Passed` and exits 0 only when every check holds.

What this module provides, as the QA container does: `$TRITON_DIR/bin/tritonserver`, a script running
`python -m triton_mini` with test.sh's arguments. Adapted, and why (the only rewrites):
- test.sh names its server `SERVER=/opt/tritonserver/bin/tritonserver` (the container's path); that line becomes
  `${TRITON_DIR}/bin/tritonserver`;
- its first part runs `./request_cancellation_test`, a C++ unit-test binary built against Triton's in-process C API
  (TRITONSERVER_InferenceRequestCancel and friends, on the `model` it stages). triton-mini has no C API, so the binary
  has no counterpart here; that one command line becomes `true` (its models/ folder is still made, and replaced by the
  next part as in NVIDIA's run).

Known failure (KNOWN_FAILURES): test_grpc_async_infer_cancellation_at_step_start judges Triton's C++ gRPC state machine
from its verbose log: before any request it wants exactly 2 lines "New request handler for ModelInferHandler" (the
call-state objects Triton's completion-queue threads pre-create), and after a cancel sent during
TRITONSERVER_DELAY_GRPC_PROCESS 2 lines "Cancellation notification received for ModelInferHandler, rpc_ok=1, context
N, M step START" (its state objects' ids and step). triton-mini has no such objects and does not fake their lines (as
tests/test_grpc_state_cleanup_qa.py does not fake StateNew/StateRelease); the case fails at its first assertion, before
it sends a request, so test.sh's grep of that server log finds no cancellation either. Both marks name that case.

Measured on branch cancel (2026-12-07, ports rewritten to 18000-18002 in a scratch copy; test.sh about 2 min): every
other case passes. The first run found two differences, now fixed: cancelling one queued request of a sequence left the
sequence's other queued (or backlogged) requests unanswered, where Triton's sequence batcher cancels the whole sequence
(core's SequenceBatchScheduler: a cancelled request at a slot's front releases the slot and cancels what is queued
behind it; a backlogged sequence with a cancelled request is cancelled whole): 05b's `SequenceBatcher.cancel`; and
triton-mini's gRPC front end wrote no line when a client cancelled (08a's `log_cancelled`).
"""
from __future__ import annotations

import os, re, signal, subprocess, sys
from pathlib import Path

import pytest

import qa_test_sh as qa
import triton_python_qa as pyqa
from test_libtorch_qa import missing as libtorch_missing
from triton_servers import default_ports, popen, skip_or_fail

QA = 'qa/L0_request_cancellation'
TAG = pyqa.TAG
# client case: why it fails on triton-mini (test.sh still runs it; the test fails if another case fails, or this one passes)
KNOWN_FAILURES = {
    'test_grpc_async_infer_cancellation_at_step_start':
        "counts Triton's C++ gRPC state-machine log lines ('New request handler for ModelInferHandler', a cancellation "
        "'... context N, M step START'), which triton-mini has no counterpart for and does not fake (docstring)"}
UNIT_TEST = 'LD_LIBRARY_PATH=/opt/tritonserver/lib:$LD_LIBRARY_PATH ./request_cancellation_test > $SERVER_LOG\n'


def stage(root:Path) -> Path:
    """qa/common and qa/L0_request_cancellation under `root`, and a TRITON_DIR whose bin/tritonserver is triton-mini;
    returns L0_request_cancellation's folder."""
    if why := pyqa.missing(): skip_or_fail('python_qa', why)   # the judge of the QA read through $TRITON_SERVER_REPO, as in test_rate_limiter_qa
    if why := libtorch_missing(): skip_or_fail('libtorch_qa', why)   # implicit_state_test: the QA's TorchScript model
    tar = subprocess.run(['git', f'--git-dir={pyqa.SERVER_REPO}', 'archive', '--format=tar', TAG, 'qa/common', QA],
                         capture_output=True, check=True).stdout
    subprocess.run(['tar', '-x', '-C', str(root)], input=tar, check=True)
    server = root / 'tritonserver' / 'bin' / 'tritonserver'
    server.parent.mkdir(parents=True)
    server.write_text(f'#!/bin/sh\nexec {sys.executable} -m triton_mini "$@"\n')
    server.chmod(0o755)
    return root / QA


def script(where:Path) -> str:
    "test.sh with the docstring's two rewrites."
    sh = (where / 'test.sh').read_text()
    for line in ('SERVER=/opt/tritonserver/bin/tritonserver\n', UNIT_TEST): assert line in sh, line
    return (sh.replace('SERVER=/opt/tritonserver/bin/tritonserver\n', 'SERVER=${TRITON_DIR}/bin/tritonserver\n')
              .replace(UNIT_TEST, 'true   # request_cancellation_test: Triton C API unit tests, no triton-mini counterpart\n'))


def failed_cases(out:str) -> set:
    "The client cases test.sh reports failing: its own marks per gRPC case, and the unittest reports it prints on failure."
    return (set(re.findall(r'^\*\*\* (?:gRPC Cancellation Tests Failed|Cancellation not received by server) on (test_\w+)$', out, re.M))
            | set(re.findall(r'^(?:FAIL|ERROR): (test_\w+)', out, re.M)))


@pytest.mark.slow
@pytest.mark.default_ports
@qa.ci_budget
def test_request_cancellation_test_sh(tmp_path):
    """test.sh passes whole but for the known failures: exactly those client cases fail, and test.sh's other checks hold
    (no failed start, the scheduler and implicit-state clients pass); with none known, it prints `*** Test Passed`."""
    where = stage(tmp_path)
    env = {**os.environ, 'NVIDIA_TRITON_SERVER_VERSION': '24.10', 'TRITON_DIR': str(tmp_path / 'tritonserver'),
           'PATH': f'{Path(sys.executable).parent}{os.pathsep}{os.environ["PATH"]}',   # python: this interpreter, with tritonclient
           'PYTHONPATH': os.pathsep.join(p for p in (str(Path(__file__).parents[1]), os.environ.get('PYTHONPATH')) if p)}
    env.pop('TRITONSERVER_DELAY_GRPC_PROCESS', None)
    with default_ports():
        run = popen(['bash', '-c', script(where)], cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try: out, _ = run.communicate(timeout=1200)
        except subprocess.TimeoutExpired:
            os.killpg(run.pid, signal.SIGKILL); out, _ = run.communicate()
    logs = '\n'.join(f'{p.name}:\n{p.read_text()[-3000:]}' for p in sorted(where.glob('*.log')) if not p.name.endswith('.server.log'))
    report = f'{out[-6000:]}\nclient logs:\n{logs[-12000:]}'
    if not KNOWN_FAILURES:
        assert run.returncode == 0 and '*** Test Passed\n' in out, report   # test.sh: echo -e "\n***\n*** Test Passed\n***"
    assert failed_cases(out) == set(KNOWN_FAILURES), report            # the client cases: exactly the known ones fail
    for mark in ('*** Failed to start', '*** Unit Tests Failed', '*** Scheduler Tests Failed', '*** Implicit State Tests Failed'):
        assert mark not in out, report                                 # and every other check of test.sh's own holds
