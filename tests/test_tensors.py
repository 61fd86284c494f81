"""Property and oracle tests for triton_mini.tensors (nbs/01_tensors.ipynb).

Round trips for every datatype through both codecs (hypothesis), the BYTES layout against
`tritonclient.utils`, real client parsing of our responses (`tritonclient.http.InferResult`), float
formatting against strings the real Triton 2.51 printed, and the exact error texts and statuses.
"""
import json, math, struct

import ml_dtypes
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from hypothesis.extra import numpy as hnp

from triton_mini.tensors import (DATATYPES, DataType, TritonError, apply_reshape, byte_size, config_to_wire,
    deserialize_bytes_tensor, element_count, element_size, format_shape, from_binary, from_json_data,
    full_shape, json_dumps, np_dtype, request_prefix, serialize_byte_tensor, shape_matches, to_binary,
    to_json_data, wire_from_numpy, wire_to_config)

FIXED = [w for w, d in DATATYPES.items() if d.itemsize is not None]  # every datatype but BYTES
JSON_FIXED = [w for w in FIXED if w not in ('FP16', 'BF16')]        # the ones JSON can carry
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


# ---------------------------------------------------------------- helpers

def same_tensor(a, b):
    "Same dtype, shape and elements; floats bit for bit except that any NaN equals any NaN."
    assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
    if a.dtype == object: return a.tolist() == b.tolist()
    if a.dtype.kind in 'fV':  # V: ml_dtypes.bfloat16
        fa, fb = a.astype(np.float64), b.astype(np.float64)
        nan = np.isnan(fa)
        assert (nan == np.isnan(fb)).all()
        bits = a.view(f'u{a.dtype.itemsize}'), b.view(f'u{b.dtype.itemsize}')
        return bool((bits[0] == bits[1])[~nan].all())
    return a.tobytes() == b.tobytes()

def raises(f, message, status):
    "`f()` raises a TritonError with exactly this message and HTTP status."
    with pytest.raises(TritonError) as info: f()
    assert (info.value.message, info.value.http_status) == (message, status)

def json_text_round_trip(arr, wire):
    "arr -> to_json_data -> json_dumps -> a JSON parser that accepts NaN tokens -> from_json_data."
    text = json_dumps(to_json_data(arr, wire)).decode('utf-8', 'surrogateescape')
    return from_json_data(json.loads(text), wire, list(arr.shape))

def fixed_arrays(wire):
    dt = DATATYPES[wire].np_dtype
    if wire == 'BF16':  # every bit pattern, NaNs included
        return hnp.arrays(np.uint16, SHAPES).map(lambda a: a.view(ml_dtypes.bfloat16))
    return hnp.arrays(dt, SHAPES)

bytes_elements = st.one_of(st.binary(max_size=12), st.text(max_size=6).map(str.encode))
bytes_arrays = hnp.arrays(object, SHAPES, elements=bytes_elements)


# ---------------------------------------------------------------- round trips

@pytest.mark.parametrize('wire', FIXED)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_binary_round_trip_fixed(wire, data):
    a = data.draw(fixed_arrays(wire))
    buf = to_binary(a, wire)
    assert len(buf) == byte_size(a, wire) == a.size * element_size(wire)
    assert same_tensor(from_binary(buf, wire, list(a.shape)), a)

@pytest.mark.parametrize('wire', JSON_FIXED)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_json_round_trip_fixed(wire, data):
    a = data.draw(fixed_arrays(wire))
    assert same_tensor(json_text_round_trip(a, wire), a)

@settings(max_examples=150, deadline=None)
@given(a=bytes_arrays)
@example(a=np.array([b'', b'\x00', b'\xff\xfe', 'héllo ☃'.encode(), b'a"b\\c\n\x1f\x7f'], object))
def test_bytes_round_trips(a):
    assert same_tensor(from_binary(to_binary(a, 'BYTES'), 'BYTES', list(a.shape)), a)
    assert same_tensor(json_text_round_trip(a, 'BYTES'), a)
    assert byte_size(a, 'BYTES') == len(to_binary(a, 'BYTES'))

@pytest.mark.parametrize('wire', ['FP32', 'FP64'])
def test_special_floats_survive_json(wire):
    info = np.finfo(np_dtype(wire))
    a = np.array([np.nan, np.inf, -np.inf, -0.0, 0.0, info.max, info.min, info.smallest_subnormal], np_dtype(wire))
    assert json_dumps(to_json_data(a[:4], wire)) == b'[NaN,Infinity,-Infinity,-0.0]'
    assert same_tensor(json_text_round_trip(a, wire), a)

