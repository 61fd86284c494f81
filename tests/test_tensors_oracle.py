"""triton_mini.tensors against the real Triton 2.51 (marker `oracle`).

Starts the real server once for this module on free ports, with a model repository written to a temp
dir: `all14`, an identity Python model with one optional input per datatype (all 14 of them; BF16 goes
through DLPack because numpy has no bfloat16). Each test sends the same tensor to the server and through
our codecs and compares what comes back: output bytes, JSON values and text, and error messages with
their HTTP statuses.

The oracle is found via $TRITON_ORACLE, else <repo>/../shared/oracle/real-triton; without it every test
here is skipped with that reason.
"""
import http.client, json, math, struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from triton_mini.tensors import (DATATYPES, TritonError, byte_size, from_binary, from_json_data, json_dumps,
    np_dtype, to_binary, to_json_data)
from triton_servers import oracle_or_skip

pytestmark = pytest.mark.oracle

MODEL = 'all14'

MODEL_PY = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            outputs = []
            for t in request.inputs():
                if t.name() == "BF16":  # no numpy dtype for bfloat16: hand the buffer over through DLPack
                    outputs.append(pb_utils.Tensor.from_dlpack("BF16_OUT", t.to_dlpack()))
                else:
                    outputs.append(pb_utils.Tensor(t.name() + "_OUT", t.as_numpy()))
            responses.append(pb_utils.InferenceResponse(outputs))
        return responses
