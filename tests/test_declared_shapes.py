"""A declared shape costs nothing (issue 18, item 4).

A request declares each tensor's shape before it sends the bytes. A few dozen bytes of gRPC declaring BYTES
`[1, 600000000]` once made the server build a 6 GB stand-in array to order its error messages, and keep it in an
exception/traceback reference cycle. Here `python -m triton_mini` runs in a subprocess and gets that request and its
relatives over gRPC and HTTP: each is answered with Triton 2.51's error (the texts below were observed on the oracle
with the same requests), quickly, and the server's *peak* RSS (VmHWM) grows by less than 100 MB. In process, a
rejected request leaves nothing for the cyclic garbage collector.

Triton 2.51 itself aborts (`std::bad_alloc`) on the HTTP JSON analogue (`shape [1, 1e12]` with three values): there
the expected answer is what Triton says for a shape small enough to allocate, `Shape does not match true shape of
'data' field`.
"""
import asyncio, gc, json, struct, sys, time, weakref
from pathlib import Path

import numpy as np
import pytest

grpc = pytest.importorskip('grpc')
psutil = pytest.importorskip('psutil')
from tritonclient.grpc import service_pb2 as pb

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from triton_servers import copy_models  # noqa: E402

T, C = pb.ModelInferRequest.InferInputTensor, pb.InferTensorContents
L4 = lambda b: struct.pack('<I', len(b)) + b
NOTE = (' NOTE: Setting a non-zero max_batch_size in the model config requires a batch dimension to be prepended to each '
        'input shape. If you want to specify the full shape including the batch dim in your input dims config, try setting '
        'max_batch_size to zero. See the model configuration docs for more info on max_batch_size.')
P = '[request id: <id_unknown>] '

GRPC_CASES = [   # (request, Triton 2.51's status and details)
    (pb.ModelInferRequest(model_name='identity_bytes', inputs=[T(name='IN', datatype='BYTES', shape=[1, 600_000_000])], raw_input_contents=[L4(b'x')]),
     ('INVALID_ARGUMENT', P + "unexpected shape for input 'IN' for model 'identity_bytes'. Expected [-1], got [1,600000000]. ")),
    (pb.ModelInferRequest(model_name='identity_bytes', inputs=[T(name='IN', datatype='BYTES', shape=[600_000_000])], raw_input_contents=[L4(b'x')]),
     ('INVALID_ARGUMENT', P + "expected 600000000 string elements for inference input 'IN' for model 'identity_bytes', got 1")),
    (pb.ModelInferRequest(model_name='typed', inputs=[T(name='STRING', datatype='BYTES', shape=[600_000_000], contents=C(bytes_contents=[b'a']))]),
     ('INVALID_ARGUMENT', P + "expected 600000000 string elements for inference input 'STRING' for model 'typed', got 1")),
    (pb.ModelInferRequest(model_name='identity_int32', inputs=[T(name='X', datatype='INT32', shape=[1, 600_000_000])], raw_input_contents=[b'\0' * 16]),
     ('INVALID_ARGUMENT', P + "input byte size mismatch for input 'X' for model 'identity_int32'. Expected 2400000000, got 16")),
    (pb.ModelInferRequest(model_name='identity_int32', inputs=[T(name='X', datatype='INT32', shape=[1, 2**40, 2**40])], raw_input_contents=[b'\0' * 16]),
     ('INVALID_ARGUMENT', P + "unexpected shape for input 'X' for model 'identity_int32'. Expected [-1,-1], got [1,1099511627776,1099511627776]." + NOTE)),
    (pb.ModelInferRequest(model_name='identity_int32', inputs=[T(name='X', datatype='INT32', shape=[1, 2**62])], raw_input_contents=[b'\0' * 16]),
     ('INVALID_ARGUMENT', P + "input byte size mismatch for input 'X' for model 'identity_int32'. Expected 0, got 16")),
    (pb.ModelInferRequest(model_name='typed', inputs=[T(name='FP32', datatype='FOO', shape=[600_000_000])], raw_input_contents=[b'\0' * 12]),
     ('INVALID_ARGUMENT', P + "inference input 'FP32' data-type is '<invalid>', but model 'typed' expects 'FP32'")),
    (pb.ModelInferRequest(model_name='add_sub', inputs=[T(name='INPUT0', datatype='FP32', shape=[1, 600_000_000]), T(name='INPUT1', datatype='FP32', shape=[1, 4])],
                          raw_input_contents=[b'\0' * 16, b'\0' * 16]),
     ('INVALID_ARGUMENT', P + "unexpected shape for input 'INPUT0' for model 'add_sub'. Expected [-1,4], got [1,600000000]." + NOTE)),
]


