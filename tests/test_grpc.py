"""The real `tritonclient.grpc` (sync, aio and streaming) against triton-mini's gRPC frontend on a real socket.

Health, metadata, config (a real ModelConfig protobuf), inference with raw and typed tensors of every datatype,
BYTES, requested outputs, classification, parameters, Triton's status codes and messages, decoupled streaming
(responses one by one, the final flag, errors inside the stream), the repository in explicit mode, statistics,
log settings, large messages, compression, concurrency and the aio client.

The models are the conformance suite's (tests/models/conformance*) plus tests/models/python_backend/streamer. The
`oracle` tests serve the very same directories with the real Triton 2.51 and compare what its gRPC endpoint
answers with what triton-mini answers, call by call.
"""
import asyncio, json, threading, time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

grpc = pytest.importorskip('grpc')
grpcclient = pytest.importorskip('tritonclient.grpc')
aioclient = pytest.importorskip('tritonclient.grpc.aio')
from google.protobuf import json_format
from tritonclient.grpc import service_pb2 as pb, service_pb2_grpc as pb_grpc, model_config_pb2
from tritonclient.utils import InferenceServerException

from triton_mini.grpc_server import GRPCService, serve

from triton_servers import copy_models, settled, start_together, wait_until

T, C = pb.ModelInferRequest.InferInputTensor, pb.InferTensorContents
NUMPY = {'BOOL': np.bool_, 'UINT8': np.uint8, 'UINT16': np.uint16, 'UINT32': np.uint32, 'UINT64': np.uint64, 'INT8': np.int8,
         'INT16': np.int16, 'INT32': np.int32, 'INT64': np.int64, 'FP16': np.float16, 'FP32': np.float32, 'FP64': np.float64}
TYPED = {'BOOL': 'bool_contents', 'UINT8': 'uint_contents', 'UINT16': 'uint_contents', 'UINT32': 'uint_contents',
         'UINT64': 'uint64_contents', 'INT8': 'int_contents', 'INT16': 'int_contents', 'INT32': 'int_contents',
         'INT64': 'int64_contents', 'FP32': 'fp32_contents', 'FP64': 'fp64_contents'}


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    return copy_models(tmp_path_factory.mktemp('grpc') / 'models', 'conformance', 'python_backend/streamer')


@pytest.fixture(scope='module')
def mini(repo, launch_module):
    m = launch_module.mini(repo, http=False, metrics=False, grpc=True)
    assert m.failures == {}
    return m


@pytest.fixture(scope='module')
def url(mini): return f'127.0.0.1:{mini.grpc_port}'


@pytest.fixture
def client(url):
    with grpcclient.InferenceServerClient(url) as c: yield c


@pytest.fixture
def stub(url):
    channel = grpc.insecure_channel(url)
    yield pb_grpc.GRPCInferenceServiceStub(channel)
    channel.close()


def infer_input(name, arr, datatype=None):
    i = grpcclient.InferInput(name, list(arr.shape), datatype or ('BYTES' if arr.dtype == object else grpcclient.np_to_triton_dtype(arr.dtype)))
    i.set_data_from_numpy(arr)
    return i


def add_sub_inputs(a, b): return [infer_input('INPUT0', a), infer_input('INPUT1', b)]


def failure(call) -> tuple:
    "(gRPC status, message) of a call that must fail."
    with pytest.raises(InferenceServerException) as e: call()
    return e.value.status(), e.value.message()


# ------------------------------------------------------------------------------------------------- health, metadata, config

def test_health(client):
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready('add_sub') and client.is_model_ready('add_sub', '1')
    assert not client.is_model_ready('nope') and not client.is_model_ready('add_sub', '7') and not client.is_model_ready('add_sub', '0')
    assert client.is_model_ready('versioned', '3') and not client.is_model_ready('versioned', '1')    # version policy: latest 2
    assert failure(lambda: client.is_model_ready('add_sub', 'abc')) == (
        'StatusCode.INVALID_ARGUMENT', "failed to get model version from specified version string 'abc' (details: stol), version should be an integral value > 0")
    assert failure(lambda: client.is_model_ready('add_sub', '-1')) == (
        'StatusCode.INVALID_ARGUMENT', "invalid model version specified '-1' , version should be an integral value > 0")


def test_metadata(client):
    meta = client.get_server_metadata(as_json=True)
    assert meta['name'] == 'triton' and 'model_repository' in meta['extensions']
    assert client.get_model_metadata('add_sub', as_json=True) == {
        'name': 'add_sub', 'versions': ['1'], 'platform': 'python',
        'inputs': [{'name': 'INPUT0', 'datatype': 'FP32', 'shape': ['-1', '4']}, {'name': 'INPUT1', 'datatype': 'FP32', 'shape': ['-1', '4']}],
        'outputs': [{'name': 'OUTPUT0', 'datatype': 'FP32', 'shape': ['-1', '4']}, {'name': 'OUTPUT1', 'datatype': 'FP32', 'shape': ['-1', '4']}]}
    assert client.get_model_metadata('versioned').versions == ['2', '3']
    assert client.get_model_metadata('versioned', '2').versions == ['2']
    assert client.get_model_metadata('ens').platform == 'ensemble'
    assert failure(lambda: client.get_model_metadata('versioned', '1')) == (
        'StatusCode.NOT_FOUND', "Request for unknown model: 'versioned' version 1 is not found")
    assert failure(lambda: client.get_model_metadata('nope')) == ('StatusCode.NOT_FOUND', "Request for unknown model: 'nope' is not found")


def test_model_config_is_the_http_json_as_a_protobuf(client, mini):
    "Every model's config, as a ModelConfig message built from the same JSON HTTP returns (unknown fields would fail)."
    names = [m.name for m in client.get_model_repository_index().models]
    assert len(names) >= 15
    for name in names:
        config = client.get_model_config(name).config
        assert isinstance(config, model_config_pb2.ModelConfig)
        expected = json_format.ParseDict(json.loads(mini.server.model_config(name).to_json()), model_config_pb2.ModelConfig(),
                                         ignore_unknown_fields=False)
        assert config == expected, name
    config = client.get_model_config('add_sub').config
    assert (config.max_batch_size, list(config.input[0].dims), config.instance_group[0].name, config.backend) == (8, [4], 'add_sub_0', 'python')
    assert client.get_model_config('decoupled').config.model_transaction_policy.decoupled
    assert client.get_model_config('classify').config.output[0].label_filename == 'labels.txt'
    assert failure(lambda: client.get_model_config('nope')) == ('StatusCode.NOT_FOUND', "Request for unknown model: 'nope' is not found")


# ------------------------------------------------------------------------------------------------- inference

