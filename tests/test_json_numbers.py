"""Big FP32/FP64 `data` read by simdjson (08d `parse_infer_json`) decodes to exactly what the exact path gives.

The exact path (orjson, Python lists, `from_json_data`) is the one checked against real Triton; here every request,
valid or not, must give the same tensors or the same error through both readers.
"""
import json, math
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st, HealthCheck

import triton_mini.http_hardening as H
from triton_mini.http_server import decode_infer_request
from triton_mini.tensors import TritonError

pytestmark = pytest.mark.skipif(H.simdjson is None, reason='pysimdjson is not installed')


def decode(body: bytes, fast: bool):
    "decode_infer_request's tensors and parameters, or its error, through one reader."
    saved = H.NUMBERS_JSON_BYTES
    H.NUMBERS_JSON_BYTES = 0 if fast else 1 << 62
    try:
        req, outs = decode_infer_request('m', 1, body, None)
        return ('ok', {k: (v.dtype.str, v.shape, v.tolist() if v.dtype == object else v.tobytes()) for k, v in req.inputs.items()}, req.id, req.parameters, outs)
    except TritonError as e: return ('error', e.code, e.message)
    finally: H.NUMBERS_JSON_BYTES = saved


def same(body: bytes):
    fast, exact = decode(body, True), decode(body, False)
    assert fast == exact, (body[:300], fast, exact)
    return fast


numbers = st.one_of(st.floats(allow_nan=False, allow_infinity=False), st.floats(width=32, allow_nan=False, allow_infinity=False),
                    st.integers(-2**70, 2**70), st.sampled_from([0.0, -0.0, 1e39, -1e39, 1e-46, 5e-324, 3.4028235e38]))
leaves = st.one_of(numbers, st.booleans(), st.none(), st.text(max_size=3))
nested = st.recursive(st.lists(numbers, max_size=6), lambda inner: st.lists(inner, max_size=4), max_leaves=24)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=nested, dtype=st.sampled_from(['FP32', 'FP64', 'INT32', 'UINT8', 'BOOL', 'BYTES', 'FP16']),
       shape=st.lists(st.integers(0, 6), max_size=3), extra=st.lists(leaves, max_size=2))
def test_same_tensor_or_error(data, dtype, shape, extra):
    "Any nesting, any count, a stray non-number, any datatype: both readers agree."
    data = data + extra if extra and isinstance(data, list) else data
    body = json.dumps({'id': 'x', 'inputs': [{'name': 'IN', 'datatype': dtype, 'shape': shape, 'data': data}]}).encode()
    same(body)


@pytest.mark.parametrize('body', [
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, 2]}, {"name": "B", "datatype": "FP64", "shape": [1], "data": [[3.5]]}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, NaN]}]}',          # NaN: simdjson refuses, parse_json reads
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": [-Infinity]}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, 2], "data": [3, 4]}]}',   # a repeated key
    b'{"inputs": [{"name": "A", "datatype": "FP32", "datatype": "INT32", "shape": [2], "data": [1, 2]}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": [1e400]}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": [-9223372036854775809]}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": [18446744073709551616]}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [1], "data": [1.5]], "x": 1}',    # malformed
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, 2]}], "parameters": {"priority": 2, "k": "v"}, "outputs": [{"name": "O"}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, 2], "parameters": {"binary_data_size": 8}}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": "12"}]}',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": {"a": 1}}]}',
    b'{"inputs": {"name": "A"}}',
    b'[1, 2]',
    b'{"inputs": [{"name": "A", "datatype": "FP32", "shape": [2], "data": [1, "\\ud800"]}]}',
    b'{"inputs": [{"name": "\\u00e9", "datatype": "FP64", "shape": [3], "data": [[], [1, [2]], [3]]}]}',
])
def test_edge_cases(body):
    same(body)


def test_big_body_takes_the_buffer_and_matches():
    "The benchmark's 256 KB body: the buffer path is taken (data is an ndarray) and gives the same tensor."
    values = np.random.default_rng(0).standard_normal(65536).astype(np.float32)
    body = json.dumps({'inputs': [{'name': 'INPUT0', 'shape': [1, 65536], 'datatype': 'FP32', 'data': values.tolist()}]}).encode()
    assert len(body) >= H.NUMBERS_JSON_BYTES
    assert isinstance(H.parse_infer_json(body)['inputs'][0]['data'], np.ndarray)
    got = same(body)
    assert got[1]['INPUT0'][2] == values.tobytes()