@pytest.mark.parametrize('wire', FIXED)
def test_extreme_values_binary(wire):
    dt = DATATYPES[wire].np_dtype
    info = np.iinfo(dt) if dt.kind in 'iu' else None
    a = np.array([info.min, info.max, 0], dt) if info else np.array([True, False] if wire == 'BOOL' else [0, -0.0, np.inf, -np.inf, np.nan]).astype(dt)
    assert same_tensor(from_binary(to_binary(a, wire), wire, list(a.shape)), a)
    if wire in JSON_FIXED: assert same_tensor(json_text_round_trip(a, wire), a)


# ---------------------------------------------------------------- JSON decoding rules

INT_WIRES = [w for w in JSON_FIXED if w.startswith(('INT', 'UINT'))]

@pytest.mark.parametrize('wire', INT_WIRES)
@settings(max_examples=80, deadline=None)
@given(v=st.integers(min_value=-2**64, max_value=2**65))
def test_ints_wrap_like_triton(wire, v):
    "Any int of the right sign that fits in 64 bits is cast without a range check; others are a 500."
    signed = wire.startswith('INT')
    ok = -2**63 <= v < 2**63 if signed else 0 <= v < 2**64
    if ok:
        wide = np.array([v], np.int64 if signed else np.uint64)
        assert same_tensor(from_json_data([v], wire, [1]), wide.astype(np_dtype(wire)))
    else:
        kind = 'signed-integer as signed-integer' if signed else 'unsigned-integer as unsigned-integer'
        raises(lambda: from_json_data([v], wire, [1]), f"Unable to parse 'data': attempt to access JSON non-{kind}", 500)

def nestings(values):
    "Strategy: `values` split into arbitrarily nested lists, empty lists sprinkled in."
    if not values: return st.sampled_from([[], [[]], [[], [[]]]])
    return st.integers(1, len(values)).flatmap(
        lambda cut: st.tuples(st.just(values[:cut]), nestings(values[cut:]) if cut < len(values) else st.just([]))
        .map(lambda t: [t[0], t[1]] if t[1] else [t[0]]))

@settings(max_examples=100, deadline=None)
@given(data=st.data(), values=st.lists(st.integers(-1000, 1000), max_size=12))
def test_nesting_is_ignored(data, values):
    nested = data.draw(nestings(values))
    assert same_tensor(from_json_data(nested, 'INT32', [len(values)]), np.array(values, np.int32))

@settings(max_examples=100, deadline=None)
@given(values=st.lists(st.floats(allow_nan=False), max_size=8), extra=st.integers(-3, 3).filter(bool))
def test_count_mismatch_is_a_shape_error(values, extra):
    if len(values) + extra < 0: return
    raises(lambda: from_json_data(values, 'FP64', [len(values) + extra]),
           "Unable to parse 'data': Shape does not match true shape of 'data' field", 500)

def test_fp32_cast_is_a_c_cast():
    "float32 from the double, not from the decimal text: 16777217 -> 16777216.0, 1e39 -> inf, no warning."
    with np.errstate(all='raise'):
        got = from_json_data([16777217, 1e39, -1e39, 2**64, 0.1], 'FP32', [5])
    assert got.tolist() == [16777216.0, np.inf, -np.inf, float(np.float32(2**64)), float(np.float32(0.1))]

def test_decoded_arrays():
    assert from_json_data([1, 2], 'FP32', [2]).flags.writeable
    assert not from_binary(b'\x00' * 8, 'FP32', [2]).flags.writeable  # a zero-copy view of the body
    assert from_json_data(['a'], 'BYTES', [1, 1]).dtype == object


# ---------------------------------------------------------------- JSON encoding: Triton's strings