def test_infer_add_sub(client):
    a = np.arange(8, dtype=np.float32).reshape(2, 4)
    b = np.full((2, 4), 0.5, np.float32)
    r = client.infer('add_sub', add_sub_inputs(a, b), request_id='r-1')
    np.testing.assert_array_equal(r.as_numpy('OUTPUT0'), a + b)
    np.testing.assert_array_equal(r.as_numpy('OUTPUT1'), a - b)
    resp = r.get_response()
    assert (resp.id, resp.model_name, resp.model_version, [o.name for o in resp.outputs]) == ('r-1', 'add_sub', '1', ['OUTPUT0', 'OUTPUT1'])
    assert len(resp.raw_output_contents) == 2 and not resp.outputs[0].HasField('contents')     # outputs are raw, as in Triton
    only = client.infer('add_sub', add_sub_inputs(a, b), outputs=[grpcclient.InferRequestedOutput('OUTPUT1')], model_version='1')
    assert [o.name for o in only.get_response().outputs] == ['OUTPUT1']
    np.testing.assert_array_equal(only.as_numpy('OUTPUT1'), a - b)


@pytest.mark.parametrize('datatype', list(NUMPY))
def test_every_datatype_raw(client, datatype):
    rng = np.random.default_rng(len(datatype))
    arr = (rng.integers(0, 2, 5) if datatype == 'BOOL' else rng.integers(-100, 100, 5) if datatype[0] == 'I'
           else rng.integers(0, 200, 5) if datatype[0] == 'U' else rng.standard_normal(5)).astype(NUMPY[datatype])
    r = client.infer('typed', [infer_input(datatype, arr)])
    out = r.as_numpy(f'{datatype}_OUT')
    assert out.dtype == arr.dtype and r.get_response().outputs[0].datatype == datatype
    np.testing.assert_array_equal(out, arr)


@pytest.mark.parametrize('datatype', list(TYPED))
def test_every_datatype_as_typed_contents(stub, datatype):
    values = [True, False, True] if datatype == 'BOOL' else [1, 2, 250] if datatype[0] == 'U' else [-3, 0.5, 7] if datatype[0] == 'F' else [-3, 0, 7]
    contents = C(**{TYPED[datatype]: values})
    r = stub.ModelInfer(pb.ModelInferRequest(model_name='typed', inputs=[T(name=datatype, datatype=datatype, shape=[3], contents=contents)]))
    assert (r.outputs[0].name, r.outputs[0].datatype, list(r.outputs[0].shape)) == (f'{datatype}_OUT', datatype, [3])
    np.testing.assert_array_equal(np.frombuffer(r.raw_output_contents[0], NUMPY[datatype]), np.array(values).astype(NUMPY[datatype]))


def test_narrow_integers_keep_their_low_bytes(stub):
    "int_contents / uint_contents are 32-bit: Triton keeps the low byte(s) of each value for INT8/INT16/UINT8/UINT16."
    r = stub.ModelInfer(pb.ModelInferRequest(model_name='typed', inputs=[T(name='INT8', datatype='INT8', shape=[3], contents=C(int_contents=[1, -2, 300])),
                                                                        T(name='UINT16', datatype='UINT16', shape=[2], contents=C(uint_contents=[1, 70000]))]))
    assert np.frombuffer(r.raw_output_contents[0], np.int8).tolist() == [1, -2, 44]
    assert np.frombuffer(r.raw_output_contents[1], np.uint16).tolist() == [1, 70000 % 65536]


@pytest.mark.parametrize('typed', [False, True])
def test_bytes(client, stub, typed):
    words = [b'hello', b'', 'héllo ☃'.encode(), b'\x00\xff binary']
    if typed:
        r = stub.ModelInfer(pb.ModelInferRequest(model_name='identity_bytes', inputs=[T(name='IN', datatype='BYTES', shape=[4], contents=C(bytes_contents=words))]))
        out = grpcclient.InferResult(r).as_numpy('OUT')
    else: out = client.infer('identity_bytes', [infer_input('IN', np.array(words, dtype=object))]).as_numpy('OUT')
    assert out.tolist() == words


def test_classification(client):
    scores = np.array([[0.1, 0.5, 0.2, 0.9, 0.3], [5, 4, 3, 2, 1]], np.float32)
    r = client.infer('classify', [infer_input('SCORES_IN', scores)], outputs=[grpcclient.InferRequestedOutput('SCORES', class_count=2)])
    assert r.as_numpy('SCORES').tolist() == [[b'0.900000:3:fish', b'0.500000:1:dog'], [b'5.000000:0:cat', b'4.000000:1:dog']]
    assert r.get_response().outputs[0].datatype == 'BYTES'


def test_parameters_reach_the_model(client):
    "User parameters of every kind reach the model; Triton's own (priority, timeout, sequence) do not."
    text = [infer_input('text_input', np.array([b'hi'], dtype=object))]
    r = client.infer('gen', text, parameters={'s': 'v', 'i': -5, 'b': True, 'd': 2.5}, priority=1, timeout=1000000)
    assert json.loads(r.as_numpy('info')[0])['params'] == {'s': 'v', 'i': -5, 'b': True, 'd': 2.5}
    assert failure(lambda: client.infer('gen', text, parameters={'priority': 1})) == (
        None, 'Parameter "priority" is a reserved parameter and cannot be specified.')   # refused by the client itself


def test_parameter_errors(stub):
    def status(**params):
        r = pb.ModelInferRequest(model_name='gen', inputs=[T(name='text_input', datatype='BYTES', shape=[1], contents=C(bytes_contents=[b'x']))])
        for k, (kind, v) in params.items(): setattr(r.parameters[k], kind, v)
        try: stub.ModelInfer(r); return 'OK'
        except grpc.RpcError as e: return e.code().name, e.details()
    assert status(x=('uint64_param', 5)) == ('INVALID_ARGUMENT', "invalid value type for 'x' parameter, expected int64_param, bool_param, or string_param.")
    assert status(triton_x=('bool_param', True))[1].startswith("parameter keys starting with 'triton_' are reserved for Triton usage.")
    assert status(priority=('int64_param', -1)) == ('INVALID_ARGUMENT', "invalid value for 'priority', expected value >= 0.")
    assert status(sequence_start=('int64_param', 1)) == ('INVALID_ARGUMENT', "invalid value type for 'sequence_start' parameter, expected bool_param.")
    assert status(sequence_id=('string_param', 'abc'), timeout=('int64_param', 10)) == 'OK'


# ------------------------------------------------------------------------------------------------- errors

def add_sub_request(model_name='add_sub', **kw):
    x = np.ones((1, 4), np.float32).tobytes()
    return pb.ModelInferRequest(model_name=model_name, inputs=[T(name='INPUT0', datatype='FP32', shape=[1, 4]), T(name='INPUT1', datatype='FP32', shape=[1, 4])],
                                raw_input_contents=[x, x], **kw)


def _edit(request, fn):
    fn(request)
    return request


