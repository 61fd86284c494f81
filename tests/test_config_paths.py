"""Every path a config names stays inside its model folder, and load requests' files leave no folder behind
(issue 18 items 2 and 3).

One test per path-like field of the config schema: `label_filename` (read when the version loads and used by the
classification extension), `default_model_filename` (Python and ONNX backends, also for auto-complete),
`cc_model_filenames`, `model_warmup` `input_data_file`, `model_operations` `op_library_filename`, sequence
`initial_state` `data_file`, and the `file:` keys of a load request. Each escape (`..`, an absolute path where one
is not joined, a symlink pointing out) is refused with INVALID_ARG and reads or runs nothing. Where Triton 2.51
is safe its answer is copied and compared with the oracle (a missing or absolute label file, a `file:` key that
climbs out, an absolute `file:` key); where it is not (it reads `label_filename: "../secret.txt"` and returns it
as class labels), the test records what it does and that triton-mini refuses.

Load requests' files live in `triton_mini_override_*` temp folders; the tests point `tempfile` at a folder of
their own and check that none is left after load / reload / unload cycles and after the server stops.
"""
import base64, json, os, shutil, tempfile
from pathlib import Path

import numpy as np
import pytest

from triton_mini.cli import example_repository
from triton_mini.config_parser import ModelConfig
from triton_mini.server import TritonServer
from triton_mini.tensors import TritonError

from triton_servers import MiniTriton, http, start_together

OVERRIDE_PREFIX = 'triton_mini_override_'
STAY = 'must stay within model directory.'
SECRET = 'secret line one\nsecret line two\n'
EVIL = 'open(__file__ + ".RAN", "w").write("ran")\nclass TritonPythonModel:\n    def execute(self, requests): return []\n'


def make_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    for m in ('add_sub', 'linear_onnx'): shutil.copytree(example_repository() / m, root / m, ignore=shutil.ignore_patterns('__pycache__'))
    (root / 'secret.txt').write_text(SECRET)                 # next to the models, outside each model folder
    (root / 'add_sub' / 'labels.txt').write_text('l0\nl1\nl2\nl3\n')
    (root / 'add_sub' / 'link.txt').symlink_to(root / 'secret.txt')
    (root / 'elsewhere').mkdir(); (root / 'elsewhere' / 'evil.py').write_text(EVIL)   # a .py already on disk (not a model)
    return root


def add_sub_config(**changes) -> dict:
    cfg = {'name': 'add_sub', 'backend': 'python', 'max_batch_size': 8,
           'input': [{'name': n, 'data_type': 'TYPE_FP32', 'dims': [4]} for n in ('INPUT0', 'INPUT1')],
           'output': [{'name': n, 'data_type': 'TYPE_FP32', 'dims': [4]} for n in ('OUTPUT0', 'OUTPUT1')]}
    return {**cfg, **changes}


def with_label(label) -> dict:
    cfg = add_sub_config()
    cfg['output'][0]['label_filename'] = label
    return cfg


@pytest.fixture
def tmpdir_for_overrides(tmp_path, monkeypatch):
    d = tmp_path / 'tmp'
    d.mkdir()
    monkeypatch.setattr(tempfile, 'tempdir', str(d))
    return d


@pytest.fixture
def server(tmp_path, tmpdir_for_overrides):
    s = TritonServer(make_repo(tmp_path / 'models'), model_control_mode='explicit', load_models=['add_sub'])
    assert s.start() == {}
    yield s
    s.stop()


def load_error(server, name, config, files=None) -> str:
    with pytest.raises(TritonError) as e: server.load_model(name, config=json.dumps(config), files=files)
    return e.value.message


def refused(what, path) -> str:
    return f"load failed for model 'add_sub': version 1 is at UNAVAILABLE state: Invalid argument: Invalid {what} with normalized path '{path}' {STAY};\n"


def still_serving(server):
    x = np.ones((1, 4), np.float32)
    assert server.infer('add_sub', {'INPUT0': x, 'INPUT1': x})['OUTPUT0'].tolist() == [[2, 2, 2, 2]]
    assert all(not o.label_filename for o in server.model_config('add_sub').output)


# ------------------------------------------------------------------------------------------------ label_filename

@pytest.mark.parametrize('label', ['../../../../etc/passwd', '../secret.txt', 'link.txt', '1/../../secret.txt'])
def test_label_filename_outside_is_refused(server, label):
    model_dir = server.repository.models['add_sub'].model_dir
    resolved = os.path.realpath(model_dir / label)              # a symlink resolved too
    assert load_error(server, 'add_sub', with_label(label)) == refused(f"label_filename '{label}' of output 'OUTPUT0'", resolved)
    still_serving(server)                       # the version that served before keeps serving