# Triton 2.51's JSON for FP64 values sent in binary (so rapidjson's parser is not involved), captured
# from the real server (/work/shared/oracle/real-triton): (little-endian bits, Triton's text).
TRITON_FP64 = [
    ('4fefe2d6e41a4b44', '999999999999999900000.0'), ('08f6c28e44bb5044', '1.2345678901234569e21'),
    ('343333333333d33f', '0.30000000000000007'), ('f64ae1c7022db544', '9.999999999999999e22'),
    ('0100000000000000', '5e-324'), ('48afbc9af2d77a3e', '1e-7'), ('0080e03779c34143', '10000000000000000.0'),
    ('355800662deb417e', '1.5e300'), ('9a9999999999b93f', '0.1'), ('c976be9f0c24fe40', '123456.789'),
    ('3c344c4189eb2f1e', '2.7715077941825976e-163'), ('a3d811736110e578', '2.2790121708605245e274'),
    ('85c924c3597164c4', '-3.0168212434893707e21'), ('a6058a00581a22b2', '-3.3573703852372159e-67'),
    ('2de50472433d2e44', '278908409818195070000.0'), ('fed8b6b8357e44cd', '-1.6860668391509669e64'),
    ('39f3c3e693114351', '2.8940701966505208e83'), ('df0e7337420c13f8', '-2.5157234196648137e270'),
    ('87376f07bcb81287', '-1.3518464599291116e-274'), ('fdc8c0388fe881c3', '-161304845894623150.0'),
    ('df111a3b3df245ad', '-1.3467022099658465e-90'), ('75598005bac48a6a', '1.6785354100381098e205'),
    ('f0a4f21e0adc3ebe', '-7.1850441006303288e-9'), ('59340f6cf6c1f981', '-3.8461908647605977e-299'),
    ('e334243ecc2165be', '-3.936145966292681e-8'), ('7bd5d47e446fcec2', '-66926478731690.96'),
    ('1bcccea696762e61', '1.3383932992236106e160'), ('16c6e9c92d99bf35', '8.445496795513092e-50'),
]
# FP32 values sent as JSON and echoed back by Triton (spec/raw/out_types.md and our own capture).
TRITON_FP32 = [
    (0.1, '0.10000000149011612'), (1e-45, '1.401298464324817e-45'), (3.4e38, '3.3999999521443644e38'),
    (1, '1.0'), (-0.0, '-0.0'), (1e-7, '1.0000000116860974e-7'), (1e16, '10000000272564224.0'),
    (1e20, '100000002004087730000.0'), (1e21, '1.0000000200408774e21'), (1e22, '9.999999778196309e21'),
    (123456.789, '123456.7890625'), (0.000001, '9.999999974752428e-7'),
    (3.4028234663852886e38, '3.4028234663852887e38'), (16777217, '16777216.0'), (0.3, '0.30000001192092898'),
]

def mantissa_digits(s):
    return len(s.lower().split('e')[0].replace('-', '').replace('.', '').strip('0'))

@pytest.mark.parametrize('bits,triton', TRITON_FP64)
def test_fp64_text_means_the_same_double(bits, triton):
    v = np.frombuffer(bytes.fromhex(bits), '<f8')
    ours = json_dumps(to_json_data(v, 'FP64')).decode()[1:-1]
    assert float(ours) == float(triton) == v[0]
    assert mantissa_digits(ours) <= mantissa_digits(triton)  # orjson's is the shortest; Grisu2's not always

@pytest.mark.parametrize('value,triton', TRITON_FP32)
def test_fp32_widened_like_triton(value, triton):
    ours = json_dumps(to_json_data(np.array([value], np.float32), 'FP32')).decode()[1:-1]
    assert float(ours) == float(triton) and math.copysign(1, float(ours)) == math.copysign(1, float(triton))

@pytest.mark.parametrize('arr,wire,triton', [
    (np.array([True, False]), 'BOOL', b'[true,false]'),
    (np.array([0, 255], np.uint8), 'UINT8', b'[0,255]'),
    (np.array([0, 2**64 - 1], np.uint64), 'UINT64', b'[0,18446744073709551615]'),
    (np.array([-128, 127], np.int8), 'INT8', b'[-128,127]'),
    (np.array([-2**63, 2**63 - 1], np.int64), 'INT64', b'[-9223372036854775808,9223372036854775807]'),
    (np.array([np.nan, np.inf], np.float32), 'FP32', b'[NaN,Infinity]'),
    (np.array([-0.0, -np.inf, np.nan, -np.nan]), 'FP64', b'[-0.0,-Infinity,NaN,NaN]'),
    (np.array([b'hello', b'', 'héllo ☃'.encode()], object), 'BYTES', '["hello","","héllo ☃"]'.encode()),
    (np.array(['\x00abÿ'.encode()], object), 'BYTES', '["\\u0000abÿ"]'.encode()),
    (np.array([b'\xff\xfe'], object), 'BYTES', b'["\xff\xfe"]'),
    (np.array([b'\xe9\x00abc\xc3'], object), 'BYTES', b'["\xe9\\u0000abc\xc3"]'),
    (np.array([b'\x00\x01\x1f\n\t\r\x08\x0c"\\/\x7f\xc3\xa9\xe2\x98\x83'], object), 'BYTES',
     b'["\\u0000\\u0001\\u001F\\n\\t\\r\\b\\f\\"\\\\/\x7f\xc3\xa9\xe2\x98\x83"]'),
    (np.array([b'a', b'bc'], object).reshape(1, 2), 'BYTES', b'["a","bc"]'),
])
def test_json_bytes_exactly_like_triton(arr, wire, triton):
    "Every non-float output Triton 2.51 printed, byte for byte (floats: only where digits agree)."
    assert json_dumps(to_json_data(arr, wire)) == triton