def _json(inputs): return json.dumps({'inputs': inputs}).encode()

def _binary(inputs, blob):
    head = _json(inputs)
    return head + blob, {'Inference-Header-Content-Length': str(len(head))}

HTTP_CASES = [   # (model, body, headers, Triton's status and body)
    ('identity_int32', _json([{'name': 'X', 'datatype': 'INT32', 'shape': [1, 10**12], 'data': [1, 2, 3]}]), {},
     (500, {'error': "Unable to parse 'data': Shape does not match true shape of 'data' field"})),
    ('typed', _json([{'name': 'FP32', 'datatype': 'FP32', 'shape': [10**12], 'data': [1, 2, 3]}]), {},
     (500, {'error': "Unable to parse 'data': Shape does not match true shape of 'data' field"})),
    ('typed', _json([{'name': 'STRING', 'datatype': 'BYTES', 'shape': [10**12], 'data': ['a', 'b', 'c']}]), {},
     (400, {'error': P + "expected 1000000000000 string elements for inference input 'STRING' for model 'typed', got 3"})),
    ('typed', *_binary([{'name': 'FP32', 'datatype': 'FP32', 'shape': [10**12], 'parameters': {'binary_data_size': 12}}], b'\0' * 12),
     (400, {'error': P + "input byte size mismatch for input 'FP32' for model 'typed'. Expected 4000000000000, got 12"})),
    ('typed', *_binary([{'name': 'STRING', 'datatype': 'BYTES', 'shape': [10**12], 'parameters': {'binary_data_size': 5}}], L4(b'x')),
     (400, {'error': P + "expected 1000000000000 string elements for inference input 'STRING' for model 'typed', got 1"})),
    ('identity_int32', *_binary([{'name': 'X', 'datatype': 'INT32', 'shape': [1, 2**62], 'parameters': {'binary_data_size': 16}}], b'\0' * 16),
     (400, {'error': P + "input byte size mismatch for input 'X' for model 'identity_int32'. Expected 0, got 16"})),
]


def peak_rss_mb(pid) -> float:
    "The process's peak resident set size (VmHWM) in MB: catches an allocation even if it was freed since."
    for line in Path(f'/proc/{pid}/status').read_text().splitlines():
        if line.startswith('VmHWM:'): return int(line.split()[1]) / 1024
    return psutil.Process(pid).memory_info().rss / 2**20


@pytest.fixture(scope='module')
def server(tmp_path_factory, launch_module):
    repo = copy_models(tmp_path_factory.mktemp('shapes') / 'models', *(f'conformance/{m}' for m in ('identity_bytes', 'identity_int32', 'typed', 'add_sub')))
    s = launch_module.mini_process(repo, metrics=False)
    ports = {'http': s.http_port, 'grpc': s.grpc_port}
    channel = grpc.insecure_channel(f"127.0.0.1:{ports['grpc']}")
    infer = channel.unary_unary('/inference.GRPCInferenceService/ModelInfer', request_serializer=pb.ModelInferRequest.SerializeToString,
                                response_deserializer=pb.ModelInferResponse.FromString)
    infer(pb.ModelInferRequest(model_name='identity_int32', inputs=[T(name='X', datatype='INT32', shape=[1, 1])], raw_input_contents=[b'\0' * 4]), timeout=60)
    yield s.proc, ports, infer
    channel.close()


def test_grpc_declared_shapes_answer_tritons_error_without_allocating(server):
    proc, _, infer = server
    assert len(GRPC_CASES[0][0].SerializeToString()) < 50          # the attack: a few dozen bytes on the wire
    before = peak_rss_mb(proc.pid)
    for _ in range(3):                                              # repeated: nothing may accumulate either
        for request, expected in GRPC_CASES:
            t0 = time.monotonic()
            with pytest.raises(grpc.RpcError) as e: infer(request, timeout=30)
            assert (e.value.code().name, e.value.details()) == expected
            assert time.monotonic() - t0 < 5                        # was 12.6 s for the first case (6.3 GB)
    assert peak_rss_mb(proc.pid) - before < 100


def test_http_declared_shapes_answer_tritons_error_without_allocating(server):
    proc, ports, _ = server
    import http.client
    before = peak_rss_mb(proc.pid)
    for model, body, headers, (status, expected) in HTTP_CASES:
        conn = http.client.HTTPConnection('127.0.0.1', ports['http'], timeout=30)
        t0 = time.monotonic()
        conn.request('POST', f'/v2/models/{model}/infer', body=body, headers=headers)
        r = conn.getresponse()
        assert (r.status, json.loads(r.read())) == (status, expected)
        assert time.monotonic() - t0 < 5
        conn.close()
    assert peak_rss_mb(proc.pid) - before < 100