def test_labels_inside_are_read_at_load_and_used_by_classification(tmp_path, tmpdir_for_overrides):
    mini = MiniTriton(make_repo(tmp_path / 'models'), model_control_mode='explicit', load_models=['add_sub'])
    try:
        mini.server.load_model('add_sub', config=json.dumps(with_label('labels.txt')))
        assert mini.server.repository.get('add_sub').labels == {'OUTPUT0': ['l0', 'l1', 'l2', 'l3']}
        body = {'inputs': [{'name': n, 'datatype': 'FP32', 'shape': [1, 4], 'data': [1, 5, 2, 3]} for n in ('INPUT0', 'INPUT1')],
                'outputs': [{'name': 'OUTPUT0', 'parameters': {'classification': 2}}]}
        status, _, text = http(mini.http_port, 'POST', '/v2/models/add_sub/infer', body)
        assert status == 200 and json.loads(text)['outputs'][0]['data'] == ['10.000000:1:l1', '6.000000:3:l3']
    finally: mini.stop()


def test_absolute_and_missing_label_files_answer_as_triton(server):
    "Triton joins an absolute label path to the model folder (`/etc/passwd` is `<model>/etc/passwd`), so it is just missing."
    model_dir = server.repository.models['add_sub'].model_dir
    for label in ('/etc/passwd', 'missing_labels.txt'):
        shown = os.path.join(str(model_dir), label.lstrip('/'))
        assert load_error(server, 'add_sub', with_label(label)) == (
            f"load failed for model 'add_sub': version 1 is at UNAVAILABLE state: Internal: failed to open text file for read {shown}: No such file or directory;\n")


# ------------------------------------------------------------------------------------------ default_model_filename

@pytest.mark.parametrize('fname', ['../../elsewhere/evil.py', '../../../{repo_name}/elsewhere/evil.py', 'evil_link.py'])
def test_python_default_model_filename_outside_is_refused_and_never_runs(server, fname):
    repo = server.repository.paths[0]
    (repo / 'add_sub' / '1' / 'evil_link.py').symlink_to(repo / 'elsewhere' / 'evil.py')
    fname = fname.format(repo_name=repo.name)
    message = load_error(server, 'add_sub', add_sub_config(default_model_filename=fname))
    assert message == refused(f"default_model_filename '{fname}'", (repo / 'elsewhere' / 'evil.py').resolve())
    assert not (repo / 'elsewhere' / 'evil.py.RAN').exists()       # neither auto-complete nor the load imported it
    still_serving(server)


def test_python_default_model_filename_of_another_version_is_fine(server):
    "`..` that stays inside the model folder is allowed: version 2 may run version 1's file."
    repo = server.repository.paths[0]
    shutil.copytree(repo / 'add_sub' / '1', repo / 'add_sub' / '2')
    (repo / 'add_sub' / '2' / 'model.py').unlink()
    server.load_model('add_sub', config=json.dumps(add_sub_config(default_model_filename='../1/model.py')))
    assert server.repository.get('add_sub').version == 2
    still_serving(server)


def onnx_config(**changes) -> dict:
    return {'name': 'linear_onnx', 'platform': 'onnxruntime_onnx', 'max_batch_size': 8,
            'input': [{'name': 'INPUT0', 'data_type': 'TYPE_FP32', 'dims': [4]}],
            'output': [{'name': 'OUTPUT0', 'data_type': 'TYPE_FP32', 'dims': [2]}], **changes}


def test_onnx_model_file_outside_is_refused(server):
    repo = server.repository.paths[0]
    shutil.copy(repo / 'linear_onnx' / '1' / 'model.onnx', repo / 'elsewhere' / 'stolen.onnx')
    message = load_error(server, 'linear_onnx', onnx_config(default_model_filename='../../elsewhere/stolen.onnx'))
    assert message == refused("default_model_filename '../../elsewhere/stolen.onnx'", (repo / 'elsewhere' / 'stolen.onnx').resolve()).replace("'add_sub'", "'linear_onnx'")
    from triton_mini.onnx_backend import model_file                          # the backend's own lookup refuses it too
    with pytest.raises(TritonError, match=STAY): model_file(repo / 'linear_onnx' / '1', '../../elsewhere/stolen.onnx', 'linear_onnx')
    cfg = server.complete(ModelConfig.from_json(json.dumps({'name': 'linear_onnx', 'platform': 'onnxruntime_onnx',
                                                            'default_model_filename': '../../elsewhere/stolen.onnx'})), repo / 'linear_onnx')
    assert cfg.input == []                                       # auto-complete never opened the file outside


# ------------------------------------------------------------------------------------ the other path-like fields