def test_json_dumps_leaves_plain_values_to_orjson():
    assert json_dumps({'a': [1, 2.5, 'x', None, True]}) == b'{"a":[1,2.5,"x",null,true]}'
    assert json_dumps({'p': np.int32(3), 'q': np.float64(np.inf)}) == b'{"p":3,"q":Infinity}'
    with pytest.raises(TypeError): json_dumps({'a': object()})


# ---------------------------------------------------------------- BYTES layout: tritonclient as oracle

tcu = pytest.importorskip('tritonclient.utils')

@settings(max_examples=150, deadline=None)
@given(a=bytes_arrays)
def test_serialize_matches_tritonclient(a):
    theirs = tcu.serialize_byte_tensor(a)
    assert serialize_byte_tensor(a) == (theirs.item() if a.size else b'')  # theirs: empty array when a is empty
    buf = serialize_byte_tensor(a)
    assert deserialize_bytes_tensor(buf).tolist() == tcu.deserialize_bytes_tensor(buf).tolist() == a.ravel().tolist()

def test_serialize_str_and_S_arrays_like_tritonclient():
    for a in (np.array([['a', 'é'], ['', 'xyz']], object), np.array([b'ab', b'c\x00d'], 'S3'), np.array([1, 2.5, None], object)):
        assert serialize_byte_tensor(a) == tcu.serialize_byte_tensor(a).item()

http = pytest.importorskip('tritonclient.http')

@pytest.mark.parametrize('wire', FIXED + ['BYTES'])
def test_tritonclient_binary_input_is_our_layout(wire):
    "What tritonclient puts in a binary request body is what from_binary reads and to_binary writes."
    a = np.array([[b'x', b''], ['ü'.encode(), b'\x00']], object) if wire == 'BYTES' else (np.arange(6).reshape(2, 3) - 3).astype(np_dtype(wire))
    inp = http.InferInput('IN', list(a.shape), wire)
    inp.set_data_from_numpy(a, binary_data=True)
    raw = inp._get_binary_data()
    assert bytes(to_binary(a, wire)) == raw and inp._get_tensor()['parameters']['binary_data_size'] == byte_size(a, wire)
    assert same_tensor(from_binary(raw, wire, list(a.shape)), a)

@pytest.mark.parametrize('wire', JSON_FIXED + ['BYTES'])
def test_tritonclient_json_input_decodes(wire):
    a = np.array([['x', 'é'], ['', 'z']], object) if wire == 'BYTES' else (np.arange(6).reshape(2, 3) - 3).astype(np_dtype(wire))
    inp = http.InferInput('IN', list(a.shape), wire)
    inp.set_data_from_numpy(a, binary_data=False)
    data = json.loads(json.dumps(inp._get_tensor()['data']))
    expected = np.array([[b'x', 'é'.encode()], [b'', b'z']], object) if wire == 'BYTES' else a
    assert same_tensor(from_json_data(data, wire, list(a.shape)), expected)

def response_body(outputs):
    "An infer response body as the HTTP layer will build it: JSON header, then the binary outputs."
    tensors, blobs = [], []
    for name, arr, wire, binary in outputs:
        t = {'name': name, 'datatype': wire, 'shape': list(arr.shape)}
        if binary:
            t['parameters'] = {'binary_data_size': byte_size(arr, wire)}
            blobs.append(bytes(to_binary(arr, wire)))
        else: t['data'] = to_json_data(arr, wire)
        tensors.append(t)
    header = json_dumps({'model_name': 'm', 'model_version': '1', 'outputs': tensors})
    return header + b''.join(blobs), len(header)