ERRORS = [  # (what, request, gRPC status, message): Triton 2.51's answers (see test_oracle_catalogue)
    ('unknown model', add_sub_request(model_name='nope'), 'NOT_FOUND', "Request for unknown model: 'nope' is not found"),
    ('unknown version', add_sub_request(model_version='9'), 'NOT_FOUND', "Request for unknown model: 'add_sub' version 9 is not found"),
    ('bad version', add_sub_request(model_version='x'), 'INVALID_ARGUMENT',
     "failed to get model version from specified version string 'x' (details: stol), version should be an integral value > 0"),
    ('decoupled model', pb.ModelInferRequest(model_name='decoupled'), 'UNIMPLEMENTED', "ModelInfer RPC doesn't support models with decoupled transaction policy"),
    ('missing data', _edit(add_sub_request(), lambda r: r.raw_input_contents.pop()), 'INVALID_ARGUMENT',
     "unable to find data for input tensor 'INPUT1' for model 'add_sub' in request."),
    ('short data', _edit(add_sub_request(id='7'), lambda r: r.raw_input_contents.__setitem__(1, b'123')), 'INVALID_ARGUMENT',
     "[request id: 7] input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 16, got 3"),
    ('wrong datatype', _edit(add_sub_request(), lambda r: setattr(r.inputs[1], 'datatype', 'INT32')), 'INVALID_ARGUMENT',
     "[request id: <id_unknown>] inference input 'INPUT1' data-type is 'INT32', but model 'add_sub' expects 'FP32'"),
    ('invalid datatype', _edit(add_sub_request(), lambda r: setattr(r.inputs[1], 'datatype', 'FOO')), 'INVALID_ARGUMENT',
     "[request id: <id_unknown>] inference input 'INPUT1' data-type is '<invalid>', but model 'add_sub' expects 'FP32'"),
    ('datatype before size', _edit(add_sub_request(), lambda r: (setattr(r.inputs[1], 'datatype', 'FP64'), r.inputs[1].shape.__setitem__(1, 3))),
     'INVALID_ARGUMENT', "[request id: <id_unknown>] inference input 'INPUT1' data-type is 'FP64', but model 'add_sub' expects 'FP32'"),
    ('duplicate input', _edit(add_sub_request(), lambda r: setattr(r.inputs[1], 'name', 'INPUT0')), 'INVALID_ARGUMENT',
     "[request id: <id_unknown>] input 'INPUT0' already exists in request"),
    ('unknown input', _edit(add_sub_request(), lambda r: setattr(r.inputs[1], 'name', 'X')), 'INVALID_ARGUMENT',
     "unexpected inference input 'X' for model 'add_sub'"),
    ('unknown output', _edit(add_sub_request(), lambda r: r.outputs.add(name='NOPE')), 'INVALID_ARGUMENT',
     "unexpected inference output 'NOPE' for model 'add_sub'"),
    ('contents and raw', _edit(add_sub_request(), lambda r: r.inputs[1].contents.fp32_contents.extend([1, 2, 3, 4])), 'INVALID_ARGUMENT',
     "contents field must not be specified when using raw_input_contents for 'INPUT1' for model 'add_sub'"),
    ('wrong contents field', pb.ModelInferRequest(model_name='typed', inputs=[T(name='FP16', datatype='FP16', shape=[1], contents=C(fp32_contents=[1]))]),
     'INVALID_ARGUMENT', "unexpected explicit tensor data for input tensor 'FP16' for model 'typed' of type 'FP32', expected datatype 'FP16'"),
    ('short typed bytes', pb.ModelInferRequest(model_name='identity_bytes', inputs=[T(name='IN', datatype='BYTES', shape=[3], contents=C(bytes_contents=[b'a']))]),
     'INVALID_ARGUMENT', "[request id: <id_unknown>] expected 3 string elements for inference input 'IN' for model 'identity_bytes', got 1"),
    ('negative dims', pb.ModelInferRequest(model_name='typed', inputs=[T(name='FP32', datatype='FP32', shape=[-1])], raw_input_contents=[b'\0' * 4]),
     'INVALID_ARGUMENT', "[request id: <id_unknown>] All input dimensions should be specified for input 'FP32' for model 'typed', got [-1]"),
    ('wrong shape', _edit(add_sub_request(), lambda r: (r.inputs[1].shape.__setitem__(1, 2), r.raw_input_contents.__setitem__(1, b'\0' * 8))),
     'INVALID_ARGUMENT', "[request id: <id_unknown>] unexpected shape for input 'INPUT1' for model 'add_sub'. Expected [-1,4], got [1,2]."),
    ('classification 0', _edit(add_sub_request(), lambda r: r.outputs.add(name='OUTPUT0').parameters['classification'].__setattr__('int64_param', 0)),
     'INVALID_ARGUMENT', "invalid value for 'classification' parameter, expected >= 0"),
    ('missing input', pb.ModelInferRequest(model_name='add_sub', id='x'), 'INVALID_ARGUMENT',
     "[request id: x] expected 2 inputs but got 0 inputs for model 'add_sub'. Got input(s) [], but missing required input(s) ['INPUT0','INPUT1']. "
     "Please provide all required input(s)."),
]


@pytest.mark.parametrize('what,request_,code,message', ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(stub, what, request_, code, message):
    with pytest.raises(grpc.RpcError) as e: stub.ModelInfer(request_)
    assert e.value.code().name == code
    assert e.value.details().startswith(message)


@pytest.mark.parametrize('mode,code,message', [
    (1, 'INTERNAL', "Failed to process the request(s) for model 'errmodel_0', message: ValueError: boom from execute"),
    (2, 'INTERNAL', 'custom error msg'), (3, 'NOT_FOUND', 'not found msg'), (10, 'UNAVAILABLE', 'unavail msg'),
    (12, 'INVALID_ARGUMENT', 'invalid arg msg'), (13, 'UNIMPLEMENTED', 'unsupported msg')])
def test_model_errors_keep_their_code(client, mode, code, message):
    status, text = failure(lambda: client.infer('errmodel', [infer_input('MODE', np.array([mode], np.int32))]))
    assert status == f'StatusCode.{code}' and text.startswith(message)


# ------------------------------------------------------------------------------------------------- streaming

class Collector:
    "A stream callback that records (time, result, error) and can wait for n of them."
    def __init__(self): self.items, self.cond = [], threading.Condition()
    def __call__(self, result, error):
        with self.cond:
            self.items.append((time.monotonic(), result, error))
            self.cond.notify_all()
    def wait(self, n, timeout=30):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.items) >= n, timeout), self.items
        return self.items


def streamer_inputs(text, n, delay_ms=0):
    return [infer_input('TEXT', np.array([text], dtype=object)), infer_input('N', np.array([n], np.int32)),
            infer_input('DELAY_MS', np.array([delay_ms], np.int32))]


def final_flag(result):
    return result.get_response().parameters['triton_final_response'].bool_param


