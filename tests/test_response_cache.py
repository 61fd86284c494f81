"""The response cache end to end (05c, wired in 07/09/10): HTTP requests, /v2/models/stats, /metrics, the flags, and
the same request sequence against the real Triton 2.51 with `--cache-config local,size=N` (the `oracle` tests)."""
import json, threading
from pathlib import Path

import pytest

import triton_servers as ts
from triton_mini.response_cache import ResponseCache

CONFIG = '''name: "{name}"
backend: "python"
max_batch_size: 8
input [ {{ name: "INPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
output [ {{ name: "OUTPUT0" data_type: TYPE_FP32 dims: [ -1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: 1 }} ]
{extra}'''

MODEL_PY = '''import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy())])
                for r in requests]
'''


FAILS_PY = '''import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "INPUT0").as_numpy()
            if (x < 0).any(): out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("negative")))
            else: out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", x)]))
        return out
'''

ENSEMBLE = '''name: "ens"
platform: "ensemble"
max_batch_size: 8
input [ { name: "X" data_type: TYPE_FP32 dims: [ -1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ -1 ] } ]
response_cache { enable: true }
ensemble_scheduling { step [ { model_name: "plain" model_version: -1 input_map { key: "INPUT0" value: "X" } output_map { key: "OUTPUT0" value: "Y" } } ] }
'''


def write_repo(root:Path) -> Path:
    "`cached` (response_cache enabled) and `plain` identity models, `fails` (an error for negative inputs), `ens` (cached, over plain)."
    for name, extra, py in (('cached', 'response_cache { enable: true }\n', MODEL_PY), ('plain', '', MODEL_PY),
                            ('fails', 'response_cache { enable: true }\n', FAILS_PY)):
        (root / name / '1').mkdir(parents=True)
        (root / name / 'config.pbtxt').write_text(CONFIG.format(name=name, extra=extra))
        (root / name / '1' / 'model.py').write_text(py)
    (root / 'ens' / '1').mkdir(parents=True)
    (root / 'ens' / 'config.pbtxt').write_text(ENSEMBLE)
    return root


def body(data, shape=None, **extra) -> dict:
    return {'inputs': [{'name': 'INPUT0', 'datatype': 'FP32', 'shape': shape or [1, len(data)], 'data': data}], **extra}


def infer(port, model, b) -> dict:
    status, _, text = ts.http(port, 'POST', f'/v2/models/{model}/infer', b)
    assert status == 200, text
    return json.loads(text)


def stats(port, model) -> dict:
    "The model's statistics once two reads agree on its counts (Triton counts a request when it releases it)."
    read = lambda: json.loads(ts.http(port, 'GET', f'/v2/models/{model}/stats')[2])['model_stats'][0]
    ts.settled(lambda: counts(read()))
    return read()


def counts(s:dict) -> dict:
    "The statistics a request sequence decides (durations vary)."
    return {'inference_count': s['inference_count'], 'execution_count': s['execution_count'],
            **{k: v['count'] for k, v in s['inference_stats'].items()}}


def metric_samples(port) -> dict:
    "nv_cache* samples: (name, labels) -> value, and the HELP line of each family."
    text = ts.http(port, 'GET', '/metrics')[2]
    samples, helps = {}, {}
    for line in text.splitlines():
        if line.startswith('# HELP nv_cache'): helps[line.split()[2]] = line
        elif line.startswith('nv_cache'):
            key, value = line.rsplit(' ', 1)
            samples[key] = float(value)
    return samples, helps


# The sequence every test sends: what Triton 2.51 answers is in the comments (checked by test_matches_real_triton).
SEQUENCE = [
    body([1, 2, 3, 4]),                                    # miss: runs the model
    body([1, 2, 3, 4]),                                    # hit
    body([1, 2, 3, 4], id='x', parameters={'foo': 1}),     # hit: id and parameters are not in the key
    body([1, 2, 3, 4], outputs=[{'name': 'OUTPUT0'}]),     # hit: nor the requested outputs
    body([1, 2, 3, 4], shape=[2, 2]),                      # hit, answered with the cached [1, 4] (shape is not in the key)
    body([5, 6, 7, 8]),                                    # miss
]
EXPECTED = {'inference_count': 2, 'execution_count': 2, 'success': 6, 'fail': 0, 'queue': 6, 'compute_input': 2,
            'compute_infer': 2, 'compute_output': 2, 'cache_hit': 4, 'cache_miss': 2}


@pytest.fixture
def repo(tmp_path): return write_repo(tmp_path / 'models')


