"""Triton's own Python-backend QA (`qa/L0_backend_python/<subtest>`), arranged as each subtest's test.sh arranges it.

The QA is NVIDIA's, not ours: it is read at test time from a git directory of triton-inference-server/server
(`$TRITON_SERVER_REPO`, a bare mirror or a checkout; tag v2.51.0, the oracle's version) and never copied into the
project. `materialise(dest)` extracts `qa/common`'s helpers, `qa/python_models` and `qa/L0_backend_python` into
`dest`; `SUBTESTS[name].arrange(qa)` then makes that subtest's `models/` folder exactly as its test.sh does (the same
copies, the same `sed` edits and appended config lines). The clients run unchanged, from the subtest's folder (they
find `../../common` as in the container) against the servers' default ports, which they hard-code.

Adaptations, each one named where it happens:
- `TEST_JETSON=1` in the clients' environment: shm_util's leak probe needs `triton_shm_monitor`, a C extension the QA
  container builds from python_backend's source; the variable is the QA's own switch that skips the probe (it reads
  the real Triton's shared-memory pool, which triton-mini does not have).
- test.sh's `get_shm_pages` checks (no /dev/shm page left behind) are not run: they count every page on the machine,
  and tests of other modules run alongside.
- The cases that need a GPU (NEEDS_GPU) are left out of the client's run on both servers, each with the evidence.
- bls: its bls model runs its own unittest class inside `execute` and answers one pass/fail; each of its tests is
  judged from the unittest report the stub writes to the server's log (`unittest_verdicts`). test.sh's loop over CUDA
  memory pool sizes runs once without the flag (on a CPU the runs do not differ; its check is about the GPU pool).
- request_rescheduling: its bls_request_rescheduling model runs its unittest class inside `execute`, as bls's does;
  each of its tests is judged from the unittest report in the server's log the same way.
- The real Triton's venv gets torch (`oracle_with_torch`), which the QA container has and the decoupled models import.
- The real Triton's venv gets requests (`oracle_with_requests`), which the QA container has and custom_metrics' model
  imports.
- custom_metrics, argument_validation: like bls, each test of the unittest class the model runs inside execute is
  judged from the report in the server's log.
- io: test.sh's servers whose every case needs a GPU (NEEDS_GPU) are not started; ensemble: its `TEST_WINDOWS == 0`
  part (ensemble_gpu over ${DATADIR}'s libtorch model on KIND_GPU) is left out of the repository (`arrange_ensemble`).
- python_test: init_args' config gets $TRITON_DIR, and its server that variable, as the folder holding qa/ (the
  container's /opt/tritonserver); its servers run with their own 1 GiB /dev/shm (`in_private_shm`: a mount namespace,
  where the machine allows one), the container's `--shm-size`.
- examples: python_backend's examples/ at r24.10 stand for test.sh's clone; jax (JAX's CUDA build downloaded) and
  instance_kind (resnet50 weights downloaded by torch.hub) are left out of the repository (EXAMPLES_LEFT_OUT).
- The square_int32 model comes from python_backend's `examples/decoupled` at branch r24.10 (test.sh clones it with
  `$PYTHON_BACKEND_REPO_TAG`), from `$TRITON_PYTHON_BACKEND_REPO` or the mirror next to the server's.
"""
from __future__ import annotations

import dataclasses, io, os, re, shutil, subprocess, sys, tarfile
import xml.etree.ElementTree as ET
from pathlib import Path

from triton_servers import MiniProcess, default_ports  # default_ports: the one lock on 8000-8002, for every test that binds them

TAG = 'v2.51.0'                 # Triton 2.51, the oracle's version
PYTHON_BACKEND_TAG = 'r24.10'   # its python_backend (PYTHON_BACKEND_REPO_TAG in the 24.10 container)
MIRRORS = Path('/work/.mirror')
# It runs only when $TRITON_SERVER_REPO names a git directory of the server (e.g. the mirror
# /work/.mirror/triton-inference-server+server/repo, which .ci/run takes when the machine has it): no package has it.
SERVER_REPO = Path(os.environ['TRITON_SERVER_REPO']) if os.environ.get('TRITON_SERVER_REPO') else None
PYTHON_BACKEND_REPO = (Path(os.environ['TRITON_PYTHON_BACKEND_REPO']) if os.environ.get('TRITON_PYTHON_BACKEND_REPO')
                       else SERVER_REPO.parent.parent / 'triton-inference-server+python_backend' / 'repo' if SERVER_REPO else None)
QA_PATHS = ('qa/common/shm_util.py', 'qa/common/test_util.py', 'qa/python_models', 'qa/L0_backend_python')


def _git(repo:Path, *args) -> bytes:
    return subprocess.run(['git', f'--git-dir={repo}', *args], capture_output=True, check=True).stdout


