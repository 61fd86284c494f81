"""Triton's PyTorch-backend QA that needs no GPU, run on triton-mini's pytorch backend the way each test.sh runs it.

The QA is NVIDIA's, not ours: it is read at test time from a git directory of triton-inference-server/server
(`$TRITON_SERVER_REPO`, default the mirror under /work/.mirror; tag v2.51.0) and never copied into the project. Its
model, `qa_model_repository/libtorch_int32_int32_int32` (versions 1-3, `version_policy: { all { }}`), is made by the
QA's own generator, `qa/common/gen_qa_models.py --libtorch`, run unchanged with this machine's CPU torch; the
generated models live in a temporary folder and are never committed.

Subtests (each is the same script with another parameter): L0_libtorch_inference_mode (INFERENCE_MODE),
L0_libtorch_disable_cudnn (DISABLE_CUDNN), L0_libtorch_optimized_execution (DISABLE_OPTIMIZED_EXECUTION). For FLAG in
true, false test.sh appends the parameter to the model's config, starts the server with `--log-verbose=1`, runs
`qa/common/libtorch_infer_client.py` unchanged (it must exit 0: one add/sub inference, checked value by value) and
requires exactly 3 log lines with the backend's message (one per loaded version). The real Triton oracle has no
PyTorch backend, so the QA's own checks are the judge.

The client hard-codes localhost:8000, so every server here binds the default HTTP port (gRPC and metrics are off),
under the machine-wide lock the Python-backend QA uses (`triton_python_qa.serve_and_run`, `served_unittest`).

L0_libtorch_io_names: eight copies of `libtorch_float32_float32_float32` (versions 1 and 3), their tensor names
rewritten with test.sh's `sed` edits (`IO_NAMES_SEDS`), served together; its unittest client (run with `-v`, so that
each of its eight tests reports its own verdict) checks that every naming convention reaches the right argument.

L0_libtorch_io_types: three repositories that must not load, each made by test.sh's own `cp` and `sed` lines (read
from the script and run with bash, `$DATADIR` the temporary folder): `libtorch_int32_int8_int8` with a TYPE_UINT32
input, the same with TYPE_UINT64 outputs, and `qa_variable_sequence_model_repository/libtorch_sequence_int32` (made by
`qa/common/gen_qa_sequence_models.py --libtorch --variable`, unchanged) with its READY control turned into a
TYPE_UINT32 CORRID. As run_server does, each server must not become ready; test.sh's grep for the backend's text must
find it in the log. One adaptation: the sequence generator writes `instance_group [{ kind: KIND_GPU }]` (the QA
container has a GPU); with no GPU the core refuses that instance group ("has kind KIND_GPU but no GPUs are
available") before the backend sees the config, so KIND_GPU becomes KIND_CPU in the staged copy (`ON_CPU`); the
data-type check under test does not depend on the device. Nothing connects to these servers (no client), so they
bind free ports, not the default ones.

L0_libtorch_instance_group_kind_model and L0_libtorch_shared_weights need GPUs.
"""
from __future__ import annotations

import importlib.util, io, os, re, shutil, subprocess, sys, tarfile
from pathlib import Path

import pytest

import triton_python_qa as pyqa
from triton_servers import MiniProcess, skip_or_fail

TAG = 'v2.51.0'
SERVER_REPO = Path(os.environ.get('TRITON_SERVER_REPO') or '/work/.mirror/triton-inference-server+server/repo')
MODEL = 'libtorch_int32_int32_int32'
# subtest: (the parameter its test.sh appends, {FLAG: the message it counts in the server's log})
SUBTESTS = {
    'L0_libtorch_inference_mode': ('INFERENCE_MODE', {'true': 'Inference Mode is enabled', 'false': 'Inference Mode is disabled'}),
    'L0_libtorch_disable_cudnn': ('DISABLE_CUDNN', {'true': 'cuDNN is disabled', 'false': 'cuDNN is enabled'}),
    'L0_libtorch_optimized_execution': ('DISABLE_OPTIMIZED_EXECUTION',
                                        {'true': 'Optimized execution is disabled', 'false': 'Optimized execution is enabled'}),
}
CASES = [(s, flag) for s in SUBTESTS for flag in ('true', 'false')]


