"""The real `tritonclient.http` (sync and aio) against triton-mini's HTTP frontend on a real socket.

Everything a Triton user's client code does: health, metadata, config, infer with JSON and binary
tensors, BYTES, requested outputs, async_infer, the aio client, repository load/unload, statistics,
plus compression and request-size limits. Behaviour is checked against what real Triton 2.51 does
(../shared/spec/http-protocol.md); tests/test_conformance.py compares the two servers directly.
"""
import asyncio, gzip, json, shutil, urllib.request, urllib.error
from pathlib import Path

import numpy as np
import pytest

httpclient = pytest.importorskip('tritonclient.http')
aioclient = pytest.importorskip('tritonclient.http.aio')
from tritonclient.utils import InferenceServerException

from triton_mini.cli import example_repository

MODELS = ['add_sub', 'identity_bytes', 'add_sub_ensemble', 'linear_onnx']


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp('http') / 'models'
    shutil.copytree(example_repository(), root, ignore=shutil.ignore_patterns('qwen*', '__pycache__'))
    return root


@pytest.fixture(scope='module')
def url(repo, launch_module):
    mini = launch_module.mini(repo, metrics=False, http_options={'max_input_size': 1 << 20}, model_control_mode='explicit', load_models=MODELS)
    assert mini.failures == {}
    return f'127.0.0.1:{mini.http_port}'


@pytest.fixture
def client(url): return httpclient.InferenceServerClient(url)


def add_sub_inputs(a, b, binary=True):
    ins = [httpclient.InferInput('INPUT0', list(a.shape), 'FP32'), httpclient.InferInput('INPUT1', list(b.shape), 'FP32')]
    ins[0].set_data_from_numpy(a, binary_data=binary)
    ins[1].set_data_from_numpy(b, binary_data=binary)
    return ins


def test_health_and_metadata(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready('add_sub') and not client.is_model_ready('nope') and not client.is_model_ready('add_sub', '7')
    meta = client.get_server_metadata()
    assert meta['name'] == 'triton' and 'binary_tensor_data' in meta['extensions']
    m = client.get_model_metadata('add_sub')
    assert m == {'name': 'add_sub', 'versions': ['1'], 'platform': 'python',
                 'inputs': [{'name': 'INPUT0', 'datatype': 'FP32', 'shape': [-1, 4]}, {'name': 'INPUT1', 'datatype': 'FP32', 'shape': [-1, 4]}],
                 'outputs': [{'name': 'OUTPUT0', 'datatype': 'FP32', 'shape': [-1, 4]}, {'name': 'OUTPUT1', 'datatype': 'FP32', 'shape': [-1, 4]}]}
    assert client.get_model_metadata('add_sub_ensemble')['platform'] == 'ensemble'
    cfg = client.get_model_config('add_sub')
    assert list(cfg)[:6] == ['name', 'platform', 'backend', 'runtime', 'version_policy', 'max_batch_size']
    assert cfg['instance_group'][0]['name'] == 'add_sub_0' and cfg['default_model_filename'] == 'model.py'
    with pytest.raises(InferenceServerException, match="Request for unknown model: 'nope' is not found"):
        client.get_model_metadata('nope')


@pytest.mark.parametrize('binary', [True, False])
def test_infer_add_sub(client, binary):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.1, np.float32)
    outs = [httpclient.InferRequestedOutput('OUTPUT0', binary_data=binary), httpclient.InferRequestedOutput('OUTPUT1', binary_data=not binary)]
    r = client.infer('add_sub', add_sub_inputs(a, b, binary), outputs=outs, request_id='r-1')
    np.testing.assert_array_equal(r.as_numpy('OUTPUT0'), a + b)
    np.testing.assert_array_equal(r.as_numpy('OUTPUT1'), a - b)
    resp = r.get_response()
    assert resp['id'] == 'r-1' and resp['model_version'] == '1'
    assert [o['name'] for o in resp['outputs']] == ['OUTPUT0', 'OUTPUT1']


def test_requested_output_subset_and_parameters(client):
    a = np.ones((1, 4), np.float32)
    r = client.infer('add_sub', add_sub_inputs(a, a), outputs=[httpclient.InferRequestedOutput('OUTPUT1')], parameters={'note': 'x'})
    assert r.as_numpy('OUTPUT0') is None and r.as_numpy('OUTPUT1').tolist() == [[0, 0, 0, 0]]


def test_bytes_round_trip(client):
    data = np.array([b'hello', b'', 'héllo ☃'.encode(), b'\x00\xff'], dtype=object)
    for binary in (True, False):
        if not binary: data = data[:3]   # JSON cannot carry arbitrary bytes from this client
        inp = httpclient.InferInput('IN', [len(data)], 'BYTES')
        inp.set_data_from_numpy(data, binary_data=binary)
        r = client.infer('identity_bytes', [inp], outputs=[httpclient.InferRequestedOutput('OUT', binary_data=binary)])
        want = data.tolist() if binary else [b.decode() for b in data]   # tritonclient gives str for JSON BYTES
        assert r.as_numpy('OUT').tolist() == want


def test_ensemble_and_onnx(client):
    x = np.array([[1, 2, 3, 4]], np.float32)
    inp = httpclient.InferInput('X', [1, 4], 'FP32'); inp.set_data_from_numpy(x)
    r = client.infer('add_sub_ensemble', [inp])
    assert r.as_numpy('SUM').tolist() == [[2, 4, 6, 8]] and r.as_numpy('DIFF').tolist() == [[0, 0, 0, 0]]
    meta = client.get_model_metadata('linear_onnx')
    assert meta['platform'] == 'onnxruntime_onnx'   # the config's platform field, as Triton reports it
    x = np.ones([2] + meta['inputs'][0]['shape'][1:], np.float32)
    inp = httpclient.InferInput(meta['inputs'][0]['name'], list(x.shape), 'FP32'); inp.set_data_from_numpy(x)
    out = client.infer('linear_onnx', [inp]).as_numpy(meta['outputs'][0]['name'])
    assert out.shape[0] == 2 and np.all(out[0] == out[1])


