"""Triton's L0_implicit_state QA on triton-mini's ONNX Runtime and PyTorch backends: the cases that need no custom
backend and no GPU, run the way its test.sh runs them.

The QA is NVIDIA's, read at test time from a git directory of triton-inference-server/server (`$TRITON_SERVER_REPO`,
tag v2.51.0, as tests/test_libtorch_qa.py) and never copied into the project. Its models come from the QA's own
generator, `qa/common/gen_qa_implicit_models.py --onnx --libtorch`, run unchanged (qa_sequence_implicit_model_repository
in a temporary folder). test.sh's own loop over `$BACKENDS` (read from the script, run by bash with `BACKENDS="onnx
libtorch"`) copies `<backend>_nobatch_sequence_int32` and makes its `_output` twin, whose config also lists the state's
output. The client, `implicit_state.py`, runs unchanged with the same `BACKENDS`, its two tests that use these
models: `test_request_output_not_allowed` (asking for the state's output of a model that does not list it fails with
"unexpected inference output") and `test_request_output` (a model that lists it returns it). Each test reports its own
verdict (`-v`).

Not run, and why: test.sh's `plan` backend (TensorRT needs a GPU); the other five tests of implicit_state.py use models
of a custom C++ backend (`libtriton_implicit_state.so`, built from qa/L0_implicit_state's sources in Triton's build)
that triton-mini cannot load, so their model folders are left out of the staged repository; test.sh's second half,
L0_sequence_batcher with IMPLICIT_STATE=1, is a suite of its own. One adaptation, as in L0_libtorch_io_types: the
generator writes `instance_group [{ kind: KIND_GPU }]`; with no GPU the core refuses it before the backend sees the
config, so the staged copies say KIND_CPU. The real Triton of the oracle has neither backend: the QA's checks are the
judge.
"""
from __future__ import annotations

import importlib.util, io, os, re, shutil, subprocess, sys, tarfile
from pathlib import Path

import pytest

import triton_python_qa as pyqa
from test_libtorch_qa import ON_CPU, SERVER_REPO, TAG, missing as libtorch_missing
from triton_servers import skip_or_fail

BACKENDS = 'onnx libtorch'
TESTS = ('test_request_output_not_allowed', 'test_request_output')


def missing() -> str | None:
    if importlib.util.find_spec('onnx') is None: return "Triton's implicit-state QA makes its ONNX models with onnx: pip install onnx"
    return libtorch_missing()


def backend_loop(sh:str) -> str:
    "test.sh's `for BACKEND in $BACKENDS; do ... done`: what copies and edits the models."
    return re.search(r'^for BACKEND in \$BACKENDS; do\n.*?^done$', sh, re.M | re.S).group(0)


@pytest.fixture(scope='module')
def implicit_state_run(tmp_path_factory):
    "L0_implicit_state staged as test.sh stages it, served on port 8000, its client run once: {test: outcome}, report."
    if why := missing(): skip_or_fail('libtorch_qa', why)
    root = tmp_path_factory.mktemp('implicit-state-qa')
    tar = subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'archive', '--format=tar', TAG, 'qa/common', 'qa/L0_implicit_state'],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t: t.extractall(root, filter='data')
    qa, data = root / 'qa', root / 'data'
    gen = subprocess.run([sys.executable, 'gen_qa_implicit_models.py', '--onnx', '--libtorch',
                          f'--models_dir={data / "qa_sequence_implicit_model_repository"}'],
                         cwd=qa / 'common', capture_output=True, text=True, timeout=900)
    assert gen.returncode == 0, f'gen_qa_implicit_models.py failed:\n{gen.stdout[-2000:]}\n{gen.stderr[-4000:]}'
    where = qa / 'L0_implicit_state'
    shutil.rmtree(where / 'models')   # the custom backend's models (module docstring)
    (where / 'models').mkdir()
    made = subprocess.run(['bash', '-e', '-c', backend_loop((where / 'test.sh').read_text())], cwd=where,
                          env={**os.environ, 'BACKENDS': BACKENDS, 'DATADIR': str(data)}, capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, f"test.sh's loop failed:\n{made.stderr}"
    for config in (where / 'models').glob('*/config.pbtxt'): config.write_text(config.read_text().replace(*ON_CPU))
    return pyqa.served_unittest(where / 'models', where, ['implicit_state.py', *(f'ImplicitStateTest.{t}' for t in TESTS)],
                                env={**os.environ, 'BACKENDS': BACKENDS})


@pytest.mark.slow
@pytest.mark.default_ports
@pytest.mark.parametrize('test', TESTS)
def test_mini_passes_implicit_state_qa(implicit_state_run, test):
    pyqa.passed(implicit_state_run, test)


def test_the_cases_are_the_ones_using_onnx_and_libtorch_models():
    "TESTS are the client's tests that loop over BACKENDS (the others name the custom backend's models)."
    if why := missing(): skip_or_fail('libtorch_qa', why)
    client = subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'show', f'{TAG}:qa/L0_implicit_state/implicit_state.py'],
                            capture_output=True, text=True, check=True).stdout
    tests = re.split(r'\n    def (test_\w+)', client)[1:]
    assert tuple(name for name, body in zip(tests[::2], tests[1::2]) if 'in BACKENDS.split' in body) == TESTS