def test_stream_responses_arrive_one_by_one(client):
    got = Collector()
    client.start_stream(callback=got)
    client.async_stream_infer('streamer', streamer_inputs(b'tok', 3, delay_ms=200), request_id='s1', enable_empty_final_response=True)
    items = got.wait(4)
    client.stop_stream()
    tokens = [(r.as_numpy('TOKEN').tolist(), r.as_numpy('INDEX').tolist(), final_flag(r), r.get_response().id) for _, r, _ in items[:3]]
    assert tokens == [([b'tok #0'], [0], False, 's1'), ([b'tok #1'], [1], False, 's1'), ([b'tok #2'], [2], False, 's1')]
    last = items[3][1].get_response()        # the final flag alone: an empty response, because we asked for it
    assert (len(last.outputs), last.id, last.model_name, final_flag(items[3][1])) == (0, 's1', 'streamer', True)
    times = [t for t, _, _ in items]
    assert times[1] - times[0] > 0.1 and times[2] - times[1] > 0.1, times    # not buffered until the end


def test_stream_without_empty_final_response(client):
    got = Collector()
    client.start_stream(callback=got)
    client.async_stream_infer('streamer', streamer_inputs(b'a', 2), request_id='x')
    client.async_stream_infer('streamer', streamer_inputs(b'b', 1), request_id='y')
    client.stop_stream()          # waits for the server to end the stream: every request has had its final flag
    assert [(r.get_response().id, r.as_numpy('TOKEN')[0], final_flag(r)) for _, r, _ in got.items] == [
        ('x', b'a #0', False), ('x', b'a #1', False), ('y', b'b #0', False)]


def test_stream_errors_do_not_end_the_stream(client):
    got = Collector()
    client.start_stream(callback=got)
    client.async_stream_infer('streamer', streamer_inputs(b't', 3), request_id='f', parameters={'fail_at': 1})
    client.async_stream_infer('nope', streamer_inputs(b't', 1), request_id='u')
    client.async_stream_infer('streamer', streamer_inputs(b't', -1), request_id='n')
    client.async_stream_infer('streamer', streamer_inputs(b't', 3), request_id='r', parameters={'raise_at': 1})
    client.async_stream_infer('streamer', streamer_inputs(b'ok', 1), request_id='ok')
    client.stop_stream()
    events = [(str(e) if e else (r.get_response().id, r.as_numpy('TOKEN')[0])) for _, r, e in got.items]
    assert "Request for unknown model: 'nope' is not found" in events and 'N must not be negative' in events
    assert 'failed at 1' in events and any('streamer failed at 1' in str(e) for e in events)
    assert [e for e in events if isinstance(e, tuple)] == [('f', b't #0'), ('f', b't #2'), ('r', b't #0'), ('ok', b'ok #0')]


def test_stream_error_messages_carry_the_request(stub):
    "An error before the model carries only the id; one from the model its name, the version string sent and the final flag."
    text = lambda t: [T(name='TEXT', datatype='BYTES', shape=[1], contents=C(bytes_contents=[t]))]
    n = lambda k: [T(name='N', datatype='INT32', shape=[1], contents=C(int_contents=[k]))]
    requests = [pb.ModelInferRequest(model_name='streamer', id='bad', inputs=text(b'x') + text(b'y')),
                pb.ModelInferRequest(model_name='streamer', id='neg', model_version='1', inputs=text(b'x') + n(-1))]
    msgs = list(stub.ModelStreamInfer(iter(requests)))
    as_dict = lambda m: json_format.MessageToDict(m, preserving_proto_field_name=True)
    assert as_dict(msgs[0]) == {'error_message': "[request id: bad] input 'TEXT' already exists in request", 'infer_response': {'id': 'bad'}}
    assert as_dict(msgs[1]) == {'error_message': 'N must not be negative', 'infer_response': {
        'model_name': 'streamer', 'model_version': '1', 'id': 'neg', 'parameters': {'triton_final_response': {'bool_param': True}}}}


def test_stream_of_a_model_that_is_not_decoupled_answers_in_order(stub):
    requests = [add_sub_request(id=str(i)) for i in range(20)]
    requests[5].raw_input_contents.pop()
    msgs = list(stub.ModelStreamInfer(iter(requests)))
    assert [m.infer_response.id for m in msgs] == [str(i) for i in range(20)]
    assert [bool(m.error_message) for m in msgs] == [i == 5 for i in range(20)]
    assert all(m.infer_response.parameters['triton_final_response'].bool_param for i, m in enumerate(msgs) if i != 5)


def test_empty_stream(stub):
    assert list(stub.ModelStreamInfer(iter([]))) == []


def test_cancelling_a_stream(client, mini):
    "The client goes away in the middle of a stream: the server stays healthy and serves the next stream."
    got = Collector()
    client.start_stream(callback=got)
    client.async_stream_infer('streamer', streamer_inputs(b'c', 5, delay_ms=100))
    got.wait(1)
    client.stop_stream(cancel_requests=True)
    assert client.is_server_live()
    got2 = Collector()
    client.start_stream(callback=got2)
    client.async_stream_infer('streamer', streamer_inputs(b'd', 2))
    client.stop_stream()
    assert [r.as_numpy('TOKEN')[0] for _, r, _ in got2.items] == [b'd #0', b'd #1']


# ------------------------------------------------------------------------------------------------- aio client

def test_aio_client(url):
    async def main():
        async with aioclient.InferenceServerClient(url) as c:
            assert await c.is_server_live() and await c.is_model_ready('add_sub')
            a = np.arange(4, dtype=np.float32)[None]
            results = await asyncio.gather(*[c.infer('add_sub', add_sub_inputs(a + i, a), request_id=str(i)) for i in range(8)])
            assert [r.as_numpy('OUTPUT0')[0, 0] for r in results] == [float(i) for i in range(8)]
            assert (await c.get_model_metadata('add_sub')).name == 'add_sub'
            async def requests():
                for text in (b'p', b'q'):
                    yield {'model_name': 'streamer', 'inputs': streamer_inputs(text, 2), 'request_id': text.decode()}
            tokens = []
            async for result, error in c.stream_infer(requests()):
                assert error is None
                tokens.append(result.as_numpy('TOKEN')[0])
                if len(tokens) == 4: break
            return sorted(tokens)
    assert asyncio.run(main()) == [b'p #0', b'p #1', b'q #0', b'q #1']


# ------------------------------------------------------------------------------------------------- statistics, logging, repository

