"""Triton's FIL backend (nbs/04d_fil_backend.ipynb) on forests trained here with XGBoost and LightGBM: every
`model_type`, and every output mode (`output_class`, `predict_proba`, `threshold`), served and compared with the
predictions of the training library itself; the config errors in the backend's words (rapids_triton's
get_config_param, fil_backend's serialization.h: Triton 2.51 = FIL backend 24.10). The real Triton of the oracle
(PyPI's nvidia-pytriton) ships without the FIL backend, so the training libraries are the reference."""
import json
from pathlib import Path

import numpy as np
import pytest

xgb = pytest.importorskip('xgboost')
lgb = pytest.importorskip('lightgbm')
pytest.importorskip('treelite')

from triton_mini.server import TritonServer
from triton_servers import MiniProcess, http

RNG = np.random.default_rng(7)
X = RNG.random((400, 6), dtype=np.float32)
Y2 = (X[:, 0] + X[:, 1] > 1).astype(int)
Y3 = np.minimum((X[:, 2] * 3).astype(int), 2)
ROWS = X[:17]


def config(model_type, dims, output_class, predict_proba=None, threshold=None, features=6, extra=''):
    params = [('model_type', model_type), ('output_class', output_class)]
    if predict_proba is not None: params.append(('predict_proba', predict_proba))
    if threshold is not None: params.append(('threshold', threshold))
    p = ',\n'.join(f'  {{ key: "{k}" value: {{ string_value: "{v}" }} }}' for k, v in params)
    return (f'backend: "fil"\nmax_batch_size: 1024\ninput [{{ name: "input__0" data_type: TYPE_FP32 dims: [ {features} ] }}]\n'
            f'output [{{ name: "output__0" data_type: TYPE_FP32 dims: [ {dims} ] }}]\nparameters [\n{p}\n]\n{extra}')


def trained():
    "(name, file name, model_type, save(path), predict(rows) -> the library's own prediction, classes)"
    d2, d3 = xgb.DMatrix(X, label=Y2), xgb.DMatrix(X, label=Y3)
    binary = xgb.train({'objective': 'binary:logistic', 'max_depth': 3}, d2, 15)
    multi = xgb.train({'objective': 'multi:softprob', 'num_class': 3, 'max_depth': 3}, d3, 15)
    reg = xgb.train({'objective': 'reg:squarederror', 'max_depth': 4}, xgb.DMatrix(X, label=X[:, 3] * 5), 15)
    lbin = lgb.train({'objective': 'binary', 'verbose': -1, 'num_leaves': 7}, lgb.Dataset(X, Y2), 15)
    lmulti = lgb.train({'objective': 'multiclass', 'num_class': 3, 'verbose': -1, 'num_leaves': 7}, lgb.Dataset(X, Y3), 15)
    xp = lambda b: (lambda rows: b.predict(xgb.DMatrix(rows)))
    return {
        'xgb_json': ('xgboost.json', 'xgboost_json', lambda p: binary.save_model(p), xp(binary), 1),
        'xgb_ubj': ('xgboost.ubj', 'xgboost_ubj', lambda p: binary.save_model(p), xp(binary), 1),
        'xgb_multi': ('xgboost.json', 'xgboost_json', lambda p: multi.save_model(p), xp(multi), 3),
        'xgb_reg': ('xgboost.json', 'xgboost_json', lambda p: reg.save_model(p), xp(reg), 0),
        'lgb_binary': ('model.txt', 'lightgbm', lambda p: lbin.save_model(str(p)), lbin.predict, 1),
        'lgb_multi': ('model.txt', 'lightgbm', lambda p: lmulti.save_model(str(p)), lmulti.predict, 3),
    }


MODELS = trained()
# (model, mode) -> (output dims, output_class, predict_proba, threshold, expected answer from the library's own prediction)
# A one-value answer is [rows], not [rows, 1]: Triton's FIL backend removes each 1 from the output's dims (RAPIDS-Triton's
# squeeze_output; fil_backend's qa/L0_e2e compares its regression model's answer with a 1-D ground truth).
CASES = {}
for name, (_, _, _, predict, classes) in MODELS.items():
    p = predict(ROWS).astype(np.float32)
    if classes == 0: CASES[(name, 'value')] = (1, 'false', None, None, p)
    elif classes == 1:
        CASES[(name, 'class')] = (1, 'true', 'false', '0.5', (p > 0.5).astype(np.float32))
        CASES[(name, 'class at 0.8')] = (1, 'true', None, '0.8', (p > 0.8).astype(np.float32))
        CASES[(name, 'proba')] = (2, 'true', 'true', '0.5', np.stack([1 - p, p], axis=1))
    else:
        CASES[(name, 'class')] = (1, 'true', 'false', '0.5', p.argmax(axis=1).astype(np.float32))
        CASES[(name, 'proba')] = (3, 'true', 'true', '0.5', p)


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp('fil') / 'models'
    for (name, mode), (dims, oc, pp, th, _) in CASES.items():
        fname, mtype, save, _, _ = MODELS[name]
        folder = root / f"{name}-{mode.replace(' ', '_')}"
        (folder / '1').mkdir(parents=True)
        save(folder / '1' / fname)
        (folder / 'config.pbtxt').write_text(config(mtype, dims, oc, pp, th))
    return root


