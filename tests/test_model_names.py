"""Model names that could leave the repository are refused wherever a name comes in (issue 18 item 1, CVE-2023-31036).

The cases are those of Triton's `qa/L0_input_validation/input_validation_test.py::ModelNameValidationTest`, which
tests the `ValidateModelName` check of newer Triton cores (a load of a name that, trimmed of whitespace, is empty,
`..` or contains `/` is refused with INVALID_ARG; an unload is not checked). Triton 2.51, the oracle, predates that
check: it was observed to look `..` and `../../../../etc` up as model folders outside the repository (answering
"at least one version must be available ..."), so the oracle tests here compare the cases where 2.51 and newer
Triton agree (valid names, unloads) and record the 2.51 behaviour triton-mini deliberately does not copy.

Every entrance is covered: HTTP and gRPC repository load/unload, BLS `pb_utils.load_model`, start-up
`--load-model`, and folders found on disk. The issue's exploits (a `file:` override whose model name climbs out of
the temp dir, or rewrites a served model, or is absolute; HTTP `/v2/repository/models/../load`) are replayed
and shown to write nothing: not in the target folders, not in the temp dir, not in the repository index.
"""
import base64, http.client, json, os, shutil, tempfile, textwrap
from pathlib import Path

import numpy as np
import pytest

grpc = pytest.importorskip('grpc')
grpcclient = pytest.importorskip('tritonclient.grpc')
from tritonclient.grpc import service_pb2 as pb, service_pb2_grpc as pb_grpc
from tritonclient.utils import InferenceServerException

from triton_mini.cli import example_repository
from triton_mini.model_repository import find_models

OVERRIDE_PREFIX = 'triton_mini_override_'   # the temp folders of load requests' files
from triton_mini.server import TritonServer

from triton_servers import MiniTriton, http

# Triton's ModelNameValidationTest, verbatim, plus the two names triton-mini also refuses ('.' and a NUL)
INVALID_TRAVERSAL_NAMES = ['../etc', 'a/../b', '../../etc/passwd', '../../../../etc', 'model/..', '..', '/etc/passwd',
                           'model/subdir', 'model/', ' ..', '.. ']
ALSO_REFUSED = ['.', ' . ', 'a\x00b']
WHITESPACE_NAMES = [' ', '   ', '\t', '\n', '\r', '\f', '\v', ' \t \n ']
VALID_MODEL_NAMES = ['model123', 'model.version1', '...', '..my_model', 'model..1', 'model....1']
TRAVERSAL = 'model name must not contain path traversal characters'
EMPTY = 'Model name cannot be empty. Please enter a valid name to deploy.'

ADD_SUB = {'name': 'add_sub', 'backend': 'python', 'max_batch_size': 8,
           'input': [{'name': n, 'data_type': 'TYPE_FP32', 'dims': [4]} for n in ('INPUT0', 'INPUT1')],
           'output': [{'name': n, 'data_type': 'TYPE_FP32', 'dims': [4]} for n in ('OUTPUT0', 'OUTPUT1')]}

BLS_LOADER = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            name = pb_utils.get_input_tensor_by_name(r, "NAME").as_numpy()[0].decode()
            files = json.loads(pb_utils.get_input_tensor_by_name(r, "FILES").as_numpy()[0].decode())
            files = {k: v.encode() for k, v in files.items()}
            try:
                pb_utils.load_model(name, config=json.dumps(dict(CONFIG, name=name)) if files else "", files=files or None)
                text = "loaded"
            except pb_utils.TritonModelException as e:
                text = str(e)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("TEXT", np.array([text.encode()], dtype=np.object_))]))
        return out