def missing() -> str | None:
    "None when the server's QA at TAG can be read, else why not."
    if SERVER_REPO is None: return "Triton's Python-backend QA: $TRITON_SERVER_REPO is not set (the git directory of triton-inference-server/server)"
    try: _git(SERVER_REPO, 'rev-parse', '--verify', f'{TAG}^{{commit}}')
    except (OSError, subprocess.CalledProcessError):
        return (f"Triton's Python-backend QA not found: $TRITON_SERVER_REPO ({SERVER_REPO}) is not a git directory of "
                f'triton-inference-server/server with tag {TAG}')
    return None


def _extract(repo:Path, ref:str, paths, dest:Path):
    data = _git(repo, 'archive', '--format=tar', ref, *paths)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar: tar.extractall(dest, filter='data')


def materialise(dest:Path) -> Path:
    "The QA folders at TAG under `dest`; returns `dest/qa`."
    _extract(SERVER_REPO, TAG, QA_PATHS, dest)
    return dest / 'qa'


def python_backend_file(path:str) -> bytes:
    return _git(PYTHON_BACKEND_REPO, 'show', f'{PYTHON_BACKEND_TAG}:{path}')


# --------------------------------------------------------------------------------------- test.sh's copies, in Python
def cp_model(qa:Path, models:Path, name:str):
    "`mkdir -p models/NAME/1/; cp ../../python_models/NAME/model.py models/NAME/1/; cp .../config.pbtxt models/NAME/`"
    (models / name / '1').mkdir(parents=True, exist_ok=True)
    shutil.copy(qa / 'python_models' / name / 'model.py', models / name / '1')
    if (qa / 'python_models' / name / 'config.pbtxt').exists():
        shutil.copy(qa / 'python_models' / name / 'config.pbtxt', models / name)


def sed(path:Path, pattern:str, repl:str):
    "`sed -i s/PATTERN/REPL/[g]`: a `^` pattern edits each line's start, others every occurrence."
    text = path.read_text()
    path.write_text(re.sub(pattern, repl, text, flags=re.M))


def append(path:Path, line:str):
    "`echo LINE >> PATH`"
    with open(path, 'a') as f: f.write(line + '\n')


def arrange_decoupled(qa:Path) -> Path:
    models = qa / 'L0_backend_python' / 'decoupled' / 'models'
    cp_model(qa, models, 'identity_fp32')
    cp_model(qa, models, 'execute_cancel')
    append(models / 'execute_cancel' / 'config.pbtxt', 'model_transaction_policy { decoupled: True }')
    (models / 'square_int32' / '1').mkdir(parents=True, exist_ok=True)
    (models / 'square_int32' / '1' / 'model.py').write_bytes(python_backend_file('examples/decoupled/square_model.py'))
    (models / 'square_int32' / 'config.pbtxt').write_bytes(python_backend_file('examples/decoupled/square_config.pbtxt'))
    cp_model(qa, models, 'dlpack_add_sub')
    return models


def arrange_lifecycle(qa:Path) -> Path:
    models = qa / 'L0_backend_python' / 'lifecycle' / 'models'
    shutil.rmtree(models, ignore_errors=True)
    for name in ('error_code', 'execute_cancel', 'execute_error', 'execute_grpc_error', 'execute_return_error', 'wrong_model'):
        cp_model(qa, models, name)
    for name, delay in (('execute_error', 12000000), ('execute_grpc_error', 1200000)):
        config = models / name / 'config.pbtxt'
        sed(config, r'^name:.*', f'name: "{name}"')
        sed(config, r'^max_batch_size:.*', 'max_batch_size: 8')
        append(config, f'dynamic_batching {{ preferred_batch_size: [8], max_queue_delay_microseconds: {delay} }}')
    config = models / 'wrong_model' / 'config.pbtxt'
    sed(config, r'^name:.*', 'name: "wrong_model"')
    sed(config, 'TYPE_FP32', 'TYPE_UINT32')
    return models


def arrange_lifecycle_single(name:str, with_config=True):
    "lifecycle/test.sh's later servers: `rm -rf models/` and one model alone (init_error, fini_error, auto_complete_error)."
    def arrange(qa:Path) -> Path:
        models = qa / 'L0_backend_python' / 'lifecycle' / 'models'
        shutil.rmtree(models, ignore_errors=True)
        cp_model(qa, models, name)
        if not with_config: (models / name / 'config.pbtxt').unlink(missing_ok=True)   # test.sh copies model.py only
        return models
    arrange.__name__ = f'arrange_{name}'
    return arrange


def arrange_restart(qa:Path) -> Path:
    return qa / 'L0_backend_python' / 'restart' / 'models'   # committed with the subtest; test.sh copies nothing


BLS_MODELS = ('bls', 'dlpack_add_sub', 'bls_async', 'bls_memory', 'bls_memory_async', 'add_sub', 'execute_error',
              'identity_fp32', 'dlpack_identity', 'dlpack_square', 'identity_fp32_timeout')