def test_statistics(client):
    before = client.get_inference_statistics('stats_model').model_stats[0]
    for i in range(3): client.infer('stats_model', [infer_input('IN', np.full((1, 2), i, np.float32))])
    after = client.get_inference_statistics('stats_model', as_json=True)['model_stats'][0]
    assert int(after['inference_count']) - before.inference_count == 3
    assert int(after['inference_stats']['success']['count']) - before.inference_stats.success.count == 3
    assert {s.name for s in client.get_inference_statistics().model_stats} >= {'add_sub', 'stats_model', 'streamer'}
    assert failure(lambda: client.get_inference_statistics('nope')) == ('StatusCode.INVALID_ARGUMENT', "requested model 'nope' is not available")
    assert failure(lambda: client.get_inference_statistics('versioned', '1')) == (
        'StatusCode.INVALID_ARGUMENT', "requested model version is not available for model 'versioned'")


def test_log_settings(client):
    settings = client.get_log_settings(as_json=True)['settings']
    assert settings['log_info'] == {'bool_param': True} and settings['log_format'] == {'string_param': 'default'}
    assert client.update_log_settings({'log_verbose_level': 0}, as_json=True)['settings']['log_verbose_level'] == {'uint32_param': 0}
    assert failure(lambda: client.update_log_settings({'log_file': 'x.log'})) == (
        'StatusCode.UNIMPLEMENTED', 'log file location can not be updated through network protocol')
    assert failure(lambda: client.update_log_settings({'log_format': 'xml'})) == ('StatusCode.INVALID_ARGUMENT', 'invalid argument for log_format, got: xml')


def test_repository_in_none_mode(client):
    index = client.get_model_repository_index(as_json=True)['models']
    assert {'name': 'add_sub', 'version': '1', 'state': 'READY'} in index
    assert failure(lambda: client.load_model('add_sub')) == ('StatusCode.UNAVAILABLE', 'explicit model load / unload is not allowed if polling is enabled')


@pytest.fixture
def explicit(tmp_path, launch):
    root = copy_models(tmp_path / 'models', 'conformance_explicit')
    port = launch.mini(root, http=False, metrics=False, grpc=True, model_control_mode='explicit').grpc_port
    with grpcclient.InferenceServerClient(f'127.0.0.1:{port}') as c:
        yield c


def test_repository_load_and_unload(explicit):
    c = explicit
    assert {m.name for m in c.get_model_repository_index().models} >= {'simple', 'multi', 'pipe', 'bad_syntax'}
    assert {m.state for m in c.get_model_repository_index().models} == {''}     # nothing loaded yet: no version, no state
    c.load_model('pipe')                                  # an ensemble loads what it needs
    assert c.is_model_ready('pipe') and c.is_model_ready('simple')
    c.unload_model('pipe')
    wait_until(lambda: not c.is_model_ready('pipe'), 30, 'pipe to unload')
    assert c.is_model_ready('simple')
    assert failure(lambda: c.load_model('bad_syntax')) == ('StatusCode.INTERNAL', "failed to load 'bad_syntax', failed to poll from model repository")
    status, message = failure(lambda: c.load_model('init_raises'))
    assert status == 'StatusCode.INVALID_ARGUMENT' and message.startswith("load failed for model 'init_raises': version 1 is at UNAVAILABLE state")


def test_unload_dependents_unloads_the_composing_models(explicit):
    c = explicit
    c.load_model('pipe')
    c.unload_model('pipe', unload_dependents=True)
    wait_until(lambda: not c.is_model_ready('pipe'), 30, 'pipe to unload')
    assert not c.is_model_ready('simple')


def test_repository_load_with_config_and_files(explicit):
    c = explicit
    config = json.dumps({'name': 'simple', 'backend': 'python', 'max_batch_size': 0,
                         'input': [{'name': 'X', 'data_type': 'TYPE_INT32', 'dims': [1]}], 'output': [{'name': 'Y', 'data_type': 'TYPE_INT32', 'dims': [1]}]})
    model_py = (b'import numpy as np\nimport triton_python_backend_utils as pb_utils\n'
                b'class TritonPythonModel:\n    def execute(self, requests):\n'
                b'        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() * 7)]) for r in requests]\n')
    c.load_model('fresh', config=config.replace('"simple"', '"fresh"'), files={'file:1/model.py': model_py})
    assert c.infer('fresh', [infer_input('X', np.array([6], np.int32))]).as_numpy('Y').tolist() == [42]
    assert c.get_model_config('fresh').config.max_batch_size == 0


# ------------------------------------------------------------------------------------------------- transport

def test_large_messages(client):
    "Beyond gRPC's default 4 MB limit, both ways (Triton allows up to 2 GB)."
    big = np.arange(3_000_000, dtype=np.float32)        # 12 MB
    np.testing.assert_array_equal(client.infer('typed', [infer_input('FP32', big)]).as_numpy('FP32_OUT'), big)


@pytest.mark.parametrize('algorithm', ['gzip', 'deflate'])
def test_compression(client, algorithm):
    a = np.ones((1, 4), np.float32)
    r = client.infer('add_sub', add_sub_inputs(a, a), compression_algorithm=algorithm)
    assert r.as_numpy('OUTPUT0').tolist() == [[2, 2, 2, 2]]


def test_concurrent_clients_get_their_own_rows(url):
    def one(i):
        with grpcclient.InferenceServerClient(url) as c:
            a = np.full((1, 4), i, np.float32)
            return [c.infer('add_sub', add_sub_inputs(a, a * 0 + j)).as_numpy('OUTPUT1')[0, 0] for j in range(10)]
    with ThreadPoolExecutor(8) as pool: results = list(pool.map(one, range(16)))
    assert results == [[float(i - j) for j in range(10)] for i in range(16)]


def test_a_taken_port_is_an_error(mini):
    "gRPC shares a taken port by default on Linux (SO_REUSEPORT); Triton, and triton-mini, refuse it."
    with pytest.raises(OSError, match=f"Socket '127.0.0.1:{mini.grpc_port}' already in use"): GRPCService(mini.server, port=mini.grpc_port).start()


def test_serve_on_a_running_loop(mini):
    "serve() starts on the caller's event loop and returns the grpc.aio server; stop(grace) ends it."
    async def main():
        g = await serve(mini.server, '127.0.0.1', 0)
        async with aioclient.InferenceServerClient(f'127.0.0.1:{g.port}') as c: live = await c.is_server_live()
        await g.stop(1)
        return live
    assert asyncio.run(main())


# ------------------------------------------------------------------------------------------------- oracle: real Triton

def _call(stub, method, request):
    "('OK', response as a dict) or (status code name, details)."
    try: return 'OK', json_format.MessageToDict(getattr(stub, method)(request), preserving_proto_field_name=True)
    except grpc.RpcError as e: return e.code().name, e.details()


def _stream(stub, requests):
    "Messages of one stream as dicts, and how it ended."
    out = []
    try:
        for m in stub.ModelStreamInfer(iter(requests)): out.append(json_format.MessageToDict(m, preserving_proto_field_name=True))
        return out, 'OK'
    except grpc.RpcError as e: return out, e.code().name