@pytest.mark.parametrize('wire', FIXED + ['BYTES'])
def test_tritonclient_reads_our_responses(wire):
    "The real client decodes what our codecs write, JSON and binary, back into the same arrays."
    rng = np.random.default_rng(0)
    if wire == 'BYTES': a = np.array([b'hello', b'', 'héllo ☃'.encode(), b'\x00x'], object).reshape(2, 2)
    elif wire == 'BOOL': a = rng.random((2, 3)) > 0.5
    else: a = (rng.standard_normal((2, 3)) * 100).astype(np_dtype(wire))
    outputs = [('B', a, wire, True)] + ([('J', a, wire, False)] if wire not in ('FP16', 'BF16') else [])
    body, header_length = response_body(outputs)
    result = http.InferResult.from_response_body(body, header_length=header_length)
    for name, *_ in outputs:
        got = result.as_numpy(name)
        if wire == 'BYTES':  # the client gives str elements for JSON data, bytes for binary
            got = np.array([x.encode() if isinstance(x, str) else x for x in got.ravel()], object).reshape(got.shape)
        assert same_tensor(got, a)


# ---------------------------------------------------------------- errors: Triton's texts and statuses

L = lambda b: struct.pack('<I', len(b)) + b  # one BYTES element

ERRORS = [  # (call, message, status); messages captured from Triton 2.51 for the same input
    (lambda: from_json_data([1, 1, 1, 'a'], 'FP32', [1, 4]), "Unable to parse 'data': attempt to access JSON non-number as double", 500),
    (lambda: from_json_data(['NaN'], 'FP32', [1]), "Unable to parse 'data': attempt to access JSON non-number as double", 500),
    (lambda: from_json_data([True], 'FP32', [1]), "Unable to parse 'data': attempt to access JSON non-number as double", 500),
    (lambda: from_json_data([None], 'FP32', [1]), "Unable to parse 'data': attempt to access JSON non-number as double", 500),
    (lambda: from_json_data([{}], 'FP32', [1]), "Unable to parse 'data': attempt to access JSON non-number as double", 500),
    (lambda: from_json_data([[1, 'a'], 3], 'FP32', [2]), "Unable to parse 'data': attempt to access JSON non-number as double", 500),
    (lambda: from_json_data(['a'], 'FP32', [2]), "Unable to parse 'data': attempt to access JSON non-number as double", 500),
    (lambda: from_json_data([1, 'a'], 'FP32', [1]), "Unable to parse 'data': Shape does not match true shape of 'data' field", 500),
    (lambda: from_json_data([1.0, 2.0], 'FP32', [3]), "Unable to parse 'data': Shape does not match true shape of 'data' field", 500),
    (lambda: from_json_data([], 'FP32', []), "Unable to parse 'data': Shape does not match true shape of 'data' field", 500),
    (lambda: from_json_data([1.5, 2], 'INT32', [2]), "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", 500),
    (lambda: from_json_data([1.0], 'INT32', [1]), "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", 500),
    (lambda: from_json_data([True, False], 'INT32', [2]), "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", 500),
    (lambda: from_json_data([2**63], 'INT64', [1]), "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", 500),
    (lambda: from_json_data([2**64 - 1], 'INT32', [1]), "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", 500),
    (lambda: from_json_data([-2**63 - 1], 'INT64', [1]), "Unable to parse 'data': attempt to access JSON non-signed-integer as signed-integer", 500),
    (lambda: from_json_data([256, -1], 'UINT8', [2]), "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer", 500),
    (lambda: from_json_data([True], 'UINT8', [1]), "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer", 500),
    (lambda: from_json_data([2**64], 'UINT64', [1]), "Unable to parse 'data': attempt to access JSON non-unsigned-integer as unsigned-integer", 500),
    (lambda: from_json_data([1, 0], 'BOOL', [2]), "Unable to parse 'data': attempt to access JSON non-boolean as boolean", 500),
    (lambda: from_json_data([None], 'BOOL', [1]), "Unable to parse 'data': attempt to access JSON non-boolean as boolean", 500),
    (lambda: from_json_data(5, 'FP32', [1]), "Unable to parse 'data': attempt to access JSON non-array as array", 500),
    (lambda: from_json_data('abc', 'BYTES', [1]), "Unable to parse 'data': attempt to access JSON non-array as array", 500),
    (lambda: from_json_data('x', 'FP16', [1]), "Unable to parse 'data': attempt to access JSON non-array as array", 500),
    (lambda: from_json_data([1.5, 0.1, 65504], 'FP16', [3]), 'receiving FP16 data via JSON is not supported. Please use the binary data format for input FP16', 400),
    (lambda: from_json_data([1.0], 'FP16', [7]), 'receiving FP16 data via JSON is not supported. Please use the binary data format for input FP16', 400),
    (lambda: from_json_data([1.5], 'BF16', [1]), 'receiving BF16 data via JSON is not supported. Please use the binary data format for input BF16', 400),
    (lambda: from_json_data([1], 'FLOAT', [1], name='INPUT1'), 'invalid datatype for input INPUT1', 400),
    (lambda: from_json_data([1], 'fp32', [1], name='INPUT0'), 'invalid datatype for input INPUT0', 400),
    (lambda: from_json_data([1, 2], 'BYTES', [2]), 'Unable to parse JSON bytes array: attempt to access JSON non-string as string', 500),
    (lambda: from_json_data(['a', 'b', 1], 'BYTES', [2]), 'Unable to parse JSON bytes array: attempt to access JSON non-string as string', 500),
    (lambda: from_json_data([None], 'BYTES', [1]), 'Unable to parse JSON bytes array: attempt to access JSON non-string as string', 500),
    (lambda: from_json_data(['a', 'b'], 'BYTES', [3], name='BYTES', model='all14'),
     "[request id: <id_unknown>] expected 3 string elements for inference input 'BYTES' for model 'all14', got 2", 400),
    (lambda: from_json_data(['a', 'b', 'c'], 'BYTES', [2], name='BYTES', model='all14'),
     "[request id: <id_unknown>] unexpected number of string elements 3 for inference input 'BYTES' for model 'all14', expecting 2", 400),
    (lambda: from_binary(b'\x00' * 12, 'FP32', [1, 4], name='INPUT1', model='add_sub'),
     "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for model 'add_sub'. Expected 16, got 12", 400),
    (lambda: from_binary(b'\x00' * 9, 'FP32', [2], name='FP32', model='all14', request_id='abc'),
     "[request id: abc] input byte size mismatch for input 'FP32' for model 'all14'. Expected 8, got 9", 400),
    (lambda: from_binary(L(b'hi') + L(b'there!'), 'BYTES', [3], name='IN', model='identity_bytes'),
     "[request id: <id_unknown>] expected 3 string elements for inference input 'IN' for model 'identity_bytes', got 2", 400),
    (lambda: from_binary(b'', 'BYTES', [1], name='BYTES', model='all14'),
     "[request id: <id_unknown>] expected 1 string elements for inference input 'BYTES' for model 'all14', got 0", 400),
    (lambda: from_binary(L(b'a') * 4, 'BYTES', [2], name='BYTES', model='all14'),
     "[request id: <id_unknown>] unexpected number of string elements 3 for inference input 'BYTES' for model 'all14', expecting 2", 400),
    (lambda: from_binary(L(b'a'), 'BYTES', [0], name='BYTES', model='all14'),
     "[request id: <id_unknown>] unexpected number of string elements 1 for inference input 'BYTES' for model 'all14', expecting 0", 400),
    (lambda: from_binary(L(b'a') + L(b'b') + b'\x01', 'BYTES', [2], name='BYTES', model='all14'),
     "[request id: <id_unknown>] incomplete string length indicator for inference input 'BYTES' for model 'all14', expecting 4 bytes but only 1 bytes available. Please make sure the string length indicator is in one buffer.", 400),
    (lambda: from_binary(b'\x01\x00', 'BYTES', [1], name='BYTES', model='all14'),
     "[request id: <id_unknown>] incomplete string length indicator for inference input 'BYTES' for model 'all14', expecting 4 bytes but only 2 bytes available. Please make sure the string length indicator is in one buffer.", 400),
    (lambda: from_binary(L(b'a') + struct.pack('<I', 10) + b'abc', 'BYTES', [3], name='BYTES', model='all14'),
     "[request id: <id_unknown>] expected 3 string elements for inference input 'BYTES' for model 'all14', got 2", 400),
    (lambda: from_binary(L(b'a') + struct.pack('<I', 10) + b'abc', 'BYTES', [2], name='BYTES', model='all14'),
     "incomplete string data for inference input 'BYTES', expecting string of length 10 but only 3 bytes available", 400),
    (lambda: to_json_data(np.zeros(2, np.float16), 'FP16'), 'sending FP16 data via JSON is not supported. Please use the binary data format for output', 400),
    (lambda: to_json_data(np.zeros(2, ml_dtypes.bfloat16), 'BF16'), 'sending BF16 data via JSON is not supported. Please use the binary data format for output', 400),
    (lambda: wire_from_numpy(np.array(['a']).dtype), 'NumPy dtype is not supported.', 400),
]

