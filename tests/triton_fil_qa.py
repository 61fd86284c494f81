"""The FIL backend's own end-to-end QA (fil_backend `qa/L0_e2e`, branch r24.10: Triton 2.51's FIL backend), arranged
as its `qa/generate_example_models.sh` and `qa/run_tests.sh` (with `CPU_ONLY=1`, as `qa/entrypoint.sh`'s last run) do.

The QA is NVIDIA's, not ours: it is read at test time from a git directory of triton-inference-server/fil_backend
(`$TRITON_FIL_BACKEND_REPO`, a bare mirror or a checkout) and never copied into the project; its client library,
rapids_triton's Python package, comes from a git directory of rapidsai/rapids-triton (`$RAPIDS_TRITON_REPO`, at the
branch-24.04 that fil_backend's conda/environments/triton_test.yml pins). `materialise(dest)` extracts both;
`generate(qa)` makes the example models by running `generate_example_model.py` and `scripts/convert_sklearn.py`
unchanged with the arguments read from generate_example_models.sh, then makes `cpu_model_repository` as that script
does (a copy with KIND_GPU replaced by KIND_CPU). `run_client` runs `test_model.py` unchanged.

Adaptations, each one named where it happens:
- `cuml` for the generator: generate_example_model.py imports cuML (RAPIDS, needs an NVIDIA GPU) at its top and makes
  its training data with `cuml.datasets.make_classification` / `make_regression`, ports of scikit-learn's functions of
  the same names. CUML_STAND_IN is a `cuml` module that hands those calls to scikit-learn (float32, as cuML's default),
  and a cudf-like pandas frame where the generator asks for `output_type="cudf"` (LightGBM's categorical features).
  The data differ from cuML's draw; the QA compares Triton with the model it generated, not with fixed numbers.
- The `cuml` example model is not generated: it is a cuML random forest (`cuml.ensemble`), trained on the GPU.
- The example models in XGBoost's legacy binary format (`xgboost`, `xgboost_shap`: no `--format`) are not generated
  when the installed XGBoost is 3.1 or later: those can no longer write that format (the file would be UBJSON under
  the legacy name, which neither the QA's ground truth nor the backend reads as such); the QA container had 2.1.
  `xgboost_shap` would fail on triton-mini anyway: it asks for `treeshap_output` (Shapley values, which Triton's FIL
  backend computes on CPUs with linear TreeSHAP), and triton-mini computes none (nbs/04d_fil_backend.ipynb).
- `np.product` for the client: test_model.py calls it, and NumPy 2 removed it (the QA container had NumPy 1.x: cuML
  24.08 pins numpy<2). NUMPY1_PLUGIN, loaded with `-p`, puts the alias back in the client's process only.
"""
from __future__ import annotations

import importlib.util, io, os, re, shlex, shutil, subprocess, sys, tarfile
from pathlib import Path

import triton_python_qa as pyqa

TAG = 'r24.10'                          # fil_backend's branch for Triton 2.51 (24.10)
RAPIDS_TRITON_TAG = 'branch-24.04'      # conda/environments/triton_test.yml: rapids-triton.git@branch-24.04
MIRRORS = Path('/work/.mirror')
FIL_REPO = Path(os.environ['TRITON_FIL_BACKEND_REPO']) if os.environ.get('TRITON_FIL_BACKEND_REPO') else None
RAPIDS_REPO = Path(os.environ['RAPIDS_TRITON_REPO']) if os.environ.get('RAPIDS_TRITON_REPO') else None
# what the QA's environment (conda/environments/triton_test.yml) has that triton-mini's dev extra does not: scikit-learn,
# pandas (cudf's stand-in) and cuda-python (tritonclient[all]: rapids_triton imports tritonclient's CUDA shared memory)
MODULES = ('xgboost', 'lightgbm', 'treelite', 'sklearn', 'pandas', 'hypothesis', 'tritonclient', 'cuda')
NOT_GENERATED = {'cuml': 'a cuML random forest: cuML trains on an NVIDIA GPU only'}


def missing() -> str | None:
    "None when the QA, its client and the libraries it trains and predicts with are here, else why not."
    for var, repo, ref in (('TRITON_FIL_BACKEND_REPO', FIL_REPO, TAG), ('RAPIDS_TRITON_REPO', RAPIDS_REPO, RAPIDS_TRITON_TAG)):
        if repo is None: return f"the FIL backend's QA: ${var} is not set (a git directory with {ref}, e.g. under {MIRRORS})"
        try: pyqa._git(repo, 'rev-parse', '--verify', f'{ref}^{{commit}}')
        except (OSError, subprocess.CalledProcessError): return f"the FIL backend's QA: ${var} ({repo}) has no {ref}"
    absent = [m for m in MODULES if importlib.util.find_spec(m.split('.')[0]) is None]
    if absent: return f"the FIL backend's QA needs {', '.join(absent)} (pip install scikit-learn pandas cuda-python and the dev extra)"
    return None


def materialise(dest:Path) -> Path:
    "fil_backend's qa/ and scripts/ at TAG under `dest`, rapids_triton under `dest/client`; returns `dest/qa`."
    pyqa._extract(FIL_REPO, TAG, ('qa', 'scripts'), dest)
    data = pyqa._git(RAPIDS_REPO, 'archive', '--format=tar', RAPIDS_TRITON_TAG, 'python/rapids_triton')
    with tarfile.open(fileobj=io.BytesIO(data)) as tar: tar.extractall(dest / 'client', filter='data')
    (dest / 'client' / 'python' / 'fil_qa_numpy1.py').write_text(NUMPY1_PLUGIN)
    (dest / 'gen' / 'cuml').mkdir(parents=True)
    (dest / 'gen' / 'cuml' / '__init__.py').write_text(CUML_STAND_IN)
    return dest / 'qa'