def arrange_bls(qa:Path) -> Path:
    """bls/test.sh's first repository (its loop over CUDA pool sizes and BLS_KIND), less the QA data folder's models it
    copies (onnx_nobatch_sequence_int32, libtorch_gpu, libtorch_cpu: `${DATADIR}` is NVIDIA's, not public)."""
    models = qa / 'L0_backend_python' / 'bls' / 'models'
    shutil.rmtree(models, ignore_errors=True)
    for name in BLS_MODELS: cp_model(qa, models, name)
    (models / 'square_int32' / '1').mkdir(parents=True, exist_ok=True)
    (models / 'square_int32' / '1' / 'model.py').write_bytes(python_backend_file('examples/decoupled/square_model.py'))
    (models / 'square_int32' / 'config.pbtxt').write_bytes(python_backend_file('examples/decoupled/square_config.pbtxt'))
    return models


def arrange_bls_single(name:str):
    "bls/test.sh's later servers: `rm -fr ./models` and one model alone (bls_init_error, bls_finalize_error)."
    def arrange(qa:Path) -> Path:
        models = qa / 'L0_backend_python' / 'bls' / 'models'
        shutil.rmtree(models, ignore_errors=True)
        cp_model(qa, models, name)
        return models
    arrange.__name__ = f'arrange_{name}'
    return arrange


def arrange_bls_parameters(qa:Path) -> Path:
    models = qa / 'L0_backend_python' / 'bls' / 'params_models'
    shutil.rmtree(models, ignore_errors=True)
    cp_model(qa, models, 'bls_parameters')
    return models


def fresh_models(qa:Path, subtest:str, *names) -> Path:
    "A subtest's test.sh `rm -rf models`, then `cp -r` of each of qa/python_models' `names` into it."
    models = qa / 'L0_backend_python' / subtest / 'models'
    shutil.rmtree(models, ignore_errors=True)
    for name in names: cp_model(qa, models, name)
    return models


def arrange_async_execute(qa:Path) -> Path:
    return fresh_models(qa, 'async_execute', 'async_execute_decouple', 'async_execute_decouple_bls')


# response_sender/test.sh's first repository: the one model folder (model_common.py with model.py or model_async.py)
# under eight names, decoupled and/or dynamically batched by appended config lines
RESPONSE_SENDER = {'response_sender': ('model.py', False, False), 'response_sender_decoupled': ('model.py', True, False),
                   'response_sender_async': ('model_async.py', False, False),
                   'response_sender_decoupled_async': ('model_async.py', True, False),
                   'response_sender_batching': ('model.py', False, True),
                   'response_sender_decoupled_batching': ('model.py', True, True),
                   'response_sender_async_batching': ('model_async.py', False, True),
                   'response_sender_decoupled_async_batching': ('model_async.py', True, True)}


def arrange_response_sender(qa:Path) -> Path:
    models = qa / 'L0_backend_python' / 'response_sender' / 'models'
    shutil.rmtree(models, ignore_errors=True)
    source = qa / 'python_models' / 'response_sender'
    for name, (model, decoupled, batching) in RESPONSE_SENDER.items():
        (models / name / '1').mkdir(parents=True)
        shutil.copy(source / 'model_common.py', models / name / '1')
        shutil.copy(source / model, models / name / '1' / 'model.py')
        shutil.copy(source / 'config.pbtxt', models / name)
        if decoupled: append(models / name / 'config.pbtxt', 'model_transaction_policy { decoupled: True }')
        if batching: append(models / name / 'config.pbtxt', 'dynamic_batching { max_queue_delay_microseconds: 500000 }')
    return models


def arrange_response_sender_complete_final(qa:Path) -> Path:
    "response_sender/test.sh's second server: `rm -rf models` and response_sender_complete_final alone."
    return fresh_models(qa, 'response_sender', 'response_sender_complete_final')


def arrange_request_rescheduling(qa:Path) -> Path:
    return fresh_models(qa, 'request_rescheduling', 'bls_request_rescheduling', 'request_rescheduling_addsub',
                        'iterative_sequence', 'wrong_return_type')


def arrange_model_control(qa:Path) -> Path:
    "model_control/test.sh: identity_fp32, and the config alone of the ensemble simple_identity_fp32 (its empty `1/`)."
    models = fresh_models(qa, 'model_control', 'identity_fp32')
    (models / 'simple_identity_fp32' / '1').mkdir(parents=True, exist_ok=True)
    shutil.copy(qa / 'python_models' / 'simple_identity_fp32' / 'config.pbtxt', models / 'simple_identity_fp32')
    return models