def test_hits_skip_the_model(mini, repo):
    s = mini(repo, response_cache=ResponseCache(1 << 20))
    answers = [infer(s.http_port, 'cached', b) for b in SEQUENCE]
    assert [a['outputs'][0]['shape'] for a in answers] == [[1, 4]] * 5 + [[1, 4]]
    assert answers[2]['id'] == 'x' and 'id' not in answers[1]
    assert answers[4]['outputs'][0]['data'] == [1, 2, 3, 4]
    assert counts(stats(s.http_port, 'cached')) == EXPECTED
    samples, helps = metric_samples(s.metrics_port)
    assert samples['nv_cache_num_hits_per_model{model="cached",version="1"}'] == 4
    assert samples['nv_cache_num_misses_per_model{model="cached",version="1"}'] == 2
    assert (samples['nv_cache_num_entries'], samples['nv_cache_num_lookups'], samples['nv_cache_num_hits']) == (2, 6, 4)
    assert not any('plain' in k for k in samples)          # a model that does not ask has no cache series


def test_ensemble_caches_its_top_level(mini, repo):
    "An ensemble with response_cache: hits skip the whole graph; its step (no response_cache) ran once."
    s = mini(repo, response_cache=ResponseCache(1 << 20))
    ens = {'inputs': [{'name': 'X', 'datatype': 'FP32', 'shape': [1, 2], 'data': [1, 2]}]}
    assert [infer(s.http_port, 'ens', ens)['outputs'][0]['data'] for _ in range(3)] == [[1, 2]] * 3
    c, step = counts(stats(s.http_port, 'ens')), counts(stats(s.http_port, 'plain'))
    assert (c['success'], c['cache_hit'], c['cache_miss']) == (3, 2, 1)
    assert (step['execution_count'], step['cache_hit'], step['cache_miss']) == (1, 0, 0)


def test_errors_are_not_cached(mini, repo):
    "Unlike Triton 2.51 (test_error_responses_against_real_triton): a failed request runs again."
    s = mini(repo, response_cache=ResponseCache(1 << 20))
    for _ in range(2):
        status, _, text = ts.http(s.http_port, 'POST', '/v2/models/fails/infer', body([-1, 2]))
        assert status != 200 and json.loads(text) == {'error': 'negative'}
    c = counts(stats(s.http_port, 'fails'))
    assert (c['execution_count'], c['cache_hit'], c['cache_miss']) == (2, 0, 0)


def test_grpc_hits(mini, repo):
    grpcclient = pytest.importorskip('tritonclient.grpc')
    import numpy as np
    s = mini(repo, grpc=True, response_cache=ResponseCache(1 << 20))
    client = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}')
    x = grpcclient.InferInput('INPUT0', [1, 3], 'FP32'); x.set_data_from_numpy(np.array([[1, 2, 3]], np.float32))
    outs = [client.infer('cached', [x]).as_numpy('OUTPUT0').tolist() for _ in range(3)]
    assert outs == [[[1, 2, 3]]] * 3
    st = client.get_inference_statistics('cached', as_json=True)['model_stats'][0]['inference_stats']
    assert (int(st['cache_hit']['count']), int(st['cache_miss']['count'])) == (2, 1)


def test_model_without_server_cache_runs_every_request(mini, repo):
    "response_cache in the config but no --cache-config: Triton runs the model every time, and says nothing."
    s = mini(repo)
    for b in SEQUENCE[:3]: infer(s.http_port, 'cached', b)
    c = counts(stats(s.http_port, 'cached'))
    assert (c['execution_count'], c['cache_hit'], c['cache_miss']) == (3, 0, 0)
    samples, _ = metric_samples(s.metrics_port)
    assert samples['nv_cache_num_hits_per_model{model="cached",version="1"}'] == 0
    assert 'nv_cache_util' not in samples


def test_model_without_response_cache_is_not_cached(mini, repo):
    s = mini(repo, response_cache=ResponseCache(1 << 20))
    for b in SEQUENCE[:3]: infer(s.http_port, 'plain', b)
    c = counts(stats(s.http_port, 'plain'))
    assert (c['execution_count'], c['cache_hit'], c['cache_miss']) == (3, 0, 0)


def test_evictions_and_too_large_entries(mini, repo):
    "A 75-byte entry (CacheEntry layout) fits a 160-byte cache twice; the third evicts; a bigger one is never stored."
    cache = ResponseCache(160)
    s = mini(repo, response_cache=cache)
    for v in (1, 2, 3): infer(s.http_port, 'cached', body([v] * 4))
    assert (len(cache), cache.num_evictions) == (2, 1)
    infer(s.http_port, 'cached', body([0.0] * 64))          # 4 + 8 + 11 + 8 + 20 + 264 bytes > 160
    assert len(cache) == 2
    assert counts(stats(s.http_port, 'cached'))['cache_miss'] == 4   # counted, as Triton counts a failed insert