def _typed(name, datatype, shape, **contents):
    return pb.ModelInferRequest(model_name='typed', inputs=[T(name=name, datatype=datatype, shape=shape, contents=C(**contents))])


def _text(model, text, n=None, id='', **params):
    inputs = [T(name='text_input', datatype='BYTES', shape=[1], contents=C(bytes_contents=[text]))]
    if n is not None: inputs.append(T(name='N', datatype='INT32', shape=[1], contents=C(int_contents=[n])))
    r = pb.ModelInferRequest(model_name=model, id=id, inputs=inputs)
    for k, v in params.items():
        if isinstance(v, bool): r.parameters[k].bool_param = v
        else: r.parameters[k].int64_param = v
    return r


def catalogue():
    "(label, method, request): unary calls whose answers must be the same on both servers."
    calls = [('live', 'ServerLive', pb.ServerLiveRequest()), ('ready', 'ServerReady', pb.ServerReadyRequest()),
             ('index', 'RepositoryIndex', pb.RepositoryIndexRequest()), ('index ready', 'RepositoryIndex', pb.RepositoryIndexRequest(ready=True)),
             ('index repo name', 'RepositoryIndex', pb.RepositoryIndexRequest(repository_name='x')),
             ('load in none mode', 'RepositoryModelLoad', pb.RepositoryModelLoadRequest(model_name='add_sub')),
             ('unload in none mode', 'RepositoryModelUnload', pb.RepositoryModelUnloadRequest(model_name='add_sub')),
             ('log settings', 'LogSettings', pb.LogSettingsRequest()),
             ('log bad kind', 'LogSettings', pb.LogSettingsRequest(settings={'log_info': pb.LogSettingsRequest.SettingValue(string_param='x')})),
             ('stats unknown', 'ModelStatistics', pb.ModelStatisticsRequest(name='nope')),
             ('stats_model 1', 'ModelInfer', pb.ModelInferRequest(model_name='stats_model', inputs=[T(name='IN', datatype='FP32', shape=[1, 2], contents=C(fp32_contents=[1, 2]))])),
             ('stats_model 2', 'ModelInfer', pb.ModelInferRequest(model_name='stats_model', inputs=[T(name='IN', datatype='FP32', shape=[2, 2], contents=C(fp32_contents=[1, 2, 3, 4]))])),
             ('stats stats_model', 'ModelStatistics', pb.ModelStatisticsRequest(name='stats_model')),
             ('stats version', 'ModelStatistics', pb.ModelStatisticsRequest(name='versioned', version='1'))]
    for v in ['', '1', '7', '0', 'abc', '-1', ' 1', '1x', '+1', ' ', '99999999999999999999']:
        calls.append((f'ready add_sub {v!r}', 'ModelReady', pb.ModelReadyRequest(name='add_sub', version=v)))
    for name in ['add_sub', 'add_sub_nobatch', 'typed', 'classify', 'decoupled', 'ens', 'versioned', 'gen', 'identity_bytes', 'nope']:
        calls.append((f'metadata {name}', 'ModelMetadata', pb.ModelMetadataRequest(name=name)))
        calls.append((f'config {name}', 'ModelConfig', pb.ModelConfigRequest(name=name)))
    calls += [('metadata versioned 2', 'ModelMetadata', pb.ModelMetadataRequest(name='versioned', version='2')),
              ('config versioned 1', 'ModelConfig', pb.ModelConfigRequest(name='versioned', version='1'))]
    for what, request, _, _ in ERRORS: calls.append((f'infer {what}', 'ModelInfer', request))
    calls.append(('infer add_sub', 'ModelInfer', add_sub_request(id='a')))
    for mode in [0, 1, 2, 3, 4, 5, 6, 8, 9, 10, 11, 12, 13]:
        calls.append((f'errmodel {mode}', 'ModelInfer', pb.ModelInferRequest(model_name='errmodel', inputs=[T(name='MODE', datatype='INT32', shape=[1], contents=C(int_contents=[mode]))])))
    for dt, field in TYPED.items():
        calls.append((f'typed {dt}', 'ModelInfer', _typed(dt, dt, [2], **{field: [1, 0]})))
    calls += [('typed INT8 wraps', 'ModelInfer', _typed('INT8', 'INT8', [3], int_contents=[1, -2, 300])),
              ('typed two fields', 'ModelInfer', _typed('FP64', 'FP64', [1], fp32_contents=[1.0], fp64_contents=[2.0])),
              ('typed invalid datatype', 'ModelInfer', _typed('FP32', 'XX', [1], fp32_contents=[2.0])),
              ('typed bytes for FP32', 'ModelInfer', _typed('FP32', 'FP32', [1], bytes_contents=[b'a'])),
              ('typed empty shape 0', 'ModelInfer', _typed('FP32', 'FP32', [0])),
              ('typed empty shape 1', 'ModelInfer', _typed('FP32', 'FP32', [1])),
              ('typed strings', 'ModelInfer', _typed('STRING', 'BYTES', [3], bytes_contents=[b'a', b'', 'é'.encode()])),
              ('raw BF16 for FP16', 'ModelInfer', pb.ModelInferRequest(model_name='typed', inputs=[T(name='FP16', datatype='BF16', shape=[1])], raw_input_contents=[b'\0\0'])),
              ('raw bad strings', 'ModelInfer', pb.ModelInferRequest(model_name='identity_bytes', inputs=[T(name='IN', datatype='BYTES', shape=[2])], raw_input_contents=[b'\x01\0\0\0a\x05\0\0\0ab'])),
              ('extra raw buffer', 'ModelInfer', _edit(add_sub_request(), lambda r: r.raw_input_contents.append(b'1234'))),
              ('parameters', 'ModelInfer', _edit(_text('gen', b'x'), lambda r: (r.parameters['s'].__setattr__('string_param', 'v'), r.parameters['d'].__setattr__('double_param', 2.5),
                                                                          r.parameters['binary_data_output'].__setattr__('bool_param', True),
                                                                          r.parameters['timeout'].__setattr__('int64_param', 100)))),
              ('sequence id bool', 'ModelInfer', _edit(_text('gen', b'x'), lambda r: r.parameters['sequence_id'].__setattr__('bool_param', True))),
              ('empty final int', 'ModelInfer', _edit(_text('gen', b'x'), lambda r: r.parameters['triton_enable_empty_final_response'].__setattr__('int64_param', 1))),
              ('requested twice', 'ModelInfer', _edit(add_sub_request(), lambda r: (r.outputs.add(name='OUTPUT1'), r.outputs.add(name='OUTPUT1')))),
              ('classification string', 'ModelInfer', _edit(add_sub_request(), lambda r: r.outputs.add(name='OUTPUT0').parameters['classification'].__setattr__('string_param', '2'))),
              ('classification add_sub', 'ModelInfer', _edit(add_sub_request(), lambda r: r.outputs.add(name='OUTPUT0').parameters['classification'].__setattr__('int64_param', 2))),
              ('ensemble', 'ModelInfer', pb.ModelInferRequest(model_name='ens', inputs=[T(name='X', datatype='FP32', shape=[1, 2], contents=C(fp32_contents=[1, 2]))])),
              ('versioned', 'ModelInfer', pb.ModelInferRequest(model_name='versioned', inputs=[T(name='X', datatype='INT32', shape=[1], contents=C(int_contents=[1]))])),
              ('versioned 2', 'ModelInfer', pb.ModelInferRequest(model_name='versioned', model_version='2', inputs=[T(name='X', datatype='INT32', shape=[1], contents=C(int_contents=[1]))]))]
    calls += _order_cases()
    # the texts test_parameter_errors and test_log_settings expect of triton-mini, asked of both
    for label, (key, kind, value) in {'param uint64': ('x', 'uint64_param', 5), 'param triton_': ('triton_x', 'bool_param', True),
                                      'param priority -1': ('priority', 'int64_param', -1), 'param sequence_start int': ('sequence_start', 'int64_param', 1),
                                      'param sequence_id string': ('sequence_id', 'string_param', 'abc')}.items():
        calls.append((label, 'ModelInfer', _edit(_text('gen', b'x'), lambda r, k=key, t=kind, v=value: r.parameters[k].__setattr__(t, v))))
    setting = pb.LogSettingsRequest.SettingValue
    calls += [('log format xml', 'LogSettings', pb.LogSettingsRequest(settings={'log_format': setting(string_param='xml')})),
              ('log file', 'LogSettings', pb.LogSettingsRequest(settings={'log_file': setting(string_param='x.log')}))]
    sc = np.array([[0.1, 0.5, 0.2, 0.9, 0.3], [5, 4, 3, 2, 1]], np.float32)
    classify = pb.ModelInferRequest(model_name='classify', inputs=[T(name='SCORES_IN', datatype='FP32', shape=[2, 5])], raw_input_contents=[sc.tobytes()])
    classify.outputs.add(name='SCORES').parameters['classification'].int64_param = 3
    calls.append(('classify', 'ModelInfer', classify))
    return calls