def oracle_with_requests():
    """The QA container has `requests`; custom_metrics' model imports it to read :8002/metrics. The oracle's venv gets
    the version the suite's own Python has, once (triton-mini's stubs run on the suite's Python, which has it)."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
    import real_triton
    py = real_triton.venv_python()
    if subprocess.run([str(py), '-c', 'import requests'], capture_output=True).returncode == 0: return
    import requests
    subprocess.run([str(py), '-m', 'pip', 'install', '-q', '--disable-pip-version-check', f'requests=={requests.__version__}'],
                   check=True, capture_output=True, timeout=600)


def arrange_custom_metrics(qa:Path) -> Path:
    return fresh_models(qa, 'custom_metrics', 'custom_metrics')


def arrange_logging(qa:Path) -> Path:
    "logging/test.sh: `rm -fr ${MODELDIR}/logging/models` (MODELDIR: L0_backend_python), then identity_fp32_logging."
    return fresh_models(qa, 'logging', 'identity_fp32_logging')


def arrange_argument_validation(qa:Path) -> Path:
    return qa / 'L0_backend_python' / 'argument_validation' / 'models'   # committed with the subtest; test.sh copies nothing


def arrange_io_ensemble(trial:str):
    """io/test.sh's loop over TRIAL (default, decoupled): dlpack_io_identity (or its decoupled twin) as
    dlpack_io_identity_1..3, each renamed by sed, and the ensemble_io ensemble that chains them."""
    def arrange(qa:Path) -> Path:
        models = qa / 'L0_backend_python' / 'io' / 'models'
        shutil.rmtree(models, ignore_errors=True)
        source = qa / 'python_models' / ('dlpack_io_identity' if trial == 'default' else 'dlpack_io_identity_decoupled')
        for i in (1, 2, 3):
            name = f'dlpack_io_identity_{i}'
            (models / name / '1').mkdir(parents=True)
            shutil.copy(source / 'model.py', models / name / '1')
            shutil.copy(source / 'config.pbtxt', models / name)
            sed(models / name / 'config.pbtxt', r'^name:.*', f'name: "{name}"')
        (models / 'ensemble_io' / '1').mkdir(parents=True)
        shutil.copy(qa / 'python_models' / 'ensemble_io' / 'config.pbtxt', models / 'ensemble_io')
        return models
    arrange.__name__ = f'arrange_io_ensemble_{trial}'
    return arrange


def arrange_io_single(*names:str):
    """io/test.sh's later servers: `rm -rf models && mkdir models` and the named models alone (dlpack_empty_output;
    variable_gpu_output; add_sub with dlpack_io_identity_decoupled)."""
    def arrange(qa:Path) -> Path:
        models = qa / 'L0_backend_python' / 'io' / 'models'
        shutil.rmtree(models, ignore_errors=True)
        models.mkdir(parents=True)
        for name in names: cp_model(qa, models, name)
        return models
    arrange.__name__ = f'arrange_io_{"_".join(names)}'
    return arrange


def arrange_ensemble(qa:Path) -> Path:
    """ensemble/test.sh's repository: the ensemble of add_sub_1 and add_sub_2 (add_sub twice). Adapted: its
    `TEST_WINDOWS == 0` part (ensemble_gpu, over the QA data folder's libtorch_float32_float32_float32 on KIND_GPU) is
    left out, as test.sh itself leaves it out where there are no GPU tensors: the model is NVIDIA's (${DATADIR}), and
    a KIND_GPU instance cannot load without a GPU (test_ensemble_gpu is in NEEDS_GPU)."""
    models = qa / 'L0_backend_python' / 'ensemble' / 'models'
    shutil.rmtree(models, ignore_errors=True)
    (models / 'ensemble' / '1').mkdir(parents=True)
    shutil.copy(qa / 'python_models' / 'ensemble' / 'config.pbtxt', models / 'ensemble')
    for name in ('add_sub_1', 'add_sub_2'):
        (models / name / '1').mkdir(parents=True)
        shutil.copy(qa / 'python_models' / 'add_sub' / 'config.pbtxt', models / name)
        shutil.copy(qa / 'python_models' / 'add_sub' / 'model.py', models / name / '1')
    return models


def model_tests(path:Path, cls:str) -> list:
    "The test methods of unittest class `cls` in a QA model that runs `unittest.main` inside its execute, in file order."
    return [t.split('::')[1] for t in client_tests(path) if t.startswith(f'{cls}::')]


UNITTEST_VERDICT = re.compile(r'^(ERROR|FAIL): (test_\w+) \(([\w.]+)\)', re.M)   # (model.Cls) or (model.Cls.test)


def report_block(log:str, start:int, limit:int=3000) -> str:
    "A failed test's part of a unittest report, from after its `FAIL: ...` line to the next separator line."
    end = re.compile(r'^(={20,}|-{20,})$', re.M)
    first = end.search(log, start)                    # the dashes under the FAIL line
    after = end.search(log, first.end()) if first else None
    return log[first.end() if first else start:after.start() if after else start + limit].strip()[:limit]


def unittest_verdicts(log:str, cls:str, tests) -> dict:
    """{test: (outcome, message)} from the unittest report a QA model's `unittest.main` writes to the stub's stderr
    (which lands in the server's log on both servers): a test fails when the report names it under ERROR or FAIL."""
    if 'Ran ' not in log: return {}
    bad = {m[2]: (m[1], report_block(log, m.end())) for m in UNITTEST_VERDICT.finditer(log) if cls in m[3].split('.')}
    return {t: ('failed', f'{bad[t][0]} in the unittest report in the server log:\n{bad[t][1]}') if t in bad else ('passed', '')
            for t in tests}


# --------------------------------------------------------------------------------------- running a client
# Cases that need a GPU, left out of the client's run on both servers (the QA runs on GPUs; this machine has none):
# test_decoupled_bls's response thread moves tensors with torch `.to("cuda")` before it sends its only response; on a
# CPU it raises "Torch not compiled with CUDA enabled", the thread ends, no response is sent and the client waits
# forever, on real Triton 2.51 as on triton-mini (seen 2026-12-06, both servers, the client killed after 90 s).
NEEDS_GPU = {'decoupled': {'DecoupledTest::test_decoupled_bls':
                           'needs a GPU: its model moves tensors to CUDA in the response thread, and on a CPU no response '
                           'is ever sent (the client hangs on real Triton 2.51 too)'},
             'bls': {**{f'{trial}-{case}': why for trial in ('non_decoupled', 'decoupled') for case, why in {
                 'test_gpu_bls': 'needs a GPU: it moves its BLS inputs to CUDA with torch',
                 'test_bls_tensor_lifecycle': 'needs a GPU: it moves tensors to CUDA and reads torch.cuda memory statistics',
                 'test_preferred_memory': "needs the QA data folder's libtorch_nobatch_float32_float32_float32 (as libtorch_gpu "
                                          'and libtorch_cpu, NVIDIA-internal ${DATADIR}) and a GPU for its preferred memory',
                 'test_bls_sequence': "needs the QA data folder's onnx_nobatch_sequence_int32 (NVIDIA-internal ${DATADIR})",
                 'bls_async': 'needs a GPU: each execute first sends BLS inputs it moved to CUDA (gpu=True)'}.items()},
                     'bls_model_loading': "needs the QA data folder's onnx_int32_int32_int32 (NVIDIA-internal ${DATADIR}), "
                                          'the model it loads through BLS',
                     'bls_model_loading_warmup': "needs the QA data folder's onnx_int32_int32_int32 (NVIDIA-internal ${DATADIR})"},
             # io: every case but test_requested_output_default puts a tensor on the GPU (seen 2026-12-06 on both servers,
             # the client killed after 90 s where it hangs)
             'io': {**{f'{trial}-test_ensemble_io': why for trial, why in (
                        ('default', 'needs a GPU: its first request asks each dlpack_io_identity model for a GPU output, '
                                    'which the model makes with torch `.cuda()`; on a CPU the ensemble answers "Torch not '
                                    'compiled with CUDA enabled" and the client fails'),
                        ('decoupled', 'needs a GPU: the decoupled dlpack_io_identity_1 moves its output with torch '
                                      '`.cuda()` in its response thread; on a CPU the thread dies, no response is sent '
                                      'and the client waits forever'))},
                    'test_empty_gpu_output': 'needs a GPU: dlpack_empty_output makes its output on "cuda:0" with torch '
                                             '(on a CPU: "Torch not compiled with CUDA enabled")',
                    'test_variable_gpu_output': 'needs a GPU: variable_gpu_output has a KIND_GPU instance group, which '
                                                'cannot load without one (neither server starts: "failed to load all '
                                                'models"), and makes its outputs on CUDA',
                    'test_requested_output_decoupled': 'needs a GPU: its GPU_OUTPUT input (np.random.rand cast to bool) is '
                                                       'all True, so dlpack_io_identity_decoupled moves OUTPUT0 with torch '
                                                       '`.cuda()` in its response thread; on a CPU the thread dies, no '
                                                       'response is sent and the client waits forever'},
             'ensemble': {'EnsembleTest::test_ensemble_gpu':
                          "needs a GPU and the QA data folder's libtorch_float32_float32_float32 (NVIDIA-internal "
                          '${DATADIR}), the KIND_GPU model ensemble_gpu runs; test.sh leaves both out without GPU tensors'},
             # python_test.py defines its two CUDA cases only when TEST_JETSON is 0 (CLIENT_ENV sets it to 1)
             'python_test': {'PythonTest::test_gpu_tensor_error': 'needs a GPU: it registers CUDA shared memory for its '
                                                                 'output (tritonclient.utils.cuda_shared_memory)',
                             'PythonTest::test_dlpack_tensor_error': 'needs a GPU: it registers CUDA shared memory for its '
                                                                    'input and output',
                             'add_sub_gpu': 'needs a GPU: add_sub_gpu has a KIND_GPU instance group, which cannot load '
                                            'without one (as io\'s variable_gpu_output: "failed to load all models")'}}


def oracle_with_torch():
    """The QA container has torch; its models import it (decoupled_bls, dlpack_add_sub). The oracle's venv gets the
    CPU build this machine's pip has on disk (torch==2.13.0, the version the suite's own Python has), once."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / 'tools'))
    import real_triton
    py = real_triton.venv_python()
    if subprocess.run([str(py), '-c', 'import torch'], capture_output=True).returncode == 0: return
    import torch   # the suite's own version: the oracle's models then run on the same torch
    subprocess.run([str(py), '-m', 'pip', 'install', '-q', '--disable-pip-version-check', f'torch=={torch.__version__.split("+")[0]}'],
                   check=True, capture_output=True, timeout=1800)
CLIENT_ENV = {'TEST_JETSON': '1', 'TEST_WINDOWS': '0', 'TRITONSERVER_IPADDR': 'localhost'}


def client_tests(path:Path) -> list:
    "'Class::test' for each test method of a unittest client, in file order (pytest's --deselect would match prefixes)."
    tests, cls = [], None
    for line in path.read_text().splitlines():
        if m := re.match(r'class (\w+)\(', line): cls = m[1]
        elif (m := re.match(r'    def (test_\w+)\(', line)) and cls: tests.append(f'{cls}::{m[1]}')
    return tests


def run_client(folder:Path, target:str, xml:Path, env=None, timeout:float=600, deselect=(), args=()) -> dict:
    """`python3 -m pytest --junitxml=XML TARGET [ARGS]` in the subtest's folder: {test name: (outcome, message)}, outcome one of
    passed/failed/error/skipped, plus '__output__' with the client's output."""
    targets = [target] if not deselect else [f'{target}::{t}' for t in client_tests(folder / target) if t not in deselect]
    # faulthandler_timeout: a case that hangs prints every thread's stack (which wait never returned) while it hangs
    argv = [sys.executable, '-m', 'pytest', '-p', 'no:cacheprovider', '-p', 'no:randomly', '-o', 'addopts=',
            '-o', f'faulthandler_timeout={max(60, int(timeout / 4))}', f'--junitxml={xml}', *targets, *args]
    try: r = subprocess.run(argv, cwd=folder, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **CLIENT_ENV, **(env or {})})
    except subprocess.TimeoutExpired as e:   # its output so far says which case hung and where (bytes, whatever text=)
        said = [o.decode(errors='replace') if isinstance(o, bytes) else o or '' for o in (e.stdout, e.stderr)]
        return {'__output__': ('', f'no exit within {timeout:.0f} s; the client printed:\n{said[0][-4000:]}\n{said[1][-8000:]}')}
    results = {'__output__': ('', r.stdout[-6000:] + r.stderr[-3000:])}
    if not xml.exists(): return results
    for case in ET.parse(xml).getroot().iter('testcase'):
        outcome, message = 'passed', ''
        for kind in ('failure', 'error', 'skipped'):
            if (el := case.find(kind)) is not None:
                outcome, message = {'failure': 'failed'}.get(kind, kind), (el.get('message') or '') + '\n' + (el.text or '')[-3000:]
                break
        results[case.get('name')] = (outcome, message)
    return results


# --------------------------------------------------------------------------------------- a client against triton-mini alone
# The QA judges whose backends the oracle lacks (libtorch, implicit state, batch input): triton-mini serves the staged
# models on the ports NVIDIA's clients hard-code while the client runs once, and the client's own checks are the judge.
VERBOSE_VERDICT = re.compile(r'^(test_\w+) \(.*?\) \.\.\. (\w+)', re.M)   # unittest -v: `test_x (module.Class.test_x) ... ok`


def serve_and_run(models:Path, folder:Path, argv, *flags, grpc:bool=False, metrics:bool=False, env=None, timeout:float=300,
                  server_env=None, start_timeout:float=120):
    """triton-mini on `models` with `flags`, on Triton's default ports (HTTP 8000, gRPC 8001 with `grpc`, metrics 8002 with
    `metrics`: clients that read failure counters) under their lock, while `python ARGV` runs once in `folder` (`env`: the client's environment, None for ours;
    `server_env`: variables added to the server's): (the client's CompletedProcess, the stopped server, whose log() is
    there to read)."""
    with default_ports():
        server = MiniProcess(models, *flags, fixed_ports=(8000, 8001 if grpc else None, 8002 if metrics else None), grpc=grpc, metrics=metrics,
                             env=server_env, timeout=start_timeout)
        try: client = subprocess.run([sys.executable, *argv], cwd=folder, env=env, capture_output=True, text=True, timeout=timeout)
        finally: server.stop()
    return client, server


def served_unittest(models:Path, folder:Path, argv, *flags, **kw) -> tuple:
    """NVIDIA's unittest client, `python ARGV -v`, against triton-mini (`serve_and_run`): ({test: its verdict as -v
    prints it: ok, FAIL, ERROR, skipped ...}, the client's report followed by the server log's tail)."""
    client, server = serve_and_run(models, folder, [*argv, '-v'], *flags, **kw)
    report = client.stdout + client.stderr
    return dict(VERBOSE_VERDICT.findall(report)), report + '\nserver log:\n' + server.log()[-3000:]


def unittest_failures(report:str) -> str:
    "The FAIL and ERROR blocks of a unittest report (traceback and message), which a long client output pushes out of its tail."
    return '\n'.join(re.findall(r'^={20,}\n(?:FAIL|ERROR): .*?\n-{20,}\n.*?(?=^={20,}$|^-{20,}\nRan |\Z)', report, re.M | re.S))


def passed(run:tuple, test:str):
    "Fail unless `test` is `ok` in a `served_unittest` run; the message carries its verdict and the report's tail."
    outcomes, report = run
    assert outcomes.get(test) == 'ok', f'{test}: {outcomes.get(test)}\n{report[-5000:]}'


# --------------------------------------------------------------------------------------- L0_backend_python/test.sh itself
def top_models(qa:Path) -> Path:
    "The top-level test.sh's repository: L0_backend_python/models (MODELDIR is L0_backend_python)."
    models = qa / 'L0_backend_python' / 'models'
    shutil.rmtree(models, ignore_errors=True)
    return models


def clone_model(models:Path, source:str, name:str):
    "`cp -r models/SOURCE models/NAME` and `sed -i s/^name:.*/name: \"NAME\"/` of its config."
    shutil.copytree(models / source, models / name)
    sed(models / name / 'config.pbtxt', r'^name:.*', f'name: "{name}"')


def arrange_python_test(qa:Path) -> Path:
    """test.sh's first repository, for python_test.py: identity_fp32 cloned under other data types (sed on the config),
    default_model_name (model.py moved to mymodel.py), and the QA models its client asks for. init_args' config gets
    `TRITON_DIR_PATH` replaced by $TRITON_DIR, which the caller makes the folder holding qa/ (as /opt/tritonserver
    holds it in the container): the model checks its repository path against `$TRITON_DIR/qa/L0_backend_python/models`."""
    models = top_models(qa)
    for name in ('identity_fp32', 'identity_bf16'): cp_model(qa, models, name)
    clone_model(models, 'identity_fp32', 'identity_uint8')
    config = models / 'identity_uint8' / 'config.pbtxt'
    sed(config, 'TYPE_FP32', 'TYPE_UINT8')
    sed(config, r'^max_batch_size:.*', 'max_batch_size: 8')
    append(config, 'dynamic_batching { preferred_batch_size: [8], max_queue_delay_microseconds: 12000000 }')
    clone_model(models, 'identity_fp32', 'identity_uint8_nobatch')
    sed(models / 'identity_uint8_nobatch' / 'config.pbtxt', 'TYPE_FP32', 'TYPE_UINT8')
    sed(models / 'identity_uint8_nobatch' / 'config.pbtxt', r'^max_batch_size:.*', '')
    for name, dtype in (('identity_uint32', 'TYPE_UINT32'), ('identity_bool', 'TYPE_BOOL')):
        clone_model(models, 'identity_fp32', name)
        sed(models / name / 'config.pbtxt', 'TYPE_FP32', dtype)
    clone_model(models, 'identity_fp32', 'default_model_name')
    (models / 'default_model_name' / '1' / 'model.py').rename(models / 'default_model_name' / '1' / 'mymodel.py')
    append(models / 'default_model_name' / 'config.pbtxt', 'default_model_filename: "mymodel.py"')
    for name in ('pytorch_fp32_fp32', 'delayed_model', 'init_args', 'optional', 'non_contiguous', 'string', 'string_fixed',
                 'dlpack_identity'):
        cp_model(qa, models, name)
    sed(models / 'pytorch_fp32_fp32' / 'config.pbtxt', r'^name:.*', 'name: "pytorch_fp32_fp32"')
    sed(models / 'init_args' / 'config.pbtxt', 'TRITON_DIR_PATH', str(qa.parent))
    return models


def arrange_multi_file(qa:Path) -> Path:
    "test.sh's multi-file model: every .py of python_models/multi_file, with identity_fp32's config renamed."
    models = top_models(qa)
    (models / 'multi_file' / '1').mkdir(parents=True)
    for py in (qa / 'python_models' / 'multi_file').glob('*.py'): shutil.copy(py, models / 'multi_file' / '1')
    shutil.copy(qa / 'python_models' / 'identity_fp32' / 'config.pbtxt', models / 'multi_file')
    sed(models / 'multi_file' / 'config.pbtxt', r'^name:.*', 'name: "multi_file"')
    return models


def arrange_top_single(name:str):
    "test.sh's later servers: `rm -rf models/` and one QA model alone (model_env, identity_fp32, init_exit)."
    def arrange(qa:Path) -> Path:
        models = top_models(qa)
        cp_model(qa, models, name)
        return models
    arrange.__name__ = f'arrange_top_{name}'
    return arrange


# --------------------------------------------------------------------------------------- examples/test.sh
# Its examples in order: (case, [(example file, model folder/file)], the client's argv). Each adds its models to the one
# repository (test.sh never empties it) and starts a server on all of them; from auto_complete on, the servers get
# --strict-model-config=false. Left out (EXAMPLES_LEFT_OUT): jax and instance_kind.
EXAMPLES = [
    ('add_sub', [('add_sub/model.py', 'add_sub/1/model.py'), ('add_sub/config.pbtxt', 'add_sub/config.pbtxt')],
     ['examples/add_sub/client.py']),
    ('pytorch', [('pytorch/model.py', 'pytorch/1/model.py'), ('pytorch/config.pbtxt', 'pytorch/config.pbtxt')],
     ['examples/pytorch/client.py']),
    ('bls_sync', [('bls/sync_model.py', 'bls_sync/1/model.py'), ('bls/sync_config.pbtxt', 'bls_sync/config.pbtxt')],
     ['examples/bls/sync_client.py']),
    ('repeat_int32', [('decoupled/repeat_model.py', 'repeat_int32/1/model.py'),
                      ('decoupled/repeat_config.pbtxt', 'repeat_int32/config.pbtxt')], ['examples/decoupled/repeat_client.py']),
    ('square_int32', [('decoupled/square_model.py', 'square_int32/1/model.py'),
                      ('decoupled/square_config.pbtxt', 'square_int32/config.pbtxt')], ['examples/decoupled/square_client.py']),
    ('bls_async', [('bls/async_model.py', 'bls_async/1/model.py'), ('bls/async_config.pbtxt', 'bls_async/config.pbtxt')],
     ['examples/bls/async_client.py']),
    ('auto_complete', [('auto_complete/nobatch_model.py', 'nobatch_auto_complete/1/model.py'),
                       ('auto_complete/batch_model.py', 'batch_auto_complete/1/model.py')], ['examples/auto_complete/client.py']),
    ('bls_decoupled_sync', [('bls_decoupled/sync_model.py', 'bls_decoupled_sync/1/model.py'),
                            ('bls_decoupled/sync_config.pbtxt', 'bls_decoupled_sync/config.pbtxt')],
     ['examples/bls_decoupled/sync_client.py']),
    ('bls_decoupled_async', [('bls_decoupled/async_model.py', 'bls_decoupled_async/1/model.py'),
                             ('bls_decoupled/async_config.pbtxt', 'bls_decoupled_async/config.pbtxt')],
     ['examples/bls_decoupled/async_client.py']),
    ('custom_metrics', [('custom_metrics/model.py', 'custom_metrics/1/model.py'),
                        ('custom_metrics/config.pbtxt', 'custom_metrics/config.pbtxt')], ['examples/custom_metrics/client.py']),
]
EXAMPLES_LEFT_OUT = {
    'jax': 'needs JAX, which test.sh installs as jax[cuda12_local] from storage.googleapis.com (a network download of a '
           'CUDA build); no JAX is installed here',
    'instance_kind': "needs a network download: its resnet50 model fetches weights with torch.hub.load (and "
                     "torchvision, which is not installed); left out of the repository, which every later server loads"}


def examples_checkout(qa:Path) -> Path:
    "`git clone python_backend -b $PYTHON_BACKEND_REPO_TAG` (its examples/ only) into the subtest's folder; the cwd of its clients."
    folder = qa / 'L0_backend_python' / 'examples'
    _extract(PYTHON_BACKEND_REPO, PYTHON_BACKEND_TAG, ['examples'], folder / 'python_backend')
    return folder / 'python_backend'


def add_example(checkout:Path, files):
    "test.sh's `mkdir -p models/NAME/1` and `cp examples/... models/...` of one example."
    for source, dest in files:
        (checkout / 'models' / dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(checkout / 'examples' / source, checkout / 'models' / dest)


def run_script(folder:Path, argv, timeout:float=600) -> tuple:
    "`python3 ARGV > $CLIENT_LOG` then `grep PASS $CLIENT_LOG`: (outcome, message) from its exit code and output."
    try: r = subprocess.run([sys.executable, *argv], cwd=folder, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **CLIENT_ENV})
    except subprocess.TimeoutExpired as e: return 'failed', f'no exit within {timeout:.0f} s: {e.stdout!r:.3000}'
    ok = r.returncode == 0 and 'PASS' in r.stdout
    return ('passed' if ok else 'failed', f'exit {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}')


# --------------------------------------------------------------------------------------- the container's /dev/shm
SHM_SIZE = '1g'   # the QA container's `docker run --shm-size=1g` (python_test.py: "Total shared memory available is 1GiB")
_PRIVATE_SHM = f'mount -t tmpfs -o size={SHM_SIZE} tmpfs /dev/shm && exec "$0" "$@"'


def private_shm_missing() -> str | None:
    "None when a process can be given its own 1 GiB /dev/shm (a mount namespace: root or CAP_SYS_ADMIN), else why not."
    r = subprocess.run(['unshare', '-m', 'sh', '-c', _PRIVATE_SHM, 'true'], capture_output=True, text=True)
    return None if r.returncode == 0 else f'no private /dev/shm of {SHM_SIZE} here (unshare -m, mount tmpfs): {r.stderr.strip()}'


def in_private_shm(argv:list) -> list:
    "`argv` in its own mount namespace whose /dev/shm is a fresh tmpfs of SHM_SIZE, as the QA container's is."
    return ['unshare', '-m', 'sh', '-c', _PRIVATE_SHM, *argv]