'''

def config_pbtxt():
    ins = ',\n'.join(f'  {{ name: "{w}" data_type: {d.config} dims: [ -1 ] optional: true }}' for w, d in DATATYPES.items())
    outs = ',\n'.join(f'  {{ name: "{w}_OUT" data_type: {d.config} dims: [ -1 ] }}' for w, d in DATATYPES.items())
    return f'name: "{MODEL}"\nbackend: "python"\nmax_batch_size: 0\ninput [\n{ins}\n]\noutput [\n{outs}\n]\n'

@pytest.fixture(scope='module')
def server(tmp_path_factory, launch_module):
    oracle_or_skip()
    repo = tmp_path_factory.mktemp('oracle_repo')
    (repo / MODEL / '1').mkdir(parents=True)
    (repo / MODEL / 'config.pbtxt').write_text(config_pbtxt())
    (repo / MODEL / '1' / 'model.py').write_text(MODEL_PY)
    return launch_module.real_triton(repo, wait=f'/v2/models/{MODEL}/ready').http_port

def infer(port, request, binary=None):
    "POST an infer request (+ a binary part); returns (status, JSON header dict, binary tail, raw JSON header)."
    header = json.dumps(request).encode()
    headers = {} if binary is None else {'Inference-Header-Content-Length': str(len(header))}
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    conn.request('POST', f'/v2/models/{MODEL}/infer', body=header + (binary or b''), headers=headers)
    r = conn.getresponse()
    body = r.read()
    conn.close()
    n = int(r.getheader('Inference-Header-Content-Length') or len(body))
    text = body[:n].decode('utf-8', 'surrogateescape')
    return r.status, json.loads(text), body[n:], body[:n]

def json_input(wire, data, shape):
    return {'inputs': [{'name': wire, 'datatype': wire, 'shape': shape, 'data': data}]}

def binary_input(wire, buf, shape, binary_output=True):
    req = {'inputs': [{'name': wire, 'datatype': wire, 'shape': shape, 'parameters': {'binary_data_size': len(buf)}}]}
    if binary_output: req['outputs'] = [{'name': f'{wire}_OUT', 'parameters': {'binary_data': True}}]
    return req, bytes(buf)

def same_values(a, b):
    "Equal JSON values; floats by value with NaN == NaN and the sign of zero kept."
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    return type(a) is type(b) and a == b

def same_tensor(a, b):
    if a.dtype == object: return a.tolist() == b.tolist()
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------- JSON in, JSON out

JSON_CASES = {
    'BOOL': [True, False, True],
    'UINT8': [0, 255, 256, 511, 7], 'UINT16': [0, 65535, 70000], 'UINT32': [0, 4294967295, 4294967296],
    'UINT64': [0, 18446744073709551615, 12345678901234567890],
    'INT8': [-128, 127, 200, -129], 'INT16': [-32768, 32767, 40000], 'INT32': [-2**31, 2**31 - 1, 3000000000, -1],
    'INT64': [-9223372036854775808, 9223372036854775807, 0],
    'FP32': [0.1, 1e-45, 3.4e38, 1, -0.0, 1e39, -1e39, 16777217, 0.3, 1e-7, 1e16, 1e21, 123456.789, 2**64],
    'FP64': [0.1, 1e308, 1, -0.0, 5e-324, 1e-7, 1e16, 1e21, 1e22, 0.30000000000000004, 123456.789, 2.5e-8],
    'BYTES': ['hello', '', 'héllo ☃', '\x00ab\u00ff', 'a"b\\c/d\n\t\x1f\x7f'],
}

@pytest.mark.parametrize('wire', list(JSON_CASES))
def test_json_round_trip_matches_triton(server, wire):
    values = JSON_CASES[wire]
    status, header, _, raw = infer(server, json_input(wire, values, [len(values)]))
    assert status == 200, header
    ours = to_json_data(from_json_data(values, wire, [len(values)]), wire)
    parsed, theirs = json.loads(json_dumps(ours)), header['outputs'][0]['data']
    assert len(parsed) == len(theirs) and all(same_values(o, t) for o, t in zip(parsed, theirs))
    if wire not in ('FP32', 'FP64'):  # everything but float digits is byte-identical: the whole response
        out = {'name': f'{wire}_OUT', 'datatype': wire, 'shape': [len(values)], 'data': ours}
        assert json_dumps({'model_name': MODEL, 'model_version': '1', 'outputs': [out]}) == raw

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(values=st.lists(st.floats(width=32), min_size=1, max_size=8))
def test_fp32_values_from_binary_print_like_triton(server, values):
    "Model-produced floats (sent binary, returned JSON, NaN and infinities included): same values."
    a = np.array(values, np.float32)
    status, header, _, _ = infer(server, *binary_input('FP32', to_binary(a, 'FP32'), [len(a)], binary_output=False))
    assert status == 200, header
    ours = json.loads(json_dumps(to_json_data(a, 'FP32')))
    assert all(same_values(o, t) for o, t in zip(ours, header['outputs'][0]['data'], strict=True))

def test_nan_and_non_utf8_text_is_byte_identical(server):
    for wire, a in [('FP32', np.array([np.nan, np.inf, -np.inf], np.float32)),
                    ('BYTES', np.array([b'\xff\xfe', b'\xe9\x00abc\xc3', b'ok'], object))]:
        status, header, _, raw = infer(server, *binary_input(wire, to_binary(a, wire), [len(a)], binary_output=False))
        out = {'name': f'{wire}_OUT', 'datatype': wire, 'shape': [len(a)], 'data': to_json_data(a, wire)}
        assert status == 200 and json_dumps({'model_name': MODEL, 'model_version': '1', 'outputs': [out]}) == raw


# ---------------------------------------------------------------- binary in, binary out

def sample(wire, rng):
    if wire == 'BYTES': return np.array([b'', b'a', 'héllo ☃'.encode(), b'\xff\x00\xfe', b'x' * 300], object)
    if wire == 'BOOL': return rng.random(7) > 0.5
    if wire == 'BF16': return rng.integers(0, 2**16, 9, dtype=np.uint16).view(ml_dtypes.bfloat16)
    dt = np_dtype(wire)
    if dt.kind == 'f': return np.concatenate([rng.standard_normal(5) * 1e3, [0, -0.0, np.inf, -np.inf, np.nan]]).astype(dt)
    info = np.iinfo(dt)
    return np.concatenate([rng.integers(info.min, info.max, 6, dtype=dt, endpoint=True), np.array([info.min, info.max, 0], dt)])

@pytest.mark.parametrize('wire', list(DATATYPES))
def test_binary_round_trip_matches_triton(server, wire):
    a = sample(wire, np.random.default_rng(7))
    status, header, tail, _ = infer(server, *binary_input(wire, to_binary(a, wire), [len(a)]))
    assert status == 200, header
    assert tail == bytes(to_binary(a, wire))
    assert header['outputs'][0]['parameters']['binary_data_size'] == byte_size(a, wire)
    assert same_tensor(from_binary(tail, wire, header['outputs'][0]['shape']), a)

@pytest.mark.parametrize('wire', list(DATATYPES))
def test_empty_tensors_match_triton(server, wire):
    a = np.empty(0, np_dtype(wire))
    status, header, tail, _ = infer(server, *binary_input(wire, to_binary(a, wire), [0]))
    assert status == 200 and tail == b'' and header['outputs'][0]['shape'] == [0]
    assert same_tensor(from_binary(tail, wire, [0]), a)

@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(a=hnp.arrays(object, st.integers(1, 6), elements=st.binary(max_size=20)))
def test_random_bytes_binary_matches_triton(server, a):
    status, header, tail, _ = infer(server, *binary_input('BYTES', to_binary(a, 'BYTES'), [len(a)]))
    assert status == 200 and tail == to_binary(a, 'BYTES')
    assert from_binary(tail, 'BYTES', [len(a)]).tolist() == a.tolist()


# ---------------------------------------------------------------- errors

L = lambda b: struct.pack('<I', len(b)) + b  # one BYTES element

JSON_ERRORS = [  # (wire, data, shape)
    ('FP32', [1, 1, 1, 'a'], [4]), ('FP32', ['NaN'], [1]), ('FP32', [True], [1]), ('FP32', [None], [1]),
    ('FP32', [1, 'a'], [1]), ('FP32', ['a'], [2]), ('FP32', [[1, 'a'], 3], [2]), ('FP32', [1.0, 2.0], [3]),
    ('FP32', 5, [1]), ('FP32', {'a': 1}, [1]), ('INT32', [1.5, 2], [2]), ('INT32', [1.0], [1]), ('INT32', [True], [1]),
    ('INT64', [2**63], [1]), ('INT64', [-2**63 - 1], [1]), ('INT32', [2**64 - 1], [1]), ('UINT8', [256, -1], [2]),
    ('UINT8', [True], [1]), ('UINT64', [2**64], [1]), ('BOOL', [1, 0], [2]), ('BOOL', [None], [1]),
    ('FP16', [1.5], [1]), ('FP16', 'x', [1]), ('BF16', [1.5], [1]),
    ('BYTES', [1, 2], [2]), ('BYTES', ['a', 'b', 1], [2]), ('BYTES', 'abc', [1]),
    ('BYTES', ['a', 'b'], [3]), ('BYTES', ['a', 'b', 'c', 'd'], [2]),
]

@pytest.mark.parametrize('wire,data,shape', JSON_ERRORS)
def test_json_errors_match_triton(server, wire, data, shape):
    status, header, _, _ = infer(server, json_input(wire, data, shape))
    with pytest.raises(TritonError) as info: from_json_data(data, wire, shape, name=wire, model=MODEL)
    assert (info.value.http_status, info.value.message) == (status, header['error'])

BINARY_ERRORS = [  # (wire, body, shape)
    ('FP32', b'\x00' * 7, [2]), ('FP32', b'\x00' * 9, [2]), ('INT16', b'\x00' * 3, [1]),
    ('BYTES', L(b'a') + L(b'b'), [3]), ('BYTES', L(b'a') * 4, [2]), ('BYTES', L(b'a'), [0]), ('BYTES', b'', [1]),
    ('BYTES', L(b'a') + b'\x01\x00', [2]), ('BYTES', b'\x01', [1]),
    ('BYTES', L(b'a') + struct.pack('<I', 10) + b'abc', [3]), ('BYTES', L(b'a') + struct.pack('<I', 10) + b'abc', [2]),
]

@pytest.mark.parametrize('wire,body,shape', BINARY_ERRORS)
def test_binary_errors_match_triton(server, wire, body, shape):
    req = {'inputs': [{'name': wire, 'datatype': wire, 'shape': shape, 'parameters': {'binary_data_size': len(body)}}]}
    status, header, _, _ = infer(server, req, body)
    with pytest.raises(TritonError) as info: from_binary(body, wire, shape, name=wire, model=MODEL)
    assert (info.value.http_status, info.value.message) == (status, header['error'])

@pytest.mark.parametrize('wire', ['FP16', 'BF16'])
def test_half_types_cannot_leave_as_json(server, wire):
    a = np.array([1.5, -2.0], np_dtype(wire))
    status, header, _, _ = infer(server, *binary_input(wire, to_binary(a, wire), [2], binary_output=False))
    with pytest.raises(TritonError) as info: to_json_data(a, wire)
    assert (info.value.http_status, info.value.message) == (status, header['error'])