def test_concurrent_identical_requests(mini, repo):
    "Many clients with the same request: every answer is right; every request is a hit or a miss or neither (a lost insert race)."
    cache = ResponseCache(1 << 20)
    s = mini(repo, response_cache=cache)
    barrier, answers = threading.Barrier(8), []
    def client():
        barrier.wait()
        for _ in range(5): answers.append(infer(s.http_port, 'cached', body([9, 9]))['outputs'][0]['data'])
    threads = [threading.Thread(target=client) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    assert answers == [[9, 9]] * 40 and len(cache) == 1
    c = counts(stats(s.http_port, 'cached'))
    assert c['success'] == 40 and c['cache_hit'] + c['execution_count'] == 40 and c['cache_miss'] >= 1


def test_cli_flags(capsys):
    from triton_mini.cli import parse_args, ignored_flags
    args = parse_args(['--cache-config', 'local,size=1048576'])
    assert args.response_cache.size == 1048576 and ignored_flags(args) == []
    args = parse_args(['--response-cache-byte-size', '4096'])
    assert args.response_cache.size == 4096
    assert "'--response-cache-byte-size' has been deprecated!" in capsys.readouterr().err
    assert parse_args([]).response_cache is None
    with pytest.raises(SystemExit, match="unsupported cache 'redis'"): parse_args(['--cache-config', 'redis,host=x'])


def test_cli_serves_from_cache(mini_process, repo):
    s = mini_process(repo, '--cache-config', 'local,size=1048576')
    for b in SEQUENCE[:2]: infer(s.http_port, 'cached', b)
    assert counts(stats(s.http_port, 'cached'))['cache_hit'] == 1


@pytest.mark.oracle
def test_matches_real_triton(real_triton, mini, repo):
    "The same sequence against tritonserver 2.51 --cache-config local,size=1048576: answers, statistics, metric names and HELP texts."
    real = real_triton(repo, '--cache-config', 'local,size=1048576', '--metrics-interval-ms=100')
    ours = mini(repo, response_cache=ResponseCache(1048576))
    for b in SEQUENCE:
        theirs, mine = infer(real.http_port, 'cached', b), infer(ours.http_port, 'cached', b)
        assert mine == theirs
    assert counts(stats(ours.http_port, 'cached')) == counts(stats(real.http_port, 'cached')) == EXPECTED
    assert stats(ours.http_port, 'plain')['inference_stats']['cache_hit'] == stats(real.http_port, 'plain')['inference_stats']['cache_hit']
    ts.wait_until(lambda: metric_samples(real.metrics_port)[0].get('nv_cache_num_lookups') == 6, 30, "the oracle's cache gauges")
    (rs, rh), (ms, mh) = metric_samples(real.metrics_port), metric_samples(ours.metrics_port)
    assert mh == rh                                       # the same families, with Triton's HELP texts
    assert set(ms) == set(rs)                             # the same series and labels
    counted = [k for k in rs if 'duration' not in k and k != 'nv_cache_util']
    assert {k: ms[k] for k in counted} == {k: rs[k] for k in counted}


@pytest.mark.oracle
def test_ensemble_and_errors_against_real_triton(real_triton, mini, repo):
    """An ensemble's top-level cache counts as Triton's; an error response is where we differ on purpose: Triton 2.51
    caches it as an entry with no outputs, so the repeated request gets 200 {"outputs": []}; triton_mini runs it again."""
    real = real_triton(repo, '--cache-config', 'local,size=1048576')
    ours = mini(repo, response_cache=ResponseCache(1048576))
    ens = {'inputs': [{'name': 'X', 'datatype': 'FP32', 'shape': [1, 2], 'data': [1, 2]}]}
    for _ in range(3): assert infer(ours.http_port, 'ens', ens)['outputs'] == infer(real.http_port, 'ens', ens)['outputs']
    for model in ('ens', 'plain'): assert counts(stats(ours.http_port, model)) == counts(stats(real.http_port, model))
    first, again = (ts.http(real.http_port, 'POST', '/v2/models/fails/infer', body([-1, 2])) for _ in range(2))
    assert json.loads(first[2]) == {'error': 'negative'}
    assert (again[0], json.loads(again[2])['outputs']) == (200, [])      # Triton's cached error: an empty success
    assert counts(stats(real.http_port, 'fails'))['cache_hit'] == 1
    for _ in range(2): assert json.loads(ts.http(ours.http_port, 'POST', '/v2/models/fails/infer', body([-1, 2]))[2]) == {'error': 'negative'}
    assert counts(stats(ours.http_port, 'fails'))['cache_hit'] == 0


@pytest.mark.oracle
def test_no_server_cache_matches_real_triton(real_triton, mini, repo):
    real, ours = real_triton(repo), mini(repo)
    for b in SEQUENCE[:3]: assert infer(ours.http_port, 'cached', b) == infer(real.http_port, 'cached', b)
    assert counts(stats(ours.http_port, 'cached')) == counts(stats(real.http_port, 'cached'))
    (rs, rh), (ms, mh) = metric_samples(real.metrics_port), metric_samples(ours.metrics_port)
    assert (mh, set(ms)) == (rh, set(rs))


def reload_with(port, root:Path, model_py:str):
    "Rewrite cached/1/model.py and ask the server to load the model again (explicit mode)."
    (root / 'cached' / '1' / 'model.py').write_text(model_py)
    status, _, text = ts.http(port, 'POST', '/v2/repository/models/cached/load', {})
    assert status == 200, text


DOUBLE_PY = MODEL_PY.replace('.as_numpy())', '.as_numpy() * 2)')


def stale_after_reload(port, root:Path) -> list:
    "Answers to [1, 2] before and after a reload that doubles, then to new data."
    first = infer(port, 'cached', body([1, 2]))['outputs'][0]['data']
    reload_with(port, root, DOUBLE_PY)
    return [first, infer(port, 'cached', body([1, 2]))['outputs'][0]['data'], infer(port, 'cached', body([3, 4]))['outputs'][0]['data']]


def test_reload_keeps_entries(mini, repo):
    "The cache outlives a reload of the same version (its key is name + version): the old answer is served, as Triton does."
    s = mini(repo, response_cache=ResponseCache(1 << 20), model_control_mode='explicit', load_models=['cached'])
    assert stale_after_reload(s.http_port, repo) == [[1, 2], [1, 2], [6, 8]]


def test_decoupled_or_sequence_models_refuse_the_cache(mini, repo, caplog):
    for name, extra in (('dec', 'model_transaction_policy { decoupled: true }\nresponse_cache { enable: true }\n'),
                        ('seq', 'sequence_batching { }\nresponse_cache { enable: true }\n')):
        (repo / name / '1').mkdir(parents=True)
        (repo / name / 'config.pbtxt').write_text(CONFIG.format(name=name, extra=extra))
        (repo / name / '1' / 'model.py').write_text(MODEL_PY)
    s = mini(repo, response_cache=ResponseCache(1 << 20))
    assert set(s.failures) == {'dec', 'seq'}
    assert "Response Cache does not currently support model dec with 'decoupled' transaction policy" in caplog.text
    assert 'Response Cache does not currently support model seq with sequence batching scheduler' in caplog.text


@pytest.mark.oracle
def test_reload_and_refusals_against_real_triton(real_triton, mini, tmp_path):
    "Stale entries after a reload, and the load errors of decoupled/sequence models with the cache, as tritonserver 2.51."
    repos = [write_repo(tmp_path / side / 'models') for side in ('real', 'ours')]
    real = real_triton(repos[0], '--cache-config', 'local,size=1048576', '--model-control-mode=explicit', '--load-model=cached')
    ours = mini(repos[1], response_cache=ResponseCache(1048576), model_control_mode='explicit', load_models=['cached'])
    assert stale_after_reload(ours.http_port, repos[1]) == stale_after_reload(real.http_port, repos[0]) == [[1, 2], [1, 2], [6, 8]]
    for root in repos:
        for name, extra in (('dec', 'model_transaction_policy { decoupled: true }\nresponse_cache { enable: true }\n'),
                            ('seq', 'sequence_batching { }\nresponse_cache { enable: true }\n')):
            (root / name / '1').mkdir(parents=True)
            (root / name / 'config.pbtxt').write_text(CONFIG.format(name=name, extra=extra))
            (root / name / '1' / 'model.py').write_text(MODEL_PY)
    for name in ('dec', 'seq'):
        (rs, _, rt), (ms, _, mt) = (ts.http(p, 'POST', f'/v2/repository/models/{name}/load', {}) for p in (real.http_port, ours.http_port))
        assert (ms, json.loads(mt)) == (rs, json.loads(rt))