def missing() -> str | None:
    "None when the QA can run here, else why not."
    if importlib.util.find_spec('torch') is None:
        return "Triton's libtorch QA needs torch (its model generator and triton-mini's pytorch backend): pip install -e '.[pytorch]'"
    r = subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'rev-parse', '--verify', '-q', f'{TAG}^{{commit}}'], capture_output=True)
    if r.returncode:
        return (f"Triton's libtorch QA is read from a git directory of triton-inference-server/server with tag {TAG}: "
                f'$TRITON_SERVER_REPO ({SERVER_REPO}) is not one')
    return None


@pytest.fixture(scope='module')
def qa_source(tmp_path_factory):
    "The QA folders at TAG: qa/common and the subtests'."
    if why := missing(): skip_or_fail('libtorch_qa', why)
    dest = tmp_path_factory.mktemp('libtorch-qa')
    tar = subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'archive', '--format=tar', TAG, 'qa/common', *(f'qa/{s}' for s in SUBTESTS), 'qa/L0_libtorch_io_names', 'qa/L0_libtorch_io_types'],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t: t.extractall(dest, filter='data')
    return dest / 'qa'


@pytest.fixture(scope='module')
def qa(qa_source):
    "qa_source, with qa_model_repository beside it made by `gen_qa_models.py --libtorch` (run from its folder, qa/common)."
    qa = qa_source
    gen = subprocess.run([sys.executable, 'gen_qa_models.py', '--libtorch', f'--models_dir={qa.parent / "qa_model_repository"}'],
                         cwd=qa / 'common', capture_output=True, text=True, timeout=900)
    assert gen.returncode == 0, f'gen_qa_models.py --libtorch failed:\n{gen.stdout[-2000:]}\n{gen.stderr[-4000:]}'
    return qa


def stage(qa:Path, subtest:str, flag:str) -> Path:
    "`mkdir -p models && cp -r $DATADIR/libtorch_int32_int32_int32 models/.` and the parameter echoed onto its config."
    models = qa / subtest / 'models'
    shutil.rmtree(models, ignore_errors=True)
    shutil.copytree(qa.parent / 'qa_model_repository' / MODEL, models / MODEL)
    key = SUBTESTS[subtest][0]
    with open(models / MODEL / 'config.pbtxt', 'a') as f:   # echo """ ... """ >> config.pbtxt
        f.write(f'\n    parameters: {{\n        key: "{key}"\n        value: {{\n            string_value: "{flag}"\n        }}\n    }}\n')
    return models


@pytest.mark.slow
@pytest.mark.default_ports
@pytest.mark.parametrize('subtest,flag', CASES, ids=[f'{s}-{f}' for s, f in CASES])
def test_mini_passes_libtorch_qa(qa, subtest, flag):
    models = stage(qa, subtest, flag)
    client, server = pyqa.serve_and_run(models, qa / subtest, ['../common/libtorch_infer_client.py'], '--log-verbose=1')
    log = server.log()
    assert client.returncode == 0, f'the client failed:\n{client.stdout[-3000:]}\n{client.stderr[-3000:]}\nserver log:\n{log[-3000:]}'
    message = SUBTESTS[subtest][1][flag]
    count = sum(message in line for line in log.splitlines())    # grep -c "$MESSAGE" $SERVER_LOG
    assert count == 3, f'expected 3 lines with {message!r} in the log, found {count}:\n{log[-3000:]}'