@pytest.mark.parametrize('changes, what, where', [
    ({'cc_model_filenames': {'8.0': '../../secret.txt'}}, "cc_model_filenames '../../secret.txt' for '8.0'", 'secret.txt'),
    ({'model_warmup': [{'name': 'w', 'batch_size': 1, 'inputs': {'INPUT0': {'data_type': 'TYPE_FP32', 'dims': [4], 'input_data_file': '../../secret.txt'},
                                                                  'INPUT1': {'data_type': 'TYPE_FP32', 'dims': [4], 'zero_data': True}}}]},
     "input_data_file '../../secret.txt' of warmup 'w' input 'INPUT0'", 'secret.txt'),
    ({'model_operations': {'op_library_filename': ['{repo}/elsewhere/libcustom.so']}}, "op_library_filename '{repo}/elsewhere/libcustom.so'", 'elsewhere/libcustom.so'),
    ({'sequence_batching': {'state': [{'input_name': 'IN_STATE', 'output_name': 'OUT_STATE', 'data_type': 'TYPE_FP32', 'dims': [1],
                                       'initial_state': [{'name': 'init', 'data_type': 'TYPE_FP32', 'dims': [1], 'data_file': '../../secret.txt'}]}]}},
     "data_file '../../secret.txt' of state 'IN_STATE'", 'secret.txt'),
])
def test_other_config_paths_outside_are_refused(server, changes, what, where):
    repo = server.repository.paths[0].resolve()
    changes = json.loads(json.dumps(changes).replace('{repo}', str(repo)))
    assert load_error(server, 'add_sub', add_sub_config(**changes)) == refused(what.format(repo=repo), repo / where)
    still_serving(server)


# --------------------------------------------------------------------------------------------- file: override keys

def test_file_keys_that_climb_out_write_nothing(server, tmpdir_for_overrides, caplog):
    before = sorted(p.name for p in tmpdir_for_overrides.parent.iterdir())
    for key in ('../../x', '1/../../x', '../' * 12 + 'tmp/x'):
        assert load_error(server, 'add_sub', add_sub_config(), {key: b'x'}) == "failed to load 'add_sub', failed to poll from model repository"
        assert f"Invalid file parameter 'file:{key}' with normalized path" in caplog.text
    assert sorted(p.name for p in tmpdir_for_overrides.parent.iterdir()) == before
    assert list(tmpdir_for_overrides.iterdir()) == []
    still_serving(server)


def test_an_absolute_file_key_is_joined_as_in_triton(server, tmpdir_for_overrides):
    "Triton writes `file:/x/model.py` under its temp folder; so does triton-mini (here: no version folder, so no version)."
    assert load_error(server, 'add_sub', add_sub_config(), {str(tmpdir_for_overrides / 'abs.py'): b'x'}) == (
        "load failed for model 'add_sub': at least one version must be available under the version policy of model 'add_sub'\n")
    assert not (tmpdir_for_overrides / 'abs.py').exists() and list(tmpdir_for_overrides.iterdir()) == []


@pytest.mark.parametrize('files', [{'1/' + 'a' * 300 + '/model.py': b'x'}, {'/'.join(['c' * 200] * 30) + '/f': b'x'},
                                   {'1/model.py': b'x', '1/model.py/inner': b'y'}])
def test_file_paths_the_filesystem_refuses_answer_the_poll_failure(server, tmpdir_for_overrides, caplog, files):
    "An over-long name (Triton 2.51 aborts on it) or a file where a folder must go: Triton's poll failure, never an OSError text."
    assert load_error(server, 'add_sub', add_sub_config(), files) == "failed to load 'add_sub', failed to poll from model repository"
    assert "Poll failed for model directory 'add_sub'" in caplog.text
    assert list(tmpdir_for_overrides.iterdir()) == []
    still_serving(server)


# ------------------------------------------------------------------------------------------ override folder cleanup

def overrides(d: Path) -> list: return sorted(p.name for p in d.iterdir() if p.name.startswith(OVERRIDE_PREFIX))


def test_override_folders_are_removed_on_reload_unload_and_stop(tmp_path, tmpdir_for_overrides):
    repo = make_repo(tmp_path / 'models')
    model_py = (repo / 'add_sub' / '1' / 'model.py').read_bytes()
    fresh = json.dumps(add_sub_config(name='fresh'))
    server = TritonServer(repo, model_control_mode='explicit', load_models=['add_sub'])
    server.start()
    x = np.ones((1, 4), np.float32)
    try:
        for cycle in range(5):
            server.load_model('add_sub', config=json.dumps(add_sub_config()), files={'1/model.py': model_py})   # from files
            server.load_model('add_sub', config=json.dumps(add_sub_config()), files={'1/model.py': model_py})   # other files
            server.load_model('fresh', config=fresh, files={'1/model.py': model_py})                            # not in the repository
            assert server.infer('fresh', {'INPUT0': x, 'INPUT1': x})['OUTPUT0'].tolist() == [[2, 2, 2, 2]]
            server.repository.wait_for_unloads()
            assert len(overrides(tmpdir_for_overrides)) == 2                    # exactly the two that serve
            server.load_model('add_sub')                                        # back to the repository's folder
            with pytest.raises(TritonError, match="failed to load 'fresh', failed to poll from model repository"):
                server.load_model('fresh')                                      # only its files knew it, as in Triton
            server.unload_model('fresh')
            server.repository.wait_for_unloads()
            assert overrides(tmpdir_for_overrides) == []
        server.load_model('fresh', config=fresh, files={'1/model.py': model_py})
        assert len(overrides(tmpdir_for_overrides)) == 1
    finally: server.stop()
    assert overrides(tmpdir_for_overrides) == []                                # stop removes what still served