# --------------------------------------------------------------------------------------- the example models
def generator_runs(qa:Path) -> dict:
    "{model name: generate_example_model.py's arguments}, read from generate_example_models.sh's `${GENERATOR_SCRIPT} \\` blocks."
    text = (qa / 'generate_example_models.sh').read_text().replace('\\\n', ' ')
    return {m.group(1): [a.replace('$name', m.group(1)) for a in shlex.split(m.group(2))] for m in re.finditer(r'^name=(\w+)\n(?:.*\n)*?\s*\$\{GENERATOR_SCRIPT\}(.*)$', text, re.M)}


def xgboost_writes_legacy_binary() -> bool:
    import xgboost
    return tuple(int(p) for p in re.findall(r'\d+', xgboost.__version__)[:2]) < (3, 1)


def model_format(args:list) -> str:
    "The serialization format generate_example_model.py writes for these arguments (its build_model's defaults)."
    opt = lambda flag, default: args[args.index(flag) + 1] if flag in args else default
    kind = opt('--type', 'xgboost')
    return opt('--format', {'xgboost': 'xgboost', 'lightgbm': 'lightgbm'}.get(kind, 'pickle'))


def not_generated(qa:Path) -> dict:
    "{model: why it is not made here}: the adaptations in the module docstring."
    skip = dict(NOT_GENERATED)
    if not xgboost_writes_legacy_binary():
        import xgboost
        for name, args in generator_runs(qa).items():
            if model_format(args) == 'xgboost':
                skip[name] = f'the legacy binary XGBoost format: XGBoost {xgboost.__version__} can no longer write it (the QA container had 2.1)'
    return skip


def generate(qa:Path, timeout:float=1800) -> Path:
    """The example models as generate_example_models.sh makes them, then its `cpu_model_repository`; returns that."""
    env = {**os.environ, 'PYTHONPATH': os.pathsep.join([str(qa.parent / 'gen'), os.environ.get('PYTHONPATH', '')])}
    skip, e2e = not_generated(qa), qa / 'L0_e2e'
    for name, args in generator_runs(qa).items():
        if name in skip: continue
        subprocess.run([sys.executable, str(e2e / 'generate_example_model.py'), *args], cwd=e2e, env=env,
                       check=True, capture_output=True, timeout=timeout)
        if name == 'sklearn':   # $SKLEARN_CONVERTER "${MODEL_REPO}/${name}/1/model.pkl"
            subprocess.run([sys.executable, str(qa.parent / 'scripts' / 'convert_sklearn.py'), str(e2e / 'model_repository' / name / '1' / 'model.pkl')],
                           env=env, check=True, capture_output=True, timeout=timeout)
    cpu = e2e / 'cpu_model_repository'   # cp -r model_repository/* cpu_model_repository/; sed -i s/KIND_GPU/KIND_CPU/g
    shutil.copytree(e2e / 'model_repository', cpu)
    for config in cpu.glob('*/config.pbtxt'): pyqa.sed(config, 'KIND_GPU', 'KIND_CPU')
    return cpu


def run_client(qa:Path, repo:Path, xml:Path, profile:str='ci', timeout:float=3600) -> dict:
    """run_tests.sh with CPU_ONLY=1: `pytest --repo REPO --hypothesis-profile PROFILE qa/`, rapids_triton importable,
    NumPy 1's `np.product` back (NUMPY1_PLUGIN)."""
    client = qa.parent / 'client' / 'python'
    env = {'CPU_ONLY': '1', 'PYTHONPATH': os.pathsep.join([str(client), os.environ.get('PYTHONPATH', '')])}
    return pyqa.run_client(qa, 'L0_e2e', xml, env=env, timeout=timeout,
                           args=('-p', 'fil_qa_numpy1', '--repo', str(repo), '--hypothesis-profile', profile))


NUMPY1_PLUGIN = '''"""pytest plugin (triton-mini's FIL QA judge): NumPy 1's `np.product`, which NumPy 2 removed and test_model.py calls."""
import numpy
if not hasattr(numpy, 'product'): numpy.product = numpy.prod
'''

CUML_STAND_IN = '''"""A stand-in for cuML (triton-mini's FIL QA judge), for fil_backend's generate_example_model.py on a machine
without an NVIDIA GPU: its datasets calls go to scikit-learn's functions of which they are ports."""
import contextlib, sys, types

import numpy as np
import pandas as pd
from sklearn import datasets as _sk

_output = ['numpy']


@contextlib.contextmanager
def using_output_type(kind):
    _output.append(kind)
    try: yield
    finally: _output.pop()


class _Frame(pd.DataFrame):
    "What cuML returns for output_type='cudf', as far as the generator uses it."
    def to_pandas(self): return pd.DataFrame(self)


class _Series(pd.Series):
    def to_pandas(self): return pd.Series(self)


def _out(data, labels):
    data = data.astype(np.float32)   # cuML's default dtype
    if _output[-1] == 'cudf': return _Frame(data), _Series(labels)
    return data, labels


def _classifier(*a, **kw): raise RuntimeError('cuML random forests need an NVIDIA GPU')


datasets = types.ModuleType('cuml.datasets')
datasets.make_classification = lambda **kw: _out(*_sk.make_classification(**kw))
datasets.make_regression = lambda **kw: _out(*_sk.make_regression(**kw))
ensemble = types.ModuleType('cuml.ensemble')   # `from cuml.ensemble import ...` needs a module
ensemble.RandomForestClassifier = ensemble.RandomForestRegressor = _classifier
sys.modules.update({'cuml.datasets': datasets, 'cuml.ensemble': ensemble})
'''