def test_errors_reach_the_client(client):
    a = np.ones((1, 4), np.float32)
    with pytest.raises(InferenceServerException, match="data-type is 'INT32', but model 'add_sub' expects 'FP32'"):
        ins = add_sub_inputs(a, a)
        ins[1] = httpclient.InferInput('INPUT1', [1, 4], 'INT32'); ins[1].set_data_from_numpy(a.astype(np.int32))
        client.infer('add_sub', ins)
    with pytest.raises(InferenceServerException, match=r'inference request batch-size must be <= 8'):
        client.infer('add_sub', add_sub_inputs(np.ones((9, 4), np.float32), np.ones((9, 4), np.float32)))
    with pytest.raises(InferenceServerException, match="unexpected inference output 'NOPE'"):
        client.infer('add_sub', add_sub_inputs(a, a), outputs=[httpclient.InferRequestedOutput('NOPE')])


def test_async_infer_and_statistics(client):
    before = client.get_inference_statistics('add_sub')['model_stats'][0]['inference_count']
    a = np.ones((1, 4), np.float32)
    handles = [client.async_infer('add_sub', add_sub_inputs(a * i, a)) for i in range(5)]
    assert [h.get_result().as_numpy('OUTPUT0')[0, 0] for h in handles] == [1, 2, 3, 4, 5]
    st = client.get_inference_statistics('add_sub')['model_stats'][0]
    assert st['inference_count'] == before + 5 and st['inference_stats']['success']['count'] >= 5
    with pytest.raises(InferenceServerException, match="requested model 'nope' is not available"):
        client.get_inference_statistics('nope')


def test_aio_client(url):
    async def run():
        c = aioclient.InferenceServerClient(url)
        try:
            assert await c.is_server_ready()
            a = np.ones((1, 4), np.float32)
            ins = [aioclient.InferInput('INPUT0', [1, 4], 'FP32'), aioclient.InferInput('INPUT1', [1, 4], 'FP32')]
            for i in ins: i.set_data_from_numpy(a)
            results = await asyncio.gather(*[c.infer('add_sub', ins) for _ in range(8)])
            return [r.as_numpy('OUTPUT0').tolist() for r in results]
        finally: await c.close()
    assert asyncio.run(run()) == [[[2, 2, 2, 2]]] * 8


def test_load_unload_and_index(client):
    assert {'name': 'add_sub', 'version': '1', 'state': 'READY'} in client.get_model_repository_index()
    client.unload_model('identity_bytes')
    for _ in range(100):
        if not client.is_model_ready('identity_bytes'): break
    assert not client.is_model_ready('identity_bytes')
    client.load_model('identity_bytes')
    assert client.is_model_ready('identity_bytes')
    cfg = json.dumps({'name': 'identity_bytes', 'backend': 'python', 'max_batch_size': 0,
                      'input': [{'name': 'IN', 'data_type': 'TYPE_STRING', 'dims': [-1]}],
                      'output': [{'name': 'OUT', 'data_type': 'TYPE_STRING', 'dims': [-1]}],
                      'parameters': {'loaded_with': {'string_value': 'override'}}})
    client.load_model('identity_bytes', config=cfg)
    assert client.get_model_config('identity_bytes')['parameters'] == {'loaded_with': {'string_value': 'override'}}
    with pytest.raises(InferenceServerException, match="failed to load 'nope', failed to poll from model repository"):
        client.load_model('nope')


def _post(url, path, body, headers=None):
    req = urllib.request.Request(f'http://{url}{path}', data=body, headers=headers or {}, method='POST')
    try:
        with urllib.request.urlopen(req) as r: return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e: return e.code, dict(e.headers), e.read()


def test_compression_both_ways(url):
    body = json.dumps({'inputs': [{'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]},
                                  {'name': 'INPUT1', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 1, 1, 1]}]}).encode()
    status, headers, out = _post(url, '/v2/models/add_sub/infer', gzip.compress(body),
                                 {'Content-Encoding': 'gzip', 'Accept-Encoding': 'gzip'})
    assert status == 200 and headers['content-encoding'] == 'gzip'
    assert json.loads(gzip.decompress(out))['outputs'][0]['data'] == [2.0, 3.0, 4.0, 5.0]
    status, headers, out = _post(url, '/v2/models/add_sub/infer', body, {'Content-Encoding': 'br'})
    assert (status, json.loads(out)) == (501, {'error': 'Unsupported compression type'})
    assert headers['accept-encoding'] == 'gzip, deflate'


def test_request_size_limit(url):
    "A body over --http-max-input-size is refused from its Content-Length, before it is read."
    import socket
    host, port = url.split(':')
    with socket.create_connection((host, int(port))) as s:
        s.sendall(b'POST /v2/models/add_sub/infer HTTP/1.1\r\nHost: x\r\nContent-Length: 2097152\r\n\r\n{"inputs"')
        data = b''
        while b'\r\n\r\n' not in data or len(data.partition(b'\r\n\r\n')[2]) < int(data.split(b'content-length: ')[1].split(b'\r\n')[0]):
            chunk = s.recv(65536)      # head and body may come in separate segments
            if not chunk: break
            data += chunk
        head, _, body = data.partition(b'\r\n\r\n')
    assert head.startswith(b'HTTP/1.1 413') and b'exceeds the maximum input size' in body