@pytest.mark.parametrize('call,message,status', ERRORS, ids=range(len(ERRORS)))
def test_error_texts(call, message, status):
    raises(call, message, status)

def test_error_codes_and_statuses():
    statuses = {'UNKNOWN': 400, 'INTERNAL': 500, 'NOT_FOUND': 404, 'INVALID_ARG': 400, 'UNAVAILABLE': 503,
                'UNSUPPORTED': 501, 'ALREADY_EXISTS': 400, 'CANCELLED': 400}
    for code, status in statuses.items():
        e = TritonError('msg', code)
        assert (e.code, e.http_status, str(e), e.message) == (code, status, 'msg', 'msg')
    assert TritonError('m').code == 'INVALID_ARG'
    with pytest.raises(ValueError): TritonError('m', 'NOPE')
    assert request_prefix('') == '[request id: <id_unknown>] ' and request_prefix('r') == '[request id: r] '


# ---------------------------------------------------------------- datatype table and shapes

def test_datatype_table():
    assert list(DATATYPES) == ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64',
                               'FP16', 'FP32', 'FP64', 'BYTES', 'BF16']
    for wire, d in DATATYPES.items():
        assert isinstance(d, DataType) and d.wire == wire
        assert config_to_wire(wire_to_config(wire)) == wire and wire_from_numpy(np_dtype(wire)) == wire
        assert element_size(wire) == (None if wire == 'BYTES' else np_dtype(wire).itemsize)
    assert wire_to_config('BYTES') == 'TYPE_STRING' and config_to_wire('TYPE_BF16') == 'BF16'