'''


def bls_loader_dir(root: Path):
    d = root / 'bls_loader'
    (d / '1').mkdir(parents=True)
    (d / 'config.pbtxt').write_text(textwrap.dedent('''\
        name: "bls_loader"
        backend: "python"
        max_batch_size: 0
        input [ { name: "NAME" data_type: TYPE_STRING dims: [ 1 ] }, { name: "FILES" data_type: TYPE_STRING dims: [ 1 ] } ]
        output [ { name: "TEXT" data_type: TYPE_STRING dims: [ 1 ] } ]
        '''))
    (d / '1' / 'model.py').write_text(f'CONFIG = {json.dumps(ADD_SUB)}\n' + BLS_LOADER)


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    for m in ('add_sub', 'identity_bytes'): shutil.copytree(example_repository() / m, root / m, ignore=shutil.ignore_patterns('__pycache__'))
    bls_loader_dir(root)
    return root


def snapshot(*dirs) -> dict:
    "Every file under `dirs` with its bytes: to prove a refused request wrote nothing."
    out = {}
    for d in dirs:
        for p in sorted(Path(d).rglob('*')):
            if '__pycache__' not in p.parts: out[str(p)] = p.read_bytes() if p.is_file() else None
    return out


@pytest.fixture(scope='module')
def env(tmp_path_factory):
    "triton-mini in explicit mode over HTTP and gRPC; load-request files go to a temp dir of the test's own."
    base = tmp_path_factory.mktemp('names')
    tmpdir, target = base / 'tmp', base / 'target'
    tmpdir.mkdir(); (target / 'victim').mkdir(parents=True)
    repo = make_repo(base / 'models')
    mp = pytest.MonkeyPatch()
    mp.setattr(tempfile, 'tempdir', str(tmpdir))
    mini = MiniTriton(repo, grpc=True, model_control_mode='explicit', load_models=['identity_bytes', 'bls_loader'])
    try: yield {'mini': mini, 'grpc_url': f'127.0.0.1:{mini.grpc_port}', 'repo': repo, 'tmp': tmpdir, 'target': target}
    finally:
        mini.stop(); mp.undo()


@pytest.fixture
def client(env):
    with grpcclient.InferenceServerClient(env['grpc_url']) as c: yield c


def load_error(client, name, **kw):
    with pytest.raises(InferenceServerException) as e: client.load_model(name, **kw)
    return e.value.status(), e.value.message()


# ------------------------------------------------------------------------------ Triton's ModelNameValidationTest

@pytest.mark.parametrize('name', INVALID_TRAVERSAL_NAMES + ALSO_REFUSED)
def test_model_name_invalid_load(client, name):
    assert load_error(client, name) == ('StatusCode.INVALID_ARGUMENT', f"invalid model name '{name}', {TRAVERSAL}")


@pytest.mark.parametrize('name', [''] + WHITESPACE_NAMES)
def test_model_name_empty_load(client, name):
    assert load_error(client, name) == ('StatusCode.INVALID_ARGUMENT', EMPTY)


def test_model_name_invalid_unload(client, env):
    "Triton does not check names on unload: an unknown name unloads nothing, successfully."
    index = lambda: sorted((m.name, m.version, m.state) for m in client.get_model_repository_index().models)
    before, target = index(), sorted(p.name for p in env['target'].rglob('*'))
    assert ('identity_bytes', '1', 'READY') in before and ('bls_loader', '1', 'READY') in before
    for name in INVALID_TRAVERSAL_NAMES + ALSO_REFUSED:
        client.unload_model(name)                                      # raises on an error status: it succeeds
    assert index() == before                                           # nothing unloaded, nothing listed anew
    assert client.is_model_ready('identity_bytes') and client.is_model_ready('bls_loader')
    assert sorted(p.name for p in env['target'].rglob('*')) == target  # and nothing written outside the repository


@pytest.mark.parametrize('name', VALID_MODEL_NAMES)
def test_model_name_valid(client, name):
    status, message = load_error(client, name)
    assert 'path traversal characters' not in message
    assert (status, message) == ('StatusCode.INTERNAL', f"failed to load '{name}', failed to poll from model repository")


# ------------------------------------------------------------------------------------------------ over HTTP

@pytest.mark.parametrize('segment, name', [('..', '..'), ('.', '.')])
def test_http_traversal_segment_is_refused(env, segment, name):
    "A raw `..` path segment reaches the handler (no client normalises it away here) and is refused with 400."
    status, _, body = http(env['mini'].http_port, 'POST', f'/v2/repository/models/{segment}/load', b'')
    assert (status, json.loads(body)) == (400, {'error': f"invalid model name '{name}', {TRAVERSAL}"})


@pytest.mark.parametrize('segment', ['%2E%2E', 'a%2Fb', '%2Fetc', '%20'])
def test_http_encoded_name_is_taken_literally(env, segment):
    "Like Triton, the repository route does not percent-decode the name: `%2E%2E` is a (missing) model of that name."
    status, _, body = http(env['mini'].http_port, 'POST', f'/v2/repository/models/{segment}/load', b'')
    assert (status, json.loads(body)) == (500, {'error': f"failed to load '{segment}', failed to poll from model repository"})


def test_http_unload_of_traversal_name_is_harmless(env):
    status, _, body = http(env['mini'].http_port, 'POST', '/v2/repository/models/../unload', b'')
    assert (status, body) == (200, '')


# --------------------------------------------------------------------------------------- the exploits

def override_request(name, files, config=None):
    params = {'config': pb.ModelRepositoryParameter(string_param=json.dumps(config or dict(ADD_SUB, name=os.path.basename(name))))}
    params.update({f'file:{k}': pb.ModelRepositoryParameter(bytes_param=v) for k, v in files.items()})
    return pb.RepositoryModelLoadRequest(model_name=name, parameters=params)


def test_exploits_write_nothing(env):
    "The issue's four exploits are refused before anything is written, and leave no trace in the index."
    repo, tmpdir, target = env['repo'], env['tmp'], env['target']
    model_py = (repo / 'add_sub' / '1' / 'model.py').read_bytes()
    rel_target = os.path.relpath(target / 'victim', tmpdir / 'x')   # from <tmp>/<override folder>, where <name> lands
    rel_repo = os.path.relpath(repo / 'identity_bytes', tmpdir / 'x')
    index_before = env['mini'].server.repository_index()
    before = snapshot(repo, tmpdir, target)
    channel = grpc.insecure_channel(env['grpc_url'])
    stub = pb_grpc.GRPCInferenceServiceStub(channel)
    try:
        for name, files in [(rel_target, {'1/model.py': model_py}), (rel_repo, {'config.pbtxt': b'name: "pwned"'}),
                            (str(target / 'abs'), {'1/model.py': model_py}), ('../../../../' + str(target).lstrip('/'), {'1/model.py': model_py})]:
            with pytest.raises(grpc.RpcError) as e: stub.RepositoryModelLoad(override_request(name, files))
            assert (e.value.code(), e.value.details()) == (grpc.StatusCode.INVALID_ARGUMENT, f"invalid model name '{name}', {TRAVERSAL}")
    finally: channel.close()
    body = {'parameters': {'config': json.dumps(dict(ADD_SUB, name='..')), 'file:1/model.py': base64.b64encode(model_py).decode()}}
    status, _, text = http(env['mini'].http_port, 'POST', '/v2/repository/models/../load', body)
    assert (status, json.loads(text)) == (400, {'error': f"invalid model name '..', {TRAVERSAL}"})
    assert snapshot(repo, tmpdir, target) == before                           # nothing written, anywhere
    assert not [p for p in tmpdir.iterdir() if p.name.startswith(OVERRIDE_PREFIX)]
    assert env['mini'].server.repository_index() == index_before
    assert env['mini'].server.model_config('identity_bytes').name == 'identity_bytes'   # the served model is untouched


# ------------------------------------------------------------------------------ BLS, start-up, folders on disk

def bls_load(env, name, files=None) -> str:
    resp = env['mini'].server.infer('bls_loader', {'NAME': np.array([name.encode()], dtype=object),
                                                   'FILES': np.array([json.dumps(files or {}).encode()], dtype=object)})
    return resp['TEXT'][0].decode()


def test_bls_load_model_refuses_traversal_names(env):
    model_py = (env['repo'] / 'add_sub' / '1' / 'model.py').read_text()
    before = snapshot(env['tmp'], env['target'])
    escape = '../../../../' + str(env['target'] / 'victim').lstrip('/')
    assert bls_load(env, escape, {'file:1/model.py': model_py}) == f"invalid model name '{escape}', {TRAVERSAL}"
    assert bls_load(env, '..') == f"invalid model name '..', {TRAVERSAL}"
    assert bls_load(env, '  ') == EMPTY
    assert snapshot(env['tmp'], env['target']) == before


def test_bls_load_model_with_triton_style_file_keys(env):
    "pb_utils.load_model takes Triton's `file:` keys; the model loads from them (and its folder goes with it)."
    model_py = (env['repo'] / 'add_sub' / '1' / 'model.py').read_text()
    assert bls_load(env, 'bls_fresh', {'file:1/model.py': model_py}) == 'loaded'
    x = np.ones((1, 4), np.float32)
    assert env['mini'].server.infer('bls_fresh', {'INPUT0': x, 'INPUT1': x})['OUTPUT0'].tolist() == [[2, 2, 2, 2]]
    env['mini'].server.unload_model('bls_fresh')
    env['mini'].server.repository.wait_for_unloads()
    assert not [p for p in env['tmp'].iterdir() if p.name.startswith(OVERRIDE_PREFIX)]


def test_startup_load_model_names_are_checked(tmp_path):
    repo = make_repo(tmp_path / 'models')
    server = TritonServer(repo, model_control_mode='explicit', load_models=['../models/add_sub', 'add_sub', ' '])
    try:
        assert server.start() == {'../models/add_sub': f"invalid model name '../models/add_sub', {TRAVERSAL}", ' ': EMPTY}
        assert [e['name'] for e in server.repository_index(ready=True)] == ['add_sub']
    finally: server.stop()


def test_cli_exits_on_a_traversal_startup_model(tmp_path):
    from triton_mini.cli import main
    repo = make_repo(tmp_path / 'models')
    assert main(['--model-repository', str(repo), '--model-control-mode=explicit', '--load-model=../models/add_sub',
                 '--allow-http=false', '--allow-grpc=false', '--allow-metrics=false']) == 1


def test_folders_with_unsafe_names_are_not_models(tmp_path, caplog):
    repo = make_repo(tmp_path / 'models')
    (repo / ' ..').mkdir()                       # trimmed, Triton's rule sees '..'
    (repo / ' ').mkdir()
    assert sorted(find_models([repo])) == ['add_sub', 'bls_loader', 'identity_bytes']
    assert "failed to poll model directory ' ..': invalid model name ' ..'" in caplog.text


# ----------------------------------------------------------------------------------------------- the oracle

@pytest.fixture(scope='module')
def oracle(tmp_path_factory, launch_module):
    repo = make_repo(tmp_path_factory.mktemp('names_oracle') / 'models')
    return launch_module.real_triton(repo, '--model-control-mode=explicit', '--load-model=identity_bytes')


@pytest.mark.oracle
def test_valid_names_and_unloads_answer_like_triton(oracle, client):
    with grpcclient.InferenceServerClient(f'127.0.0.1:{oracle.grpc_port}') as real:
        for name in VALID_MODEL_NAMES:
            assert load_error(real, name) == load_error(client, name)
        for name in INVALID_TRAVERSAL_NAMES:
            real.unload_model(name); client.unload_model(name)       # unloads are not checked, by either


@pytest.mark.oracle
def test_triton_2_51_lacks_the_check(oracle, client):
    "What triton-mini deliberately does not copy: 2.51 resolves `..` to the repository's parent and looks for versions there."
    with grpcclient.InferenceServerClient(f'127.0.0.1:{oracle.grpc_port}') as real:
        status, message = load_error(real, '..')
        assert (status, message) == ('StatusCode.INVALID_ARGUMENT',
                                     "load failed for model '..': at least one version must be available under the version policy of model '..'\n")
        assert load_error(client, '..') == ('StatusCode.INVALID_ARGUMENT', f"invalid model name '..', {TRAVERSAL}")
