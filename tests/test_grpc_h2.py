"""The opt-in h2 gRPC transport (nbs/08f_grpc_h2.ipynb) against grpc.aio, on one TritonServer: the same answers,
the same statuses and texts, through the real tritonclient.grpc (sync and aio).

The whole of tests/test_grpc.py, test_grpc_hardening.py and test_grpc_fuzz.py also runs on the transport with
TRITON_MINI_GRPC_TRANSPORT=h2 (TLS included: test_grpc_hardening.py's test_tls runs on both transports).
"""
import asyncio

import numpy as np
import pytest

grpcclient = pytest.importorskip('tritonclient.grpc')
aioclient = pytest.importorskip('tritonclient.grpc.aio')
from tritonclient.utils import InferenceServerException

from triton_mini.server import TritonServer
from triton_mini.grpc_server import GRPCService, GRPCOptions
from triton_mini import grpc_h2

from triton_servers import copy_models


@pytest.fixture(scope='module')
def services(tmp_path_factory):
    repo = copy_models(tmp_path_factory.mktemp('grpc_h2') / 'models', 'conformance')
    server = TritonServer(repo, model_control_mode='explicit', load_models=['add_sub', 'identity_int32', 'typed'])
    server.start()
    aio = GRPCService(server, options=GRPCOptions(transport='grpcio')).start()
    h2 = GRPCService(server, options=GRPCOptions(transport='h2')).start()
    yield {'grpcio': f'127.0.0.1:{aio.port}', 'h2': f'127.0.0.1:{h2.port}'}
    h2.stop(); aio.stop(); server.stop()


def both(services, fn):
    "fn(client) on each transport: {'grpcio': answer, 'h2': answer}."
    out = {}
    for name, url in services.items():
        with grpcclient.InferenceServerClient(url) as c:
            try: out[name] = fn(c)
            except InferenceServerException as e: out[name] = ('error', e.status(), e.message())
    return out


def inp(name, arr, datatype):
    i = grpcclient.InferInput(name, list(arr.shape), datatype); i.set_data_from_numpy(arr)
    return i


def test_h2_is_the_default_and_grpcio_a_choice(monkeypatch):
    monkeypatch.delenv(grpc_h2.TRANSPORT_ENV, raising=False)
    assert grpc_h2.transport() == 'h2' and GRPCOptions().transport is None
    monkeypatch.setenv(grpc_h2.TRANSPORT_ENV, 'grpcio')
    assert grpc_h2.transport() == 'grpcio' and grpc_h2.transport('h2') == 'h2'
    with pytest.raises(ValueError): grpc_h2.transport('http3')


def test_h2_is_the_transport_serving(services):
    "Our SETTINGS (1000 streams, a 16 MB window) are the first frame on the h2 port, and not on grpc.aio's."
    import socket, struct
    first = {}
    for name, url in services.items():
        with socket.create_connection(tuple(url.split(':')[:1]) + (int(url.split(':')[1]),), 5) as s:
            s.sendall(grpc_h2.PREFACE + grpc_h2.frame(grpc_h2.SETTINGS, 0, 0))
            first[name] = s.recv(9 + 12)
    assert first['h2'] == grpc_h2.frame(grpc_h2.SETTINGS, 0, 0, struct.pack('>HIHI', 3, 1000, 4, grpc_h2.WINDOW))
    assert first['grpcio'] != first['h2']


def test_infer_answers_the_same(services):
    a = np.arange(4, dtype=np.float32).reshape(1, 4)
    got = both(services, lambda c: c.infer('add_sub', [inp('INPUT0', a, 'FP32'), inp('INPUT1', a, 'FP32')], request_id='9').get_response())
    assert got['h2'] == got['grpcio'] and got['h2'].id == '9'
    np.testing.assert_array_equal(np.frombuffer(got['h2'].raw_output_contents[0], np.float32), (a + a).ravel())


@pytest.mark.parametrize('call', ['unknown model', 'bad version', 'bad input', 'unknown stat'])
def test_errors_have_the_same_status_and_text(services, call):
    a = np.ones((1, 4), np.float32)
    fn = {'unknown model': lambda c: c.infer('nope', [inp('INPUT0', a, 'FP32')]),
          'bad version': lambda c: c.get_model_metadata('add_sub', model_version='two'),
          'bad input': lambda c: c.infer('add_sub', [inp('INPUT0', a, 'FP32')]),
          'unknown stat': lambda c: c.get_inference_statistics('nope')}[call]
    got = both(services, fn)
    assert got['h2'][0] == 'error' and got['h2'] == got['grpcio']


def test_metadata_rpcs_answer_the_same(services):
    for fn in (lambda c: c.is_server_live(), lambda c: c.is_server_ready(), lambda c: c.is_model_ready('add_sub'),
               lambda c: c.get_server_metadata(as_json=True), lambda c: c.get_model_metadata('add_sub', as_json=True),
               lambda c: c.get_model_config('add_sub', as_json=True), lambda c: c.get_model_repository_index(as_json=True),
               lambda c: c.get_log_settings(as_json=True)):
        got = both(services, fn)
        assert got['h2'] == got['grpcio']