def test_table_follows_test_sh(qa_source):
    "SUBTESTS says what each test.sh appends and counts: read back from the scripts themselves."
    for subtest, (key, messages) in SUBTESTS.items():
        sh = (qa_source / subtest / 'test.sh').read_text()
        assert f'key: \\"{key}\\"' in sh and f'cp -r $DATADIR/{MODEL} models/.' in sh, subtest
        stem = re.search(r'^\s*(\w+)_LOG="([^"]* )"$', sh, re.M).group(2)   # e.g. INFERMODE_LOG="Inference Mode is "
        on, off = re.search(r'if \[ "\$FLAG" == "true" \]; then\s+\w+\+=(\w+)\s+else\s+\w+\+=(\w+)', sh).groups()
        assert messages == {'true': stem + on, 'false': stem + off}, subtest
        assert '!= "3"' in sh and '--log-verbose=1' in sh, subtest


# L0_libtorch_io_names/test.sh: `cp -r $DATADIR/libtorch_float32_float32_float32 models/NAME && sed -i 's/OLD/NEW/' ...`
# for each model, in its order (the model's own name is the first edit of each).
IO_NAMES_SEDS = {
    'libtorch_output_index': [],
    'libtorch_io_index': [('INPUT0', 'INPUT__0'), ('INPUT1', 'INPUT__1')],
    'libtorch_no_output_index': [('OUTPUT__0', 'OUTPUT0'), ('OUTPUT__1', 'OUTPUT1')],
    'libtorch_no_arguments_output_index': [('INPUT0', 'INPUTA'), ('INPUT1', 'INPUTB'), ('OUTPUT__0', 'OUTPUTA'), ('OUTPUT__1', 'OUTPUTB')],
    'libtorch_mix_index': [('INPUT0', 'INPUTA'), ('INPUT1', 'INPUT__1'), ('OUTPUT__0', 'OUTPUTA')],
    'libtorch_mix_arguments': [('INPUT1', 'INPUTB'), ('OUTPUT__0', 'OUTPUTA')],
    'libtorch_mix_arguments_index': [('INPUT1', 'INPUT__1'), ('OUTPUT__0', 'OUTPUT0')],
    'libtorch_unordered_index': [('INPUT0', 'INPUT_TMP1'), ('INPUT1', 'INPUT0'), ('INPUT_TMP1', 'INPUT1'),
                                 ('OUTPUT__0', 'OUT__1'), ('OUTPUT__1', 'OUT__0')],
}
IO_NAMES_TESTS = ('test_io_index', 'test_output_index', 'test_no_output_index', 'test_no_arguments_no_output_index',
                  'test_mix_index', 'test_mix_arguments', 'test_mix_arguments_index', 'test_unordered_index')


def sed_i(path:Path, old:str, new:str):
    "`sed -i 's/OLD/NEW/' PATH`: the first match on each line (the patterns here are plain words)."
    path.write_text(''.join(re.sub(re.escape(old), new, line, count=1) for line in path.read_text().splitlines(keepends=True)))


@pytest.fixture(scope='module')
def io_names_run(qa):
    "L0_libtorch_io_names arranged as its test.sh arranges it, served, its client run once: {test name: outcome}."
    where = qa / 'L0_libtorch_io_names'
    models = where / 'models'
    shutil.rmtree(models, ignore_errors=True)
    models.mkdir()
    for name, edits in IO_NAMES_SEDS.items():
        shutil.copytree(qa.parent / 'qa_model_repository' / 'libtorch_float32_float32_float32', models / name)
        for old, new in [('libtorch_float32_float32_float32', name), *edits]: sed_i(models / name / 'config.pbtxt', old, new)
    return pyqa.served_unittest(models, where, ['io_names_client.py'])


@pytest.mark.slow
@pytest.mark.default_ports
@pytest.mark.parametrize('test', IO_NAMES_TESTS)
def test_mini_passes_libtorch_io_names(io_names_run, test):
    pyqa.passed(io_names_run, test)


def test_io_names_table_follows_test_sh(qa_source):
    "IO_NAMES_SEDS and IO_NAMES_TESTS say what test.sh edits and what the client tests: read back from the files."
    sh = (qa_source / 'L0_libtorch_io_names' / 'test.sh').read_text()
    edits = {}
    for block in re.findall(r'cp -r \$DATADIR/libtorch_float32_float32_float32 models/(\w+)(.*?)\n\n', sh, re.S):
        name, rest = block
        edits[name] = [(o, n) for o, n in re.findall(r"sed -i 's/(\w+)/(\w+)/'", rest)][1:]
    assert edits == IO_NAMES_SEDS
    client = (qa_source / 'L0_libtorch_io_names' / 'io_names_client.py').read_text()
    assert tuple(re.findall(r'def (test_\w+)', client)) == IO_NAMES_TESTS


