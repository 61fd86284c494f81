"""The FIL backend's own end-to-end QA (triton-inference-server/fil_backend `qa/L0_e2e`, r24.10 = Triton 2.51) against
triton-mini's `fil` backend (nbs/04d_fil_backend.ipynb): its example models generated as its scripts generate them,
served by the `triton-mini` command, and its test_model.py run unchanged with CPU_ONLY=1, each of its cases one test here.

How the QA is laid out and what is adapted to this machine (no NVIDIA GPU, cuML, NumPy 1): tests/triton_fil_qa.py.
The judge's switch: $TRITON_FIL_BACKEND_REPO and $RAPIDS_TRITON_REPO (git directories; .ci/run takes the mirrors
under /work/.mirror when the machine has them, and installs scikit-learn, pandas and cuda-python from PyPI).
There is no oracle run: the real Triton of the oracle (PyPI's nvidia-pytriton) ships without the FIL backend, so the
verdicts are the QA's own expectations (its ground truth is Treelite's GTIL on the generated model, or XGBoost's SHAP).
The client's gRPC address is fixed (localhost:8001), so the server binds the default ports under their machine-wide lock.
"""
from __future__ import annotations

import os, re

import pytest

import triton_fil_qa as filqa
import triton_python_qa as pyqa
from triton_servers import MiniProcess, PortsTaken, skip_or_fail

pytestmark = [pytest.mark.slow, pytest.mark.default_ports]  # generating the models takes minutes, the client's Hypothesis runs minutes more

MODELS = ('xgboost', 'xgboost_shap', 'xgboost_json', 'xgboost_ubj', 'lightgbm', 'lightgbm_rf', 'regression', 'sklearn', 'cuml')
TESTS = ('test_small', 'test_max_batch')
PROFILE = os.environ.get('TEST_PROFILE', 'ci')   # run_tests.sh's own switch: ci (100 examples) or dev (10)

# (test, model) -> why triton-mini fails it (strict xfail: a fix makes it pass and this entry must go)
KNOWN: dict = {}


@pytest.fixture(scope='module')
def verdicts(tmp_path_factory) -> dict:
    "The QA run once: models generated, triton-mini serving cpu_model_repository, test_model.py's verdicts by (test, model)."
    if reason := filqa.missing(): skip_or_fail('fil_qa', reason)
    root = tmp_path_factory.mktemp('fil-qa')
    qa = filqa.materialise(root)
    repo = filqa.generate(qa)
    skipped = filqa.not_generated(qa)
    with pyqa.default_ports():
        try: server = MiniProcess(repo, fixed_ports=True, timeout=600)
        except PortsTaken as e: pytest.skip(f'the default ports are taken by a process outside this run: {e}')
        try: results = filqa.run_client(qa, repo, root / 'fil_qa.xml', profile=PROFILE)
        finally: server.stop()
    by_case = {'__output__': results.pop('__output__')}
    for name, verdict in results.items():   # test_small[None-lightgbm]: the test, then its parameters
        m = re.match(r'(\w+)\[(.*)\]$', name)
        model = next((p for p in m.group(2).split('-') if p in MODELS), None) if m else None
        by_case[(m.group(1), model) if model else name] = verdict
    by_case['__not_generated__'] = skipped
    return by_case


PARAMS = [pytest.param(test, model, id=f'{model}-{test}',
                       marks=[pytest.mark.xfail(reason=KNOWN[test, model], strict=True)] if (test, model) in KNOWN else [])
          for model in MODELS for test in TESTS]


@pytest.mark.parametrize('test,model', PARAMS)
def test_fil_qa(test, model, verdicts):
    if why := verdicts['__not_generated__'].get(model): pytest.skip(f'{model} is not generated here: {why}')
    if (test, model) not in verdicts:
        pytest.fail(f'{test}[{model}] did not run; the client said:\n{verdicts["__output__"][1]}', pytrace=False)
    outcome, message = verdicts[test, model]
    if outcome == 'skipped': pytest.skip(message)
    assert outcome == 'passed', f'{test}[{model}]: {outcome}\n{message}'


def test_cases_are_the_clients(tmp_path):
    "MODELS and TESTS are test_model.py's at TAG (a model or test added to the QA would otherwise go unrun)."
    if reason := filqa.missing(): skip_or_fail('fil_qa', reason)
    text = (filqa.materialise(tmp_path) / 'L0_e2e' / 'test_model.py').read_text()
    assert re.findall(r'^def (test_\w+)', text, re.M) == list(TESTS)
    assert re.search(r'^MODELS = \(([^)]*)\)', text, re.M).group(1).replace('"', "'").split() == [f"'{m}'," for m in MODELS]
