"""Triton's L0_batch_input QA (ragged batching: batch inputs, ragged inputs, a scattered batch output) on triton-mini's
ONNX Runtime and PyTorch backends, run the way its test.sh runs it.

The QA is NVIDIA's, read at test time from a git directory of triton-inference-server/server (`$TRITON_SERVER_REPO`,
tag v2.51.0, as tests/test_libtorch_qa.py) and never copied into the project. Its models come from the QA's own
generators, run unchanged into a temporary `$DATADIR`: `qa/common/gen_qa_ragged_models.py` (qa_ragged_model_repository:
`<backend>_batch_input`, `<backend>_batch_item`) and `qa/common/gen_qa_identity_models.py` (qa_identity_model_repository:
`<backend>_nobatch_zero_1_float32`, the identity model behind `ragged_io`). For each backend, test.sh's own loop body
(read from the script, run by bash with `$BACKEND`, `$DATADIR` and `$IDENTITY_DATADIR`) copies and edits the five models
(`ragged_element_count_acc_zero`, `ragged_acc_shape`, `batch_item_flatten`, `batch_item`, `ragged_io`); the server
serves them on the default ports (the client hard-codes gRPC on localhost:8001), and `batch_input_test.py` runs
unchanged with `-v`, so each of its 8 tests reports its own verdict. Every test sends 3 or 4 requests of different
shapes on one stream and relies on the dynamic batcher (max_queue_delay 1 s, max_batch_size 4) putting them into one
execution: the expected values are those of the whole batch.

Not run, and why: test.sh's `savedmodel` and `plan` backends (triton-mini has neither TensorFlow nor TensorRT). No
adaptation is needed: these generators write no instance_group. The real Triton of the oracle has neither backend:
the QA's checks are the judge.
"""
from __future__ import annotations

import importlib.util, io, os, re, shutil, subprocess, sys, tarfile
from pathlib import Path

import pytest

import triton_python_qa as pyqa
from test_libtorch_qa import SERVER_REPO, TAG, missing as libtorch_missing
from triton_servers import skip_or_fail

BACKENDS = ('onnx', 'libtorch')
GENERATORS = {'qa_ragged_model_repository': 'gen_qa_ragged_models.py', 'qa_identity_model_repository': 'gen_qa_identity_models.py'}
TESTS = ('test_ragged_output', 'test_ragged_input', 'test_element_count', 'test_accumulated_element_count',
         'test_accumulated_element_count_with_zero', 'test_max_element_count_as_shape', 'test_batch_item_shape_flatten',
         'test_batch_item_shape')


def missing(backend:str) -> str | None:
    "None when the QA can run for `backend` here, else why not."
    if importlib.util.find_spec('onnx') is None: return "Triton's batch-input QA makes its ONNX models with onnx: pip install onnx"
    if backend == 'libtorch': return libtorch_missing()
    r = subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'rev-parse', '--verify', '-q', f'{TAG}^{{commit}}'], capture_output=True)
    if r.returncode:
        return (f"Triton's batch-input QA is read from a git directory of triton-inference-server/server with tag {TAG}: "
                f'$TRITON_SERVER_REPO ({SERVER_REPO}) is not one')
    return None


def backend_loop_body(sh:str) -> str:
    "What test.sh's `for BACKEND in $BACKENDS` does before `run_server`: copy the models and edit their configs."
    return re.search(r'^for BACKEND in \$BACKENDS; do\n(.*?)^\s*run_server$', sh, re.M | re.S).group(1)


@pytest.fixture(scope='module')
def qa_data(tmp_path_factory):
    "qa/common and qa/L0_batch_input at TAG, and $DATADIR made by the QA's generators: (qa, data)."
    if why := missing('onnx'): skip_or_fail('libtorch_qa', why)
    root = tmp_path_factory.mktemp('batch-input-qa')
    tar = subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'archive', '--format=tar', TAG, 'qa/common', 'qa/L0_batch_input'],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t: t.extractall(root, filter='data')
    qa, data = root / 'qa', root / 'data'
    frameworks = ['--onnx'] + (['--libtorch'] if missing('libtorch') is None else [])
    for repo, script in GENERATORS.items():
        gen = subprocess.run([sys.executable, script, *frameworks, f'--models_dir={data / repo}'],
                             cwd=qa / 'common', capture_output=True, text=True, timeout=900)
        assert gen.returncode == 0, f'{script} failed:\n{gen.stdout[-2000:]}\n{gen.stderr[-4000:]}'
    return qa, data


@pytest.fixture(scope='module', params=BACKENDS)
def batch_input_run(request, qa_data):
    "L0_batch_input staged for one backend as test.sh stages it, served, its client run once: {test: outcome}, report."
    backend = request.param
    if why := missing(backend): skip_or_fail('libtorch_qa', why)
    qa, data = qa_data
    where = qa / 'L0_batch_input'
    made = subprocess.run(['bash', '-e', '-c', backend_loop_body((where / 'test.sh').read_text())], cwd=where,
                          env={**os.environ, 'BACKEND': backend, 'DATADIR': str(data / 'qa_ragged_model_repository'),
                               'IDENTITY_DATADIR': str(data / 'qa_identity_model_repository')},
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, f"test.sh's loop body failed for {backend}:\n{made.stderr}"
    return pyqa.served_unittest(where / 'models', where, ['batch_input_test.py'], grpc=True)   # the client's gRPC: localhost:8001


@pytest.mark.slow
@pytest.mark.default_ports
@pytest.mark.parametrize('test', TESTS)
def test_mini_passes_batch_input_qa(batch_input_run, test):
    pyqa.passed(batch_input_run, test)


def test_tests_and_loop_follow_the_qa():
    "TESTS are the client's tests, as many as test.sh expects; the loop body stages the five models the client names."
    if why := missing('onnx'): skip_or_fail('libtorch_qa', why)
    show = lambda path: subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'show', f'{TAG}:{path}'],
                                       capture_output=True, text=True, check=True).stdout
    client, sh = show('qa/L0_batch_input/batch_input_test.py'), show('qa/L0_batch_input/test.sh')
    assert tuple(re.findall(r'def (test_\w+)', client)) == TESTS
    assert f'EXPECTED_NUM_TESTS="{len(TESTS)}"' in sh
    staged = set(re.findall(r'models/(\w+)\b', backend_loop_body(sh)))
    assert staged == set(re.findall(r'model_name = "(\w+)"', client))