# L0_libtorch_io_types/test.sh: the model each stage builds -> the text its grep must find in the server's log.
IO_TYPES_GREPS = {
    'libtorch_invalid_input_type': "unsupported datatype TYPE_UINT32 for input 'INPUT0' for model 'libtorch_invalid_input_type'",
    'libtorch_invalid_output_type': "unsupported datatype TYPE_UINT64 for output 'OUTPUT__0' for model 'libtorch_invalid_output_type'",
    'libtorch_invalid_sequence_int32': "input 'CORRID__2' type 'TYPE_UINT32' is not supported by PyTorch.",
}
ON_CPU = ('KIND_GPU', 'KIND_CPU')   # the one adaptation (module docstring): the sequence generator's instance group


def io_types_stages(sh:str) -> dict:
    "test.sh's stages: {model built: (its `rm -rf models ...` through `sed` lines, the text it greps for)}."
    stages = {}
    for build, grep in re.findall(r'^(rm -rf models && mkdir -p models\n.*?)\n\nrm -f \*\.log\n.*?^grep "(.*?)" \$SERVER_LOG$', sh, re.M | re.S):
        stages[re.search(r'models/(\w+) &&', build).group(1)] = (build, grep)
    return stages


@pytest.fixture(scope='module')
def io_types_data(qa):
    "$DATADIR for L0_libtorch_io_types: qa_model_repository (the `qa` fixture) and qa_variable_sequence_model_repository."
    if shutil.which('bash') is None or shutil.which('sed') is None:
        skip_or_fail('libtorch_qa', "L0_libtorch_io_types builds its models with test.sh's own bash and sed lines: bash or sed is missing")
    gen = subprocess.run([sys.executable, 'gen_qa_sequence_models.py', '--libtorch', '--variable',
                          f'--models_dir={qa.parent / "qa_variable_sequence_model_repository"}'],
                         cwd=qa / 'common', capture_output=True, text=True, timeout=900)
    assert gen.returncode == 0, f'gen_qa_sequence_models.py --libtorch --variable failed:\n{gen.stdout[-2000:]}\n{gen.stderr[-4000:]}'
    return qa.parent


@pytest.mark.slow
@pytest.mark.parametrize('model', IO_TYPES_GREPS)
def test_mini_passes_libtorch_io_types(qa, io_types_data, model):
    where = qa / 'L0_libtorch_io_types'
    build, grep = io_types_stages((where / 'test.sh').read_text())[model]
    made = subprocess.run(['bash', '-e', '-c', build], cwd=where, env={**os.environ, 'DATADIR': str(io_types_data)},
                          capture_output=True, text=True, timeout=60)
    assert made.returncode == 0, f'test.sh\'s lines for {model} failed:\n{build}\n{made.stderr}'
    config = where / 'models' / model / 'config.pbtxt'
    config.write_text(config.read_text().replace(*ON_CPU))
    server = MiniProcess(where / 'models', check=False, grpc=False, metrics=False)   # run_server: SERVER_PID=0 unless ready
    server.stop()
    log = server.log()
    assert not server.up, f'{model}: the server started, test.sh expects it not to:\n{log[-3000:]}'
    assert grep in log, f'{model}: {grep!r} is not in the server log:\n{log[-3000:]}'


def test_io_types_table_follows_test_sh(qa_source):
    "IO_TYPES_GREPS names the models test.sh builds and the texts it greps for, in its order."
    stages = io_types_stages((qa_source / 'L0_libtorch_io_types' / 'test.sh').read_text())
    assert {m: g for m, (_, g) in stages.items()} == IO_TYPES_GREPS
    assert list(stages) == list(IO_TYPES_GREPS)