# ----------------------------------------------------------------------------------------------------- the oracle

@pytest.fixture(scope='module')
def both(tmp_path_factory, launch_module):
    "The real Triton and triton-mini on the very same repository (explicit mode, add_sub loaded)."
    repo = make_repo(tmp_path_factory.mktemp('paths_oracle') / 'models')
    real, mini = start_together(lambda: launch_module.real_triton(repo, '--model-control-mode=explicit', '--load-model=add_sub'),
                                lambda: launch_module.mini(repo, model_control_mode='explicit', load_models=['add_sub']))
    return real, mini, repo


def load_over_http(port, config, files=None):
    params = {'config': json.dumps(config), **{f'file:{k}': base64.b64encode(v).decode() for k, v in (files or {}).items()}}
    status, _, text = http(port, 'POST', '/v2/repository/models/add_sub/load', {'parameters': params})
    return status, (json.loads(text) if text else None)


@pytest.mark.oracle
@pytest.mark.parametrize('config, files', [(with_label('/etc/passwd'), None), (with_label('missing_labels.txt'), None),
                                           (add_sub_config(), {'../../x': b'x'}), (add_sub_config(), {'1/../../x': b'x'}),
                                           (add_sub_config(), {'/abs.py': b'x'})])
def test_safe_cases_answer_like_triton(both, config, files):
    real, mini, _ = both
    assert load_over_http(mini.http_port, config, files) == load_over_http(real.http_port, config, files)
    for s in (real, mini): assert load_over_http(s.http_port, add_sub_config())[0] == 200


@pytest.mark.oracle
def test_triton_2_51_reads_labels_outside_the_model_folder(both):
    "What triton-mini deliberately does not copy: 2.51 serves the secret next to the model as class labels."
    real, mini, repo = both
    body = {'inputs': [{'name': n, 'datatype': 'FP32', 'shape': [1, 4], 'data': [1, 5, 2, 3]} for n in ('INPUT0', 'INPUT1')],
            'outputs': [{'name': 'OUTPUT0', 'parameters': {'classification': 2}}]}
    try:
        assert load_over_http(real.http_port, with_label('../secret.txt'))[0] == 200
        status, _, text = http(real.http_port, 'POST', '/v2/models/add_sub/infer', body)
        assert json.loads(text)['outputs'][0]['data'] == ['10.000000:1:secret line two', '6.000000:3']
        status, err = load_over_http(mini.http_port, with_label('../secret.txt'))
        assert status == 400 and STAY in err['error']
        status, _, text = http(mini.http_port, 'POST', '/v2/models/add_sub/infer', body)
        assert json.loads(text)['outputs'][0]['data'] == ['10.000000:1', '6.000000:3']      # still the model without labels
    finally: load_over_http(real.http_port, add_sub_config())


def test_classification_uses_the_labels_read_at_load(tmp_path, tmpdir_for_overrides):
    "An absolute label path is `<model>/etc/...` at load; classification must not re-read it as `/etc/...` later."
    repo = make_repo(tmp_path / 'models')
    outside = repo / 'elsewhere' / 'labels.txt'
    outside.write_text('SECRET0\nSECRET1\nSECRET2\nSECRET3\n')
    model_py = (repo / 'add_sub' / '1' / 'model.py').read_bytes()
    mini = MiniTriton(repo, model_control_mode='explicit')
    try:
        files = {'1/model.py': model_py, str(outside).lstrip('/'): b'own0\nown1\nown2\nown3\n'}   # the joined path exists
        mini.server.load_model('add_sub', config=json.dumps(with_label(str(outside))), files=files)
        body = {'inputs': [{'name': n, 'datatype': 'FP32', 'shape': [1, 4], 'data': [1, 5, 2, 3]} for n in ('INPUT0', 'INPUT1')],
                'outputs': [{'name': 'OUTPUT0', 'parameters': {'classification': 1}}]}
        status, _, text = http(mini.http_port, 'POST', '/v2/models/add_sub/infer', body)
        assert status == 200 and json.loads(text)['outputs'][0]['data'] == ['10.000000:1:own1']
    finally: mini.stop()