# ------------------------------------------------------------------------------------------------- reference cycles, in process

class Aborted(Exception): pass

class Context:
    def invocation_metadata(self): return ()
    def set_compression(self, c): pass
    async def abort(self, code, details): raise Aborted(code.name, details)


@pytest.fixture(scope='module')
def frontend(tmp_path_factory):
    from triton_mini.server import TritonServer
    from triton_mini.grpc_server import GRPCFrontend
    repo = copy_models(tmp_path_factory.mktemp('cycles') / 'models', 'conformance/add_sub', 'conformance/errmodel')
    s = TritonServer(repo)
    assert s.start() == {}
    yield GRPCFrontend(s)
    s.stop()


def _answer(frontend, request):
    async def main():
        try: return await frontend.ModelInfer(request, Context())
        except Aborted as e: return e.args
    return asyncio.run(main())


@pytest.mark.parametrize('case', ['deferred byte error', 'model error response'])
def test_a_rejected_request_is_freed_without_the_cyclic_gc(frontend, monkeypatch, case):
    "The arrays decoded from a rejected request die when the answer is sent: no traceback keeps them in a cycle."
    import triton_mini.grpc_server as g
    decoded = []
    def recording(*a, **kw):
        arr = g_from_binary(*a, **kw)
        decoded.append(weakref.ref(arr))
        return arr
    g_from_binary = g.from_binary
    monkeypatch.setattr(g, 'from_binary', recording)
    if case == 'deferred byte error':
        request = pb.ModelInferRequest(model_name='add_sub', inputs=[T(name='INPUT0', datatype='FP32', shape=[1, 4]), T(name='INPUT1', datatype='FP32', shape=[1, 4])],
                                       raw_input_contents=[np.ones(4, np.float32).tobytes() * 1, b'\0' * 3])
        expected = 'INVALID_ARGUMENT'
    else:
        request = pb.ModelInferRequest(model_name='errmodel', inputs=[T(name='MODE', datatype='INT32', shape=[1])], raw_input_contents=[struct.pack('<i', 2)])
        expected = 'INTERNAL'
    _answer(frontend, request)                       # warm up (imports, caches)
    decoded.clear()
    gc.collect(); gc.disable()
    try:
        answer = _answer(frontend, request)
        assert answer[0] == expected, answer
        # the answer can reach this thread a moment before the model's worker thread drops its last reference to the
        # batch; what must not happen is a cycle that only the (disabled) cyclic collector could free
        deadline = time.monotonic() + 2
        while any(ref() is not None for ref in decoded) and time.monotonic() < deadline: time.sleep(0.002)
        assert decoded and all(ref() is None for ref in decoded), 'a decoded input outlived its rejected request'
    finally: gc.enable()


# ------------------------------------------------------------------------------------------------- the texts, live

def _allocatable(body:bytes) -> bytes:
    "The same JSON body with its 10**12 shape made small enough for real Triton to allocate (it aborts on 10**12)."
    return body.replace(b'1000000000000', b'1000')

@pytest.mark.oracle
def test_the_expected_texts_are_real_tritons(tmp_path, real_triton):
    "Each case above sent to real Triton 2.51 answers what the tests expect of triton-mini (JSON cases whose shape makes\n    Triton abort with std::bad_alloc are sent with a smaller shape, which Triton answers with the same error)."
    import http.client
    repo = copy_models(tmp_path / 'models', *(f'conformance/{m}' for m in ('identity_bytes', 'identity_int32', 'typed', 'add_sub')))
    t = real_triton(repo)
    channel = grpc.insecure_channel(f'127.0.0.1:{t.grpc_port}')
    infer = channel.unary_unary('/inference.GRPCInferenceService/ModelInfer', request_serializer=pb.ModelInferRequest.SerializeToString,
                                response_deserializer=pb.ModelInferResponse.FromString)
    for request, expected in GRPC_CASES:
        with pytest.raises(grpc.RpcError) as e: infer(request, timeout=60)
        assert (e.value.code().name, e.value.details()) == expected
    channel.close()
    for model, body, headers, (status, expected) in HTTP_CASES:
        small = b'"data"' in body
        if small: body = _allocatable(body)
        conn = http.client.HTTPConnection('127.0.0.1', t.http_port, timeout=60)
        conn.request('POST', f'/v2/models/{model}/infer', body=body, headers=headers)
        r = conn.getresponse()
        got = (r.status, json.loads(r.read()))
        conn.close()
        assert got == (status, {'error': expected['error'].replace('1000000000000', '1000') if small else expected['error']}), (model, body[:120])