def test_a_large_tensor_crosses_many_frames_both_ways(services):
    big = np.arange(3_000_000, dtype=np.int32).reshape(1, -1)      # 12 MB: beyond the 64 KB default windows and 16 KB frames
    with grpcclient.InferenceServerClient(services['h2']) as c:
        np.testing.assert_array_equal(c.infer('identity_int32', [inp('X', big, 'INT32')]).as_numpy('Y'), big)


def test_concurrent_calls_on_one_aio_channel(services):
    async def go():
        c = aioclient.InferenceServerClient(services['h2'])
        async def one(i):
            x = np.full((1, 4), i, np.float32)
            i0, i1 = aioclient.InferInput('INPUT0', [1, 4], 'FP32'), aioclient.InferInput('INPUT1', [1, 4], 'FP32')
            i0.set_data_from_numpy(x); i1.set_data_from_numpy(x)
            return (await c.infer('add_sub', [i0, i1], request_id=str(i))).as_numpy('OUTPUT0')[0, 0]
        try: return await asyncio.gather(*(one(i) for i in range(64)))
        finally: await c.close()
    assert asyncio.run(go()) == [2 * i for i in range(64)]


def test_a_deadline_is_deadline_exceeded(services):
    big = np.arange(3_000_000, dtype=np.int32).reshape(1, -1)
    got = both(services, lambda c: c.infer('identity_int32', [inp('X', big, 'INT32')], client_timeout=0.001))
    assert got['h2'][:2] == got['grpcio'][:2] == ('error', 'StatusCode.DEADLINE_EXCEEDED')


@pytest.fixture(scope='module')
def small_services(tmp_path_factory):
    "Both transports with a 1 MB message limit (Triton's is 2 GB: too big to cross in a test)."
    repo = copy_models(tmp_path_factory.mktemp('grpc_h2_small') / 'models', 'conformance')
    server = TritonServer(repo, model_control_mode='explicit', load_models=['identity_int32'])
    server.start()
    svcs = {t: GRPCService(server, options=GRPCOptions(transport=t, max_message_size=1 << 20)).start() for t in ('grpcio', 'h2')}
    yield {t: f'127.0.0.1:{s.port}' for t, s in svcs.items()}
    for s in svcs.values(): s.stop()
    server.stop()


def test_an_oversized_request_is_refused_the_same(small_services):
    big, small = np.zeros((1, 300_000), np.int32), np.arange(4, dtype=np.int32).reshape(1, 4)
    got = both(small_services, lambda c: c.infer('identity_int32', [inp('X', big, 'INT32')]))
    assert got['h2'] == got['grpcio'] and got['h2'][1] == 'StatusCode.RESOURCE_EXHAUSTED', got
    assert got['h2'][2].startswith('SERVER: Received message larger than max (') and got['h2'][2].endswith(' vs. 1048576)')
    got = both(small_services, lambda c: c.infer('identity_int32', [inp('X', small, 'INT32')]).as_numpy('Y').tolist())
    assert got['h2'] == got['grpcio'] == small.tolist()


def test_an_oversized_stream_message_ends_the_stream_the_same(small_services):
    import queue
    big = np.zeros((1, 300_000), np.int32)
    def fn(c):
        results = queue.Queue()
        c.start_stream(callback=lambda result, error: results.put(error))
        c.async_stream_infer('identity_int32', [inp('X', big, 'INT32')])
        error = results.get(timeout=10)
        c.stop_stream()
        return (error.status(), error.message())
    got = both(small_services, fn)
    assert got['h2'] == got['grpcio'] and got['h2'][0] == 'StatusCode.RESOURCE_EXHAUSTED', got


def test_too_many_pings_get_the_same_goaway(services):
    "Default keepalive settings: a client's PINGs without calls, one after another, are strikes; the third is one too many."
    import socket, struct
    got = {}
    for name, url in services.items():
        host, port = url.split(':')
        with socket.create_connection((host, int(port)), 5) as s:
            s.sendall(grpc_h2.PREFACE + grpc_h2.frame(grpc_h2.SETTINGS, 0, 0) + grpc_h2.frame(grpc_h2.PING, 0, 0, b'12345678') * 4)
            buf = b''
            while chunk := s.recv(65536): buf += chunk
        frames, pos = [], 0
        while pos + 9 <= len(buf):
            n = int.from_bytes(buf[pos:pos + 3], 'big')
            frames.append((buf[pos + 3], buf[pos + 9:pos + 9 + n])); pos += 9 + n
        goaway = [p for kind, p in frames if kind == grpc_h2.GOAWAY]
        got[name] = (sum(kind == grpc_h2.PING for kind, p in frames), struct.unpack('>I', goaway[-1][4:8])[0], goaway[-1][8:])
    assert got['h2'] == got['grpcio'] == (4, grpc_h2.ENHANCE_YOUR_CALM, b'too_many_pings'), got