def test_pb_utils_codes_match_tritonclient_names():
    "pb_utils' integer codes follow TRITONSERVER_DataType: 1 BOOL ... 13 STRING, and 2.51 has none for BF16."
    assert {d.pb_code: w for w, d in DATATYPES.items()} == {i + 1: w for i, w in enumerate(list(DATATYPES)[:13])} | {None: 'BF16'}

def test_numpy_names_match_tritonclient():
    for wire in DATATYPES:
        assert np.dtype(tcu.triton_to_np_dtype(wire)) == np_dtype(wire)
        assert tcu.np_to_triton_dtype(np_dtype(wire)) == wire

@settings(max_examples=200, deadline=None)
@given(dims=st.lists(st.sampled_from([-1, 1, 2, 3]), max_size=4), mbs=st.integers(0, 8),
       shape=st.lists(st.integers(0, 4), max_size=5))
def test_shape_rules(dims, mbs, shape):
    full = full_shape(dims, mbs)
    assert full == ([-1] + dims if mbs else dims)
    expected = len(shape) == len(full) and all(d in (-1, s) for s, d in zip(shape, full))
    assert shape_matches(shape, full) == expected
    assert format_shape(full) == json.dumps(full).replace(' ', '')
    assert element_count(shape) == math.prod(shape) and element_count(full) == (-1 if -1 in full else math.prod(full))

@settings(max_examples=200, deadline=None)
@given(data=st.data(), dims=st.lists(st.sampled_from([-1, 1, 2, 3]), min_size=1, max_size=4))
def test_reshape_keeps_the_elements(data, dims):
    "A reshape that permutes dims (the config layer's size check holds) keeps the element count and dims."
    reshape = data.draw(st.permutations(dims))
    shape = [data.draw(st.integers(0, 5)) if d == -1 else d for d in dims]
    model_shape = apply_reshape(shape, dims, reshape)
    assert element_count(model_shape) == element_count(shape) and shape_matches(model_shape, reshape)
    assert apply_reshape(model_shape, reshape, dims) == shape  # outputs: back to what clients see
