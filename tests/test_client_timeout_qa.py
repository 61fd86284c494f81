"""Triton's L0_client_timeout QA on triton-mini (its gRPC and HTTP front ends answering clients that give up, and
Triton's testing hook TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC, nbs/08e_grpc_extensions' appendix): the Python
library cases of its test.sh, run the way test.sh runs them.

The QA is NVIDIA's, read at test time from a git directory of triton-inference-server/server (`$TRITON_SERVER_REPO`,
tag v2.51.0) and never copied into the project. Its model, models/custom_identity_int32, is the identity backend with
`execute_delay_ms: 3000` (triton-mini's identity backend honours it); test.sh makes its version directory.

What runs, as test.sh runs it:
- CASE 3 ("Python Library"): a server with `--model-repository=$DATADIR --log-verbose 2`, then
  client_infer_timeout_test.py's five cases (gRPC sync, async and stream, HTTP sync and async): a 0.2-2 s timeout
  must fail with gRPC's `Deadline Exceeded` or the socket's `timed out` while the model takes 3 s, and a long one
  must return the input. test.sh runs each case as its own client process; here one process runs the five, with -v
  for each case's verdict.
- "Test all APIs other than infer": `TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC=2` in the server's environment,
  `--model-control-mode=explicit --load-model=custom_identity_int32 --log-verbose 2`, and
  client_non_infer_timeout_test.py's cases (live, ready, metadata, config, statistics, the repository, log and trace
  settings, shared-memory status and registration): each call made with a 0.1 s timeout must fail with
  `Deadline Exceeded`, and succeed with 5 s. One case is not run: `test_grpc_register_cuda_shared_memory`'s client
  makes a CUDA shared-memory region first, which needs a GPU on the client's machine (NEEDS_GPU).
Not run, and why: CASE 1 and CASE 2 and the first server's checks run `../clients/client_timeout_test`, a C++ program
built from the client repository's C++ library (src/c++/tests/client_timeout_test.cc), which no package provides; so
test.sh cannot run whole here.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import qa_test_sh as qa
import triton_python_qa as pyqa
from triton_servers import skip_or_fail

QA = 'qa/L0_client_timeout'
# cases the client cannot run on this machine, whatever the server: not run (the others are named to unittest)
NEEDS_GPU = {'test_grpc_register_cuda_shared_memory': 'the client first makes a CUDA shared-memory region '
             '(tritonclient.utils.cuda_shared_memory: cudaGetDevice), which needs a GPU and its driver'}
INFER_CASES = ('test_grpc_infer', 'test_grpc_async_infer', 'test_grpc_stream_infer', 'test_http_infer', 'test_http_async_infer')


def stage(root:Path) -> Path:
    "qa/common and qa/L0_client_timeout under `root`, with the version directory test.sh makes; that folder."
    qa.extract(root, 'qa/common', QA)
    where = root / QA
    (where / 'models' / 'custom_identity_int32' / '1').mkdir(parents=True, exist_ok=True)   # test.sh: mkdir -p
    return where


def all_passed(report:str, n:int) -> bool:
    """unittest's own verdict on the client's `n` cases: `Ran n tests` and `OK`. (Its per-case -v lines are no
    judge here: the HTTP async case's timed-out greenlet prints its traceback in the middle of its line.)"""
    return re.search(rf'^Ran {n} tests? in [\d.]+s\n\nOK$', report, re.M) is not None and not pyqa.unittest_failures(report)


@pytest.mark.slow
@pytest.mark.default_ports
@qa.ci_budget
def test_python_library_cases(tmp_path):
    "test.sh's CASE 3: the five infer cases against one server, each `ok`."
    where = stage(tmp_path)
    _, report = pyqa.served_unittest(where / 'models', where, ['client_infer_timeout_test.py',
                                     *(f'ClientInferTimeoutTest.{c}' for c in INFER_CASES)], '--log-verbose=2', grpc=True, timeout=300)
    assert all_passed(report, len(INFER_CASES)), report[-9000:]


@pytest.mark.slow
@pytest.mark.default_ports
@qa.ci_budget
def test_non_infer_apis_answer_late(tmp_path):
    "test.sh's last server: every RPC but inference answers 2 s late; each case `ok`, and the log says why."
    where = stage(tmp_path)
    cases = [c for c in re.findall(r'def (test_\w+)', (where / 'client_non_infer_timeout_test.py').read_text()) if c not in NEEDS_GPU]
    client, server = pyqa.serve_and_run(where / 'models', where, ['client_non_infer_timeout_test.py', '-v',
                                        *(f'ClientNonInferTimeoutTest.{c}' for c in cases)],
                                        '--model-control-mode=explicit', '--load-model=custom_identity_int32', '--log-verbose=2',
                                        grpc=True, server_env={'TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC': '2'}, timeout=300)
    report = client.stdout + client.stderr
    assert len(cases) >= 19 and all_passed(report, len(cases)), f'{report[-9000:]}\nserver log:\n{server.log()[-3000:]}'
    assert 'Delaying the write of the response by 2 seconds' in server.log()


def test_not_run_is_only_the_cpp_client():
    "What this module leaves out of test.sh is the C++ client's lines, and the Python cases it runs are test.sh's."
    if why := pyqa.missing(): skip_or_fail('python_qa', why)
    sh = pyqa._git(pyqa.SERVER_REPO, 'show', f'{pyqa.TAG}:{QA}/test.sh').decode()
    assert re.search(r'^for i in (.*?); do$', sh, re.M | re.S).group(1).replace('\\', ' ').split() == list(INFER_CASES)
    assert 'export TRITONSERVER_SERVER_DELAY_GRPC_RESPONSE_SEC=2' in sh
    python_lines = [l for l in sh.splitlines() if l.lstrip().startswith('python ')]
    assert python_lines == ['    python $CLIENT_INFER_TIMEOUT_TEST ClientInferTimeoutTest.$i >>$CLIENT_LOG 2>&1',
                            'python $CLIENT_NON_INFER_TIMEOUT_TEST >>$CLIENT_LOG 2>&1']