def _order_cases():
    "Requests with two faults: which one Triton names (found by bench/fuzz_grpc_vs_triton.py; outputs, count, names, then per input from the last)."
    f4, raw = lambda *shape: T(name='', datatype='FP32', shape=list(shape)), lambda n: b'\0' * n
    def add(t0, t1, r0=16, r1=16, **kw):
        t0.name, t1.name = 'INPUT0', 'INPUT1'
        return pb.ModelInferRequest(model_name='add_sub', inputs=[t0, t1], raw_input_contents=[raw(r0), raw(r1)], **kw)
    typed = lambda *inputs, raws=(): pb.ModelInferRequest(model_name='typed', inputs=list(inputs), raw_input_contents=list(raws))
    return [('order: unknown output, unknown input', 'ModelInfer', _edit(add(f4(1, 4), f4(1, 4)), lambda r: (r.inputs[1].__setattr__('name', 'Z'), r.outputs.add(name='NOPE')))),
            ('order: too many inputs', 'ModelInfer', pb.ModelInferRequest(model_name='ens', inputs=[T(name='X', datatype='FP32', shape=[1, 2], contents=C(fp32_contents=[1, 2])),
                                                                                                   T(name='INPUT0', datatype='FP32', shape=[1], contents=C(fp32_contents=[1]))])),
            ('order: two unknown inputs', 'ModelInfer', pb.ModelInferRequest(model_name='gen', inputs=[T(name='INPUT0', datatype='FP32', shape=[1], contents=C(fp32_contents=[1])),
                                                                                                       T(name='INPUT1', datatype='FP32', shape=[1], contents=C(fp32_contents=[1]))])),
            ('order: unknown input after a bad shape', 'ModelInfer', typed(T(name='input0', datatype='INT16', shape=[2], contents=C(int_contents=[1, 2])),
                                                                           T(name='FP64', datatype='FP64', shape=[1, 1], contents=C(fp64_contents=[0.5])))),
            ('order: bad shape, bad datatype', 'ModelInfer', add(f4(1, 4, 1), T(datatype='INT64', shape=[1, 4]), r1=32)),
            ('order: bad datatype, bad shape', 'ModelInfer', add(T(datatype='INT64', shape=[1, 4]), f4(1, 4, 1), r0=32)),
            ('order: two byte sizes', 'ModelInfer', typed(T(name='INT16', datatype='INT16', shape=[2]), T(name='FP64', datatype='FP64', shape=[1]), raws=[raw(3), raw(9)])),
            ('order: byte size, datatype', 'ModelInfer', typed(T(name='INT16', datatype='UINT32', shape=[2]), T(name='FP64', datatype='FP64', shape=[1]), raws=[raw(8), raw(9)])),
            ('order: invalid datatype, bad shape', 'ModelInfer', pb.ModelInferRequest(model_name='classify', inputs=[T(name='SCORES_IN', datatype='fp32', shape=[2])], raw_input_contents=[raw(8)])),
            ('negative: inner dim', 'ModelInfer', add(f4(1, -4), f4(1, 4))),
            ('negative: batch dim first', 'ModelInfer', add(f4(-1, 4), f4(1, 4))),
            ('negative: batch dim last', 'ModelInfer', add(f4(1, 4), f4(-1, 4))),
            ('negative: both batch dims', 'ModelInfer', add(f4(-1, 4), f4(-1, 4))),
            ('negative: a -1 where the config has 2', 'ModelInfer', pb.ModelInferRequest(model_name='ens', inputs=[T(name='X', datatype='FP32', shape=[1, -1])], raw_input_contents=[raw(8)]))]


def streams():
    "(label, requests): streams whose messages must be the same on both servers (one decoupled request each, or in order)."
    return [('tokens', [_text('decoupled', b'hi', 3, id='a')]),
            ('empty final', [_text('decoupled', b'hi', 2, id='a', triton_enable_empty_final_response=True)]),
            ('no tokens, empty final', [_text('decoupled', b'hi', 0, id='z', triton_enable_empty_final_response=True)]),
            ('no tokens', [_text('decoupled', b'hi', 0, id='z')]),
            ('fail_at', [_text('decoupled', b'hi', 3, id='f', fail_at=1)]),
            ('raise_at', [_text('decoupled', b'hi', 3, id='r', raise_at=1)]),
            ('negative', [_text('decoupled', b'hi', -1, id='n')]),
            ('bad version string', [_edit(_text('decoupled', b'hi', 1, id='v'), lambda r: setattr(r, 'model_version', 'x'))]),
            ('version sent', [_edit(_text('decoupled', b'hi', -1, id='v'), lambda r: setattr(r, 'model_version', '1'))]),
            ('bad shape', [_edit(_text('decoupled', b'hi', id='s'), lambda r: (r.inputs[0].shape.__setitem__(0, 2), r.inputs[0].contents.bytes_contents.append(b'x')))]),
            ('not decoupled, in order', [add_sub_request(id='1'), _edit(add_sub_request(id='2'), lambda r: r.raw_input_contents.pop()),
                                         add_sub_request(id='3', model_name='nope'), add_sub_request(id='4')]),
            ('not decoupled, model errors', [pb.ModelInferRequest(model_name='errmodel', id=str(m), inputs=[T(name='MODE', datatype='INT32', shape=[1], contents=C(int_contents=[m]))])
                                             for m in (0, 2, 3, 1)]),
            ('classification in a stream', [_edit(add_sub_request(id='c'), lambda r: r.outputs.add(name='OUTPUT0').parameters['classification'].__setattr__('int64_param', 2))]),
            ('empty', [])]