@pytest.fixture(scope='module')
def server(repo):
    s = TritonServer(repo, model_control_mode='explicit', load_models=['*'])
    assert s.start() == {}
    yield s
    s.stop()


@pytest.mark.parametrize('case', list(CASES), ids=[f'{n}-{m}' for n, m in CASES])
def test_answers_what_the_library_predicts(server, case):
    name, mode = case
    expected = CASES[case][4]
    got = server.infer(f"{name}-{mode.replace(' ', '_')}", {'input__0': ROWS})['output__0']
    assert got.dtype == np.float32 and got.shape == expected.shape
    assert np.allclose(got, expected, atol=2e-6), np.abs(got - expected).max()


def test_treelite_checkpoint_and_legacy_names(tmp_path):
    "A Treelite checkpoint of the LightGBM model; a custom file name through default_model_filename."
    import treelite
    fname, _, save, predict, _ = MODELS['lgb_multi']
    save(tmp_path / 'm.txt')
    (tmp_path / 'models' / 'ck' / '1').mkdir(parents=True)
    treelite.frontend.load_lightgbm_model(str(tmp_path / 'm.txt')).serialize(str(tmp_path / 'models' / 'ck' / '1' / 'checkpoint.tl'))
    (tmp_path / 'models' / 'ck' / 'config.pbtxt').write_text(config('treelite_checkpoint', 3, 'true', 'true', '0.5'))
    (tmp_path / 'models' / 'named' / '1').mkdir(parents=True)
    MODELS['xgb_json'][2](tmp_path / 'models' / 'named' / '1' / 'forest.json')
    (tmp_path / 'models' / 'named' / 'config.pbtxt').write_text(config('xgboost_json', 1, 'false', extra='default_model_filename: "forest.json"'))
    with TritonServer(tmp_path / 'models', model_control_mode='explicit', load_models=['*']) as s:
        assert s.start() == {}
        assert np.allclose(s.infer('ck', {'input__0': ROWS})['output__0'], predict(ROWS), atol=2e-6)
        assert np.allclose(s.infer('named', {'input__0': ROWS})['output__0'].ravel(), MODELS['xgb_json'][3](ROWS), atol=2e-6)


@pytest.mark.parametrize('cfg, error', [
    (config('xgboost_json', 1, 'true', threshold='0.5').replace('  { key: "output_class" value: { string_value: "true" } },\n', ''),
     'Required parameter output_class not found in config'),
    (config('xgboost_json', 1, 'true'), 'Required parameter threshold not found in config'),
    (config('xgboost_json', 1, 'maybe', threshold='0.5'), 'Bad input for parameter output_class'),
    (config('catboost', 1, 'true', threshold='0.5'), 'catboost not recognized as a valid serialization format.'),
    (config('xgboost_json', 3, 'true', 'true', '0.5'), "'output__0' has dims [3], the forest needs [2]"),
    (config('xgboost_json', 1, 'true', threshold='0.5', features=5), "'input__0' has dims [5], the forest needs [6]"),
    (config('lightgbm', 1, 'true', threshold='0.5'), "unable to find"),
])
def test_config_errors_fail_the_load_with_the_backends_words(tmp_path, cfg, error):
    (tmp_path / 'm' / '1').mkdir(parents=True)
    MODELS['xgb_json'][2](tmp_path / 'm' / '1' / 'xgboost.json')
    (tmp_path / 'm' / 'config.pbtxt').write_text(cfg)
    with TritonServer(tmp_path, model_control_mode='explicit', load_models=['m']) as s:
        failures = s.start()
        assert 'm' in failures and error in failures['m'], failures


def test_served_over_http_and_grpc_with_tritonclient(repo):
    "The `triton-mini` command serves the FIL models to Triton's own clients; a batch of rows in, one answer per row."
    import tritonclient.http as httpclient, tritonclient.grpc as grpcclient
    s = MiniProcess(repo, '--model-control-mode=explicit', '--load-model=xgb_multi-proba', '--load-model=lgb_binary-class')
    try:
        expected = CASES[('xgb_multi', 'proba')][4]
        for module, port in ((httpclient, s.http_port), (grpcclient, s.grpc_port)):
            c = module.InferenceServerClient(f'127.0.0.1:{port}')
            i = module.InferInput('input__0', list(ROWS.shape), 'FP32'); i.set_data_from_numpy(ROWS)
            assert np.allclose(c.infer('xgb_multi-proba', [i]).as_numpy('output__0'), expected, atol=2e-6)
        status, _, body = http(s.http_port, 'POST', '/v2/models/lgb_binary-class/infer',
                               {'inputs': [{'name': 'input__0', 'datatype': 'FP32', 'shape': [2, 6], 'data': ROWS[:2].ravel().tolist()}]})
        assert status == 200 and json.loads(body)['outputs'][0]['data'] == CASES[('lgb_binary', 'class')][4][:2].ravel().tolist()
    finally: assert s.stop() == 0