def _normalise(label, answer):
    "Drop what legitimately differs: timings in statistics, and the parameters real Triton puts on ensemble responses."
    if label == 'ensemble' and answer[0] == 'OK':
        answer[1].pop('parameters', None)    # sequence_id/start/end of the steps: the conformance suite's intended difference
    if label.startswith('stats') and answer[0] == 'OK':
        for s in answer[1].get('model_stats', []):
            s.pop('last_inference', None)
            for d in list(s.get('inference_stats', {}).values()) + [x for b in s.get('batch_stats', []) for x in b.values() if isinstance(x, dict)]:
                d.pop('ns', None)
    return answer


@pytest.fixture(scope='module')
def pair(repo, launch_module):
    "(triton-mini stub, real Triton stub): both fresh, on the same directory."
    real, mini = start_together(lambda: launch_module.real_triton(repo),
                                lambda: launch_module.mini(repo, http=False, metrics=False, grpc=True))
    channels = [grpc.insecure_channel(f'127.0.0.1:{port}') for port in (mini.grpc_port, real.grpc_port)]
    yield [pb_grpc.GRPCInferenceServiceStub(c) for c in channels]
    for c in channels: c.close()


@pytest.mark.oracle
def test_oracle_catalogue(pair):
    stub, real_stub = pair
    differences = []
    for label, method, request in catalogue():
        # Triton counts statistics when a request is released, sometimes after its response arrived: read them settled
        read = (lambda s: settled(lambda: _call(s, method, request))) if method == 'ModelStatistics' else (lambda s: _call(s, method, request))
        ours, theirs = _normalise(label, read(stub)), _normalise(label, read(real_stub))
        if ours != theirs: differences.append(f'{label}:\n  triton-mini: {ours}\n  real Triton: {theirs}')
    assert not differences, '\n'.join(differences)


@pytest.mark.oracle
def test_oracle_streams(pair):
    stub, real_stub = pair
    differences = []
    for label, requests in streams():
        ours, theirs = _stream(stub, requests), _stream(real_stub, requests)
        if ours != theirs: differences.append(f'{label}:\n  triton-mini: {ours}\n  real Triton: {theirs}')
    assert not differences, '\n'.join(differences)


@pytest.mark.oracle
def test_oracle_server_metadata_differs_only_in_version_and_extensions(pair):
    stub, real_stub = pair
    ours, theirs = stub.ServerMetadata(pb.ServerMetadataRequest()), real_stub.ServerMetadata(pb.ServerMetadataRequest())
    assert ours.name == theirs.name and set(ours.extensions) <= set(theirs.extensions)
    assert theirs.version == '2.51.0'


@pytest.mark.oracle
def test_oracle_explicit_repository(tmp_path, launch):
    "Load, unload and failed loads in explicit mode: the same answers and the same index after each step."
    root = copy_models(tmp_path / 'models', 'conformance_explicit')
    real, mini = start_together(lambda: launch.real_triton(root, '--model-control-mode=explicit'),
                                lambda: launch.mini(root, http=False, metrics=False, grpc=True, model_control_mode='explicit'))
    stubs = {name: pb_grpc.GRPCInferenceServiceStub(grpc.insecure_channel(f'127.0.0.1:{port}'))
             for name, port in (('mini', mini.grpc_port), ('real', real.grpc_port))}
    load = lambda name, **params: pb.RepositoryModelLoadRequest(model_name=name, parameters=params)
    steps = [('RepositoryModelLoad', load('simple')), ('RepositoryModelLoad', load('pipe')),
             ('RepositoryModelUnload', pb.RepositoryModelUnloadRequest(model_name='pipe', parameters={'unload_dependents': pb.ModelRepositoryParameter(bool_param=True)})),
             ('RepositoryModelLoad', load('bad_syntax')), ('RepositoryModelLoad', load('init_raises')),
             ('RepositoryModelLoad', load('no_version_dir')), ('RepositoryModelLoad', load('ens_unknown_model')),
             ('RepositoryModelLoad', load('nope')), ('RepositoryModelLoad', load('multi')),
             ('RepositoryModelLoad', load('simple', config=pb.ModelRepositoryParameter(bool_param=True))),
             ('RepositoryModelLoad', load('simple', config=pb.ModelRepositoryParameter(string_param=json.dumps(
                 {'backend': 'python', 'max_batch_size': 2, 'input': [{'name': 'IN', 'data_type': 'TYPE_FP32', 'dims': [2]}],
                  'output': [{'name': 'OUT', 'data_type': 'TYPE_FP32', 'dims': [2]}]})))),
             ('RepositoryModelLoad', load('simple', other=pb.ModelRepositoryParameter(string_param='x'))),
             ('RepositoryModelLoad', load('simple', **{'file:1/model.py': pb.ModelRepositoryParameter(string_param='x')})),
             ('RepositoryModelUnload', pb.RepositoryModelUnloadRequest(model_name='multi', parameters={'unload_dependents': pb.ModelRepositoryParameter(string_param='x')})),
             ('RepositoryModelUnload', pb.RepositoryModelUnloadRequest(model_name='multi'))]
    differences = []
    for method, request in steps:
        answers = {name: _call(s, method, request) for name, s in stubs.items()}
        for s in stubs.values():
            wait_until(lambda: all(m.state not in ('LOADING', 'UNLOADING') for m in s.RepositoryIndex(pb.RepositoryIndexRequest()).models), 60, 'settled')
        index = {name: _call(s, 'RepositoryIndex', pb.RepositoryIndexRequest()) for name, s in stubs.items()}
        config = {name: _call(s, 'ModelConfig', pb.ModelConfigRequest(name='simple')) for name, s in stubs.items()}
        for what, got in (('answer', answers), ('index after', index), ('config of simple after', config)):
            if got['mini'] != got['real']: differences.append(f"{method} {request.model_name} ({what}):\n  triton-mini: {got['mini']}\n  real Triton: {got['real']}")
    assert not differences, '\n'.join(differences)
