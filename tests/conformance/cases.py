"""The conformance catalogue: every request tests/test_conformance.py sends to real Triton and to triton-mini.

One `Case` per row: an id, the HTTP method and path, the body and headers, which server pair serves it
(`none`: tests/models/conformance in model-control-mode none; `explicit`: tests/models/conformance_explicit in
explicit mode), and how to compare the two answers. Cases run in the order listed and both servers get the
same requests in the same order, so cases that depend on earlier ones (statistics, metrics, load/unload)
compare like with like. No case holds an expected answer: real Triton's answer is the expectation.

Where triton-mini differs on purpose, the case says so in `xfail` (run as `xfail(strict=True)`).
Requests that hang real Triton 2.51 are not sent at all; they are listed at the end of this file.
"""
from __future__ import annotations
import base64, gzip, json, struct, zlib
from dataclasses import dataclass, field

import numpy as np


@dataclass
class Case:
    id: str
    method: str
    path: str
    body: bytes | str | dict | list | None = None
    headers: dict = field(default_factory=dict)
    pair: str = 'none'              # which pair of servers: 'none' or 'explicit'
    compare: str = 'http'           # 'http', 'stream' (server-sent events), or 'metrics:<aspect>'
    setup: tuple = ()               # (method, path, body[, headers]) sent to both servers first, not compared
    settle: str | None = None       # model name: wait until it is no longer UNLOADING/LOADING before the request
    normalize: tuple = ()           # extra normalisations (see test_conformance.NORMALIZERS)
    unordered: bool = False         # compare JSON objects ignoring key order
    xfail: str | None = None        # why triton-mini differs on purpose
    note: str = ''

    def body_bytes(self) -> bytes:
        return encode(self.body)


def encode(body) -> bytes:
    if body is None: return b''
    if isinstance(body, bytes): return body
    if isinstance(body, str): return body.encode()
    return json.dumps(body).encode()


CASES: list[Case] = []

def case(id, method, path, body=None, **kw):
    if any(c.id == id for c in CASES): raise ValueError(f'duplicate case id {id}')
    CASES.append(Case(id, method, path, body, **kw))


# ---------------------------------------------------------------------------------------------------------
# Request builders

def tensor(name, datatype, shape, data=None, **parameters):
    t = {'name': name, 'shape': list(shape), 'datatype': datatype}
    if data is not None: t['data'] = data
    if parameters: t['parameters'] = parameters
    return t

def infer(*inputs, outputs=None, **top):
    body = dict(top)
    body['inputs'] = list(inputs)
    if outputs is not None: body['outputs'] = outputs
    return body

def out(name, **parameters):
    return {'name': name, 'parameters': parameters} if parameters else {'name': name}

def binary(doc, *blobs, header_length=None) -> dict:
    "body + headers of a binary-extension request: the JSON header, then the raw tensors."
    head = json.dumps(doc).encode()
    n = len(head) if header_length is None else header_length
    return {'body': head + b''.join(blobs), 'headers': {'Inference-Header-Content-Length': str(n)}}

def f32(*values) -> bytes: return np.array(values, dtype=np.float32).tobytes()
def i32(*values) -> bytes: return np.array(values, dtype=np.int32).tobytes()
def strings(*values) -> bytes:
    "BYTES tensor wire layout: each element is a 4-byte little-endian length and the bytes."
    return b''.join(struct.pack('<I', len(v)) + v for v in (x.encode() if isinstance(x, str) else x for x in values))

A = tensor('INPUT0', 'FP32', [1, 4], [1, 2, 3, 4])
B = tensor('INPUT1', 'FP32', [1, 4], [[1, 1, 1, 1]])
OK = infer(A, B)
ADD = '/v2/models/add_sub'

def with_input(i, **changes):
    "OK with input i changed (None deletes a key)."
    body = json.loads(json.dumps(OK))
    for k, v in changes.items():
        if v is None: body['inputs'][i].pop(k, None)
        else: body['inputs'][i][k] = v
    return body

def mode(m, **top):
    return infer(tensor('MODE', 'INT32', [1], [m]), **top)

def gen_body(**kw): return kw


# ---------------------------------------------------------------------------------------------------------
# Health, server metadata, routing (spec: http-protocol.md §0-§2)

case('health_live', 'GET', '/v2/health/live')
case('health_ready', 'GET', '/v2/health/ready')
case('server_metadata', 'GET', '/v2', normalize=('server_version',))
case('route_root', 'GET', '/')
case('route_v2_health', 'GET', '/v2/health')
case('route_trailing_slash', 'GET', f'{ADD}/')
case('route_double_slash', 'GET', '//v2/health/live')
case('route_version_abc', 'GET', f'{ADD}/versions/abc')
case('route_version_negative', 'GET', f'{ADD}/versions/-1')
case('route_version_empty', 'GET', f'{ADD}/versions/')
case('route_unknown_action', 'GET', f'{ADD}/nope')
case('route_models_list', 'GET', '/v2/models',
     xfail='GET /v2/models lists the models in triton-mini (the seed asks for it); real Triton has no such route (404)')
case('route_percent_encoded', 'GET', '/v2/models/add%5Fsub', note='no percent-decoding: unknown model add%5Fsub')
case('route_query_string', 'GET', '/v2/health/live?verbose=1')
case('route_version_leading_zero', 'GET', f'{ADD}/versions/01')
case('method_post_live', 'POST', '/v2/health/live')
case('method_get_infer', 'GET', f'{ADD}/infer')
case('method_put_metadata', 'PUT', ADD)
case('method_delete_model', 'DELETE', ADD)
case('method_get_index', 'GET', '/v2/repository/index')
case('method_get_generate', 'GET', '/v2/models/gen/generate')
case('method_head_live', 'HEAD', '/v2/health/live')
case('method_get_load', 'GET', '/v2/repository/models/add_sub/load')

# ---------------------------------------------------------------------------------------------------------
# Model metadata (§3), config (§4), readiness (§2)

for name in ('add_sub', 'add_sub_nobatch', 'identity_bytes', 'typed', 'ens', 'decoupled', 'versioned', 'classify', 'gen'):
    case(f'metadata_{name}', 'GET', f'/v2/models/{name}')
case('metadata_add_sub_v1', 'GET', f'{ADD}/versions/1')
case('metadata_versioned_v2', 'GET', '/v2/models/versioned/versions/2')
case('metadata_versioned_v1_not_loaded', 'GET', '/v2/models/versioned/versions/1')
case('metadata_unknown_model', 'GET', '/v2/models/nope')
case('metadata_unknown_version', 'GET', f'{ADD}/versions/9')

for name in ('add_sub', 'add_sub_nobatch', 'identity_bytes', 'typed', 'ens', 'decoupled', 'versioned', 'classify',
             'metricmodel', 'async_model', 'bls_add'):
    case(f'config_{name}', 'GET', f'/v2/models/{name}/config', normalize=('proto_maps',))
case('config_add_sub_v1', 'GET', f'{ADD}/versions/1/config', normalize=('proto_maps',))
case('config_unknown_model', 'GET', '/v2/models/nope/config')
case('config_unknown_version', 'GET', f'{ADD}/versions/9/config')

case('ready_add_sub', 'GET', f'{ADD}/ready')
case('ready_add_sub_v1', 'GET', f'{ADD}/versions/1/ready')
case('ready_versioned_v1_not_loaded', 'GET', '/v2/models/versioned/versions/1/ready')
case('ready_unknown_model', 'GET', '/v2/models/nope/ready')
case('ready_unknown_version', 'GET', f'{ADD}/versions/9/ready')

# ---------------------------------------------------------------------------------------------------------
# Inference with JSON tensors (§5.1-§5.2)

case('infer_json', 'POST', f'{ADD}/infer', OK, headers={'Content-Type': 'application/json'})
case('infer_id_and_version', 'POST', f'{ADD}/versions/1/infer', dict(OK, id='my-req-1'))
case('infer_batch_2', 'POST', f'{ADD}/infer', infer(tensor('INPUT0', 'FP32', [2, 4], list(range(8))),
                                                  tensor('INPUT1', 'FP32', [2, 4], [1] * 4 + [2] * 4)))
case('infer_ragged_nesting', 'POST', f'{ADD}/infer', with_input(0, data=[[1, 2, 3], [4]]))
case('infer_body_model_name_ignored', 'POST', f'{ADD}/infer', dict(OK, model_name='other', model_version='7'))
case('infer_unknown_keys_ignored', 'POST', f'{ADD}/infer', dict(OK, foo=1))
case('infer_requested_output_subset', 'POST', f'{ADD}/infer', dict(OK, outputs=[out('OUTPUT1')]))
case('infer_requested_outputs_reordered', 'POST', f'{ADD}/infer', dict(OK, outputs=[out('OUTPUT1'), out('OUTPUT0')]))
case('infer_requested_output_twice', 'POST', f'{ADD}/infer',
     dict(OK, outputs=[out('OUTPUT1', binary_data=True), out('OUTPUT1')]))
case('infer_requested_output_unknown', 'POST', f'{ADD}/infer', dict(OK, outputs=[out('NOPE')]))
case('infer_versioned_latest', 'POST', '/v2/models/versioned/infer', infer(tensor('X', 'INT32', [1], [0])))
case('infer_versioned_v2', 'POST', '/v2/models/versioned/versions/2/infer', infer(tensor('X', 'INT32', [1], [0])))
case('infer_versioned_v1_not_loaded', 'POST', '/v2/models/versioned/versions/1/infer', infer(tensor('X', 'INT32', [1], [0])))
case('infer_async_model', 'POST', '/v2/models/async_model/infer', infer(tensor('X', 'FP64', [2, 3], [1, 2, 3, 4, 5, 6.5])))
case('infer_bls', 'POST', '/v2/models/bls_add/infer',
     infer(tensor('A', 'FP32', [4], [1, 2, 3, 4]), tensor('B', 'FP32', [4], [10, 20, 30, 40])))
case('infer_bls_missing_model', 'POST', '/v2/models/bls_add/infer',
     infer(tensor('A', 'FP32', [4], [1, 2, 3, 4]), tensor('B', 'FP32', [4], [10, 20, 30, 40]), parameters={'target': 'nope'}))
case('infer_nobatch', 'POST', '/v2/models/add_sub_nobatch/infer',
     infer(tensor('INPUT0', 'FP32', [4], [1, 2, 3, 4]), tensor('INPUT1', 'FP32', [4], [1, 1, 1, 1])))

# request parameters: what reaches the model (gen echoes them in `info`)
case('infer_parameters_reach_model', 'POST', '/v2/models/gen/infer',
     infer(tensor('text_input', 'BYTES', [1], ['hi']), parameters={'my_int': 1, 's': 'x', 'b': True, 'f': 1.5}))
case('infer_reserved_parameters_consumed', 'POST', '/v2/models/gen/infer',
     infer(tensor('text_input', 'BYTES', [1], ['hi']),
           parameters={'priority': 1, 'timeout': 1000000, 'binary_data_output': False, 'keep': 'me'}))
case('infer_parameter_object', 'POST', f'{ADD}/infer', dict(OK, parameters={'nested': {'a': 1}}))
case('infer_parameter_array', 'POST', f'{ADD}/infer', dict(OK, parameters={'nested': [1]}))
case('infer_parameter_null', 'POST', f'{ADD}/infer', dict(OK, parameters={'nested': None}))
case('infer_priority_timeout_ignored', 'POST', f'{ADD}/infer', dict(OK, parameters={'priority': 1, 'timeout': 100}))
case('infer_priority_string', 'POST', f'{ADD}/infer', dict(OK, parameters={'priority': 'high'}))
case('infer_timeout_negative', 'POST', f'{ADD}/infer', dict(OK, parameters={'timeout': -1}))
case('infer_sequence_id_negative', 'POST', f'{ADD}/infer', dict(OK, parameters={'sequence_id': -3}))
case('infer_sequence_id_float', 'POST', f'{ADD}/infer', dict(OK, parameters={'sequence_id': 1.5}))
case('infer_binary_data_output_string', 'POST', f'{ADD}/infer', dict(OK, parameters={'binary_data_output': 'yes'}))
case('infer_binary_data_string', 'POST', f'{ADD}/infer', dict(OK, outputs=[out('OUTPUT0', binary_data='yes')]))
case('infer_classification_string', 'POST', f'{ADD}/infer', dict(OK, outputs=[out('OUTPUT0', classification='2')]))
case('infer_id_number', 'POST', f'{ADD}/infer', dict(OK, id=5))
case('infer_parameters_not_object', 'POST', f'{ADD}/infer', dict(OK, parameters=[1]))
case('infer_outputs_not_array', 'POST', f'{ADD}/infer', dict(OK, outputs={'name': 'OUTPUT0'}))

# ---------------------------------------------------------------------------------------------------------
# /infer error catalogue (§5.3, §7)

case('error_unknown_model', 'POST', '/v2/models/nope/infer', OK)
case('error_unknown_version', 'POST', f'{ADD}/versions/9/infer', OK)
case('error_wrong_input_name', 'POST', f'{ADD}/infer', with_input(1, name='INPUTX'))
case('error_wrong_datatype', 'POST', f'{ADD}/infer', with_input(1, datatype='INT32'))
case('error_wrong_datatype_with_id', 'POST', f'{ADD}/infer', dict(with_input(1, datatype='INT32'), id='abc'))
case('error_invalid_datatype', 'POST', f'{ADD}/infer', with_input(1, datatype='FLOAT'))
case('error_lowercase_datatype', 'POST', f'{ADD}/infer', with_input(1, datatype='fp32'))
case('error_wrong_shape', 'POST', f'{ADD}/infer', with_input(1, shape=[1, 5], data=[1, 1, 1, 1, 1]))
case('error_missing_batch_dim', 'POST', f'{ADD}/infer', with_input(1, shape=[4]))
case('error_element_count_mismatch', 'POST', f'{ADD}/infer', with_input(1, shape=[2, 4]))
case('error_too_few_elements', 'POST', f'{ADD}/infer', with_input(1, data=[1, 1, 1]))
case('error_string_in_fp32', 'POST', f'{ADD}/infer', with_input(1, data=[1, 1, 1, 'a']))
case('error_missing_input', 'POST', f'{ADD}/infer', infer(A))
case('error_no_inputs', 'POST', f'{ADD}/infer', infer())
case('error_duplicate_input', 'POST', f'{ADD}/infer', infer(A, B, A))
case('error_missing_datatype', 'POST', f'{ADD}/infer', with_input(0, datatype=None))
case('error_missing_shape', 'POST', f'{ADD}/infer', with_input(0, shape=None))
case('error_missing_name', 'POST', f'{ADD}/infer', with_input(0, name=None))
case('error_no_data_field', 'POST', f'{ADD}/infer', with_input(0, data=None))
case('error_data_and_binary_size', 'POST', f'{ADD}/infer', with_input(0, parameters={'binary_data_size': 16}))
case('error_shape_not_array', 'POST', f'{ADD}/infer', with_input(0, shape='1,4'))
case('error_negative_dim', 'POST', f'{ADD}/infer', with_input(0, shape=[-1, 4]))
case('error_inputs_not_array', 'POST', f'{ADD}/infer', {'inputs': A})
case('error_malformed_json', 'POST', f'{ADD}/infer', '{"inputs": [')
case('error_malformed_json_name', 'POST', f'{ADD}/infer', '{bad')
case('error_trailing_garbage', 'POST', f'{ADD}/infer', json.dumps(OK) + ' x')
case('error_empty_object', 'POST', f'{ADD}/infer', '{}')
case('error_json_array', 'POST', f'{ADD}/infer', '[]')
case('error_empty_body', 'POST', f'{ADD}/infer', '')
case('error_batch_too_big', 'POST', f'{ADD}/infer',
     infer(tensor('INPUT0', 'FP32', [9, 4], [1] * 36), tensor('INPUT1', 'FP32', [9, 4], [1] * 36)))
case('error_batch_zero', 'POST', f'{ADD}/infer', infer(tensor('INPUT0', 'FP32', [0, 4], []), tensor('INPUT1', 'FP32', [0, 4], [])))
case('error_batch_sizes_differ', 'POST', f'{ADD}/infer',
     infer(tensor('INPUT0', 'FP32', [2, 4], [1] * 8), tensor('INPUT1', 'FP32', [1, 4], [1] * 4)))
case('error_nobatch_extra_dim', 'POST', '/v2/models/add_sub_nobatch/infer',
     infer(tensor('INPUT0', 'FP32', [4], [1, 2, 3, 4]), tensor('INPUT1', 'FP32', [1, 4], [1] * 4)))
# Not sent: several inputs wrong at once. Triton checks the inputs in hash-map order (for two inputs, in
# practice the last one first), so which input its message names is an accident of hashing.
case('error_variable_dim_empty_shape', 'POST', '/v2/models/identity_int32/infer', infer(tensor('X', 'INT32', [], [1])))
case('error_only_optional_inputs', 'POST', '/v2/models/gen/infer', infer(tensor('max_tokens', 'INT32', [1], [3])),
     note='the input count is within [required, all], but the required input is missing',
     xfail='Triton 2.51 checks only the input count, so a request carrying only optional inputs reaches the model (which fails, 500); triton-mini names the missing required input (400)')
case('error_optional_model_no_inputs', 'POST', '/v2/models/gen/infer', infer())
case('error_variable_dims_wrong_rank', 'POST', '/v2/models/identity_bytes/infer', infer(tensor('IN', 'BYTES', [2, 2], ['a', 'b', 'c', 'd'])))
case('error_decoupled_infer', 'POST', '/v2/models/decoupled/infer', infer(tensor('text_input', 'BYTES', [1], ['hi'])))
case('error_ensemble_internal_output', 'POST', '/v2/models/ens/infer',
     infer(tensor('X', 'FP32', [1, 2], [1, 2]), outputs=[out('b_out')]))
case('error_content_encoding_unsupported', 'POST', f'{ADD}/infer', OK, headers={'Content-Encoding': 'br'})

# ---------------------------------------------------------------------------------------------------------
# Datatypes as JSON (typed: one optional input per datatype, echoed back)

T = '/v2/models/typed/infer'
case('types_all_json', 'POST', T, infer(
    tensor('BOOL', 'BOOL', [3], [True, False, True]), tensor('UINT8', 'UINT8', [2], [0, 255]),
    tensor('UINT16', 'UINT16', [1], [65535]), tensor('UINT32', 'UINT32', [1], [4294967295]),
    tensor('UINT64', 'UINT64', [1], [18446744073709551615]), tensor('INT8', 'INT8', [2], [-128, 127]),
    tensor('INT16', 'INT16', [1], [-32768]), tensor('INT32', 'INT32', [2], [-2147483648, 2147483647]),
    tensor('INT64', 'INT64', [2], [-9223372036854775808, 9223372036854775807]),
    tensor('FP32', 'FP32', [4], [0.1, 1e-45, 3.4e38, -0.0]), tensor('FP64', 'FP64', [3], [0.1, 1e308, 5e-324]),
    tensor('STRING', 'BYTES', [3], ['hello', '', 'héllo ☃'])),
     normalize=('sort_outputs',), note="with this many outputs real Triton's output order is not the model's (a hash order)")
case('types_fp32_integral', 'POST', T, infer(tensor('FP32', 'FP32', [3], [1, 2.0, -3])))
case('types_nan_infinity_tokens', 'POST', T,
     '{"inputs":[{"name":"FP64","shape":[3],"datatype":"FP64","data":[NaN, Infinity, -Infinity]}]}')
case('types_int32_wraps', 'POST', T, infer(tensor('INT32', 'INT32', [1], [3000000000])))
case('types_uint8_wraps', 'POST', T, infer(tensor('UINT8', 'UINT8', [1], [300])))
case('types_bool_from_int', 'POST', T, infer(tensor('BOOL', 'BOOL', [2], [1, 0])))
case('types_int_from_float', 'POST', T, infer(tensor('INT32', 'INT32', [1], [1.5])))
case('types_int_from_bool', 'POST', T, infer(tensor('INT32', 'INT32', [1], [True])))
case('types_uint_negative', 'POST', T, infer(tensor('UINT8', 'UINT8', [1], [-1])))
case('types_fp16_json_input', 'POST', T, infer(tensor('FP16', 'FP16', [1], [1.0])))
case('types_bf16_json_input', 'POST', T, infer(tensor('FP32', 'BF16', [1], [1.0])))
case('types_fp16_binary_in_json_out', 'POST', T,
     **binary(infer(tensor('FP16', 'FP16', [2], binary_data_size=4)), np.array([1, 2], np.float16).tobytes()))
case('types_fp16_binary_in_binary_out', 'POST', T,
     **binary(infer(tensor('FP16', 'FP16', [2], binary_data_size=4), outputs=[out('FP16_OUT', binary_data=True)]),
              np.array([1.5, -2], np.float16).tobytes()))
case('types_no_inputs_at_all', 'POST', T, infer())
case('types_bytes_number', 'POST', '/v2/models/identity_bytes/infer', infer(tensor('IN', 'BYTES', [1], [5])))
case('types_bytes_json', 'POST', '/v2/models/identity_bytes/infer', infer(tensor('IN', 'BYTES', [3], ['hello', '', 'héllo ☃'])))
case('types_bytes_nul', 'POST', '/v2/models/identity_bytes/infer', infer(tensor('IN', 'BYTES', [1], ['a\u0000b'])))
case('types_bytes_binary_in', 'POST', '/v2/models/identity_bytes/infer',
     **binary(infer(tensor('IN', 'BYTES', [2], binary_data_size=11)), strings('a', 'bc')))
case('types_bytes_not_utf8_as_json', 'POST', '/v2/models/identity_bytes/infer',
     **binary(infer(tensor('IN', 'BYTES', [1], binary_data_size=9)), strings(b'\xff\xfeab\x00')))
case('types_bytes_binary_size_too_small', 'POST', '/v2/models/identity_bytes/infer',
     **binary(infer(tensor('IN', 'BYTES', [1], binary_data_size=7)), strings(b'abcde')))
case('types_bytes_binary_out', 'POST', '/v2/models/identity_bytes/infer',
     infer(tensor('IN', 'BYTES', [2], ['a', 'bc']), outputs=[out('OUT', binary_data=True)]))
case('types_bytes_binary_count_mismatch', 'POST', '/v2/models/identity_bytes/infer',
     **binary(infer(tensor('IN', 'BYTES', [3], binary_data_size=11)), strings('a', 'bc')))
case('types_bytes_binary_truncated', 'POST', '/v2/models/identity_bytes/infer',
     **binary(infer(tensor('IN', 'BYTES', [1], binary_data_size=6)), struct.pack('<I', 9) + b'ab'))

# ---------------------------------------------------------------------------------------------------------
# Binary tensor extension (§6)

BIN2 = infer(tensor('INPUT0', 'FP32', [1, 4], binary_data_size=16), tensor('INPUT1', 'FP32', [1, 4], binary_data_size=16))
case('binary_inputs', 'POST', f'{ADD}/infer', **binary(BIN2, f32(1, 2, 3, 4), f32(10, 20, 30, 40)))
case('binary_inputs_and_outputs', 'POST', f'{ADD}/infer',
     **binary(dict(BIN2, outputs=[out('OUTPUT0', binary_data=True), out('OUTPUT1', binary_data=False)]),
              f32(1, 2, 3, 4), f32(10, 20, 30, 40)))
case('binary_mixed_inputs', 'POST', f'{ADD}/infer',
     **binary(infer(A, tensor('INPUT1', 'FP32', [1, 4], binary_data_size=16)), f32(5, 6, 7, 8)))
case('binary_output_requested', 'POST', f'{ADD}/infer', dict(OK, outputs=[out('OUTPUT1', binary_data=True)]))
case('binary_data_output_all', 'POST', f'{ADD}/infer', dict(OK, parameters={'binary_data_output': True}))
case('binary_data_output_with_outputs_list', 'POST', f'{ADD}/infer',
     dict(OK, parameters={'binary_data_output': True}, outputs=[out('OUTPUT1')]))
case('binary_data_output_false_output_true', 'POST', f'{ADD}/infer',
     dict(OK, parameters={'binary_data_output': False}, outputs=[out('OUTPUT1', binary_data=True)]))
case('binary_header_is_whole_body', 'POST', f'{ADD}/infer', **binary(OK))
case('binary_header_too_big', 'POST', f'{ADD}/infer', **binary(OK, header_length=10000))
case('binary_header_too_small', 'POST', f'{ADD}/infer', **binary(OK, header_length=20))
case('binary_header_missing', 'POST', f'{ADD}/infer', json.dumps(BIN2).encode() + f32(1, 2, 3, 4) + f32(1, 2, 3, 4))
case('binary_body_short', 'POST', f'{ADD}/infer', **binary(BIN2, f32(1, 2, 3, 4), f32(1, 2)))
case('binary_body_long', 'POST', f'{ADD}/infer', **binary(BIN2, f32(1, 2, 3, 4), f32(1, 2, 3, 4), f32(9)))
case('binary_size_mismatch', 'POST', f'{ADD}/infer',
     **binary(infer(tensor('INPUT0', 'FP32', [1, 4], binary_data_size=16), tensor('INPUT1', 'FP32', [1, 4], binary_data_size=12)),
              f32(1, 2, 3, 4), f32(1, 2, 3)))
case('binary_size_negative', 'POST', f'{ADD}/infer',
     **binary(infer(A, tensor('INPUT1', 'FP32', [1, 4], binary_data_size=-16)), f32(1, 2, 3, 4)))
# Triton reads every input (source, name, JSON data) before it checks that the binary part was used up; the tensor
# made from a binary input (its size, its datatype) is checked after that
I32 = '/v2/models/identity_int32/infer'
# Two faults: Triton names the unknown output before any input fault, and counts inputs before it names them
case('unknown_output_and_missing_input', 'POST', f'{ADD}/infer', infer(A, outputs=[out('NOPE')]))
case('too_many_inputs_one_unknown', 'POST', f'{ADD}/infer', infer(A, B, tensor('Z', 'FP32', [1], [1])))
case('two_unknown_inputs', 'POST', '/v2/models/identity_int32/infer', infer(tensor('P', 'INT32', [1], [1]), tensor('Q', 'INT32', [1], [1])))
case('binary_extra_after_bad_json_data', 'POST', I32, **binary(infer(tensor('X', 'INT32', [1, 3], ['a', 2, 3])), i32(1, 2, 3)))
case('binary_extra_after_bad_name', 'POST', I32, **binary(infer({'name': 5, 'datatype': 'INT32', 'shape': [1, 3], 'data': [1, 2, 3]}), i32(1, 2, 3)))
case('binary_extra_input_without_data', 'POST', I32,
     **binary(infer(tensor('X', 'INT32', [1, 3], [1, 2, 3]), tensor('Y', 'INT32', [1])), i32(1, 2, 3)))
case('binary_extra_no_inputs_key', 'POST', I32, **binary({'inp_ts': [tensor('X', 'INT32', [1, 3], binary_data_size=12)]}, i32(1, 2, 3)))
case('binary_declared_short_for_shape', 'POST', I32, **binary(infer(tensor('X', 'INT32', [1, 3], binary_data_size=8)), i32(1, 2, 3)))
case('binary_invalid_datatype_extra', 'POST', I32, **binary(infer(tensor('X', 'INT3;', [1, 3], binary_data_size=12)), i32(1, 2, 3, 4)))
case('raw_request', 'POST', '/v2/models/identity_int32/infer', i32(7, 8, 9), headers={'Inference-Header-Content-Length': '0'})
case('raw_request_multi_input_model', 'POST', f'{ADD}/infer', f32(1, 2, 3, 4), headers={'Inference-Header-Content-Length': '0'})
case('raw_request_bytes_model', 'POST', '/v2/models/echo_text/infer', b'hello', headers={'Inference-Header-Content-Length': '0'})
case('raw_request_bytes_variable_dims', 'POST', '/v2/models/identity_bytes/infer', strings('x'),
     headers={'Inference-Header-Content-Length': '0'})

# ---------------------------------------------------------------------------------------------------------
# Classification extension

case('classification_top2', 'POST', f'{ADD}/infer', dict(OK, outputs=[out('OUTPUT0', classification=2)]))
case('classification_labels', 'POST', '/v2/models/classify/infer',
     infer(tensor('SCORES_IN', 'FP32', [1, 5], [0.1, 0.7, 0.05, 0.9, 0.2]), outputs=[out('SCORES', classification=3)]))
case('classification_batch_2', 'POST', '/v2/models/classify/infer',
     infer(tensor('SCORES_IN', 'FP32', [2, 5], [0.1, 0.7, 0.05, 0.9, 0.2, 5, 4, 3, 2, 1]), outputs=[out('SCORES', classification=1)]))
case('classification_more_than_classes', 'POST', '/v2/models/classify/infer',
     infer(tensor('SCORES_IN', 'FP32', [1, 5], [1, 2, 3, 4, 5]), outputs=[out('SCORES', classification=9)]))
case('classification_binary', 'POST', '/v2/models/classify/infer',
     infer(tensor('SCORES_IN', 'FP32', [1, 5], [0.1, 0.7, 0.05, 0.9, 0.2]), outputs=[out('SCORES', classification=2, binary_data=True)]))
case('classification_nobatch', 'POST', '/v2/models/add_sub_nobatch/infer',
     infer(tensor('INPUT0', 'FP32', [4], [1, 2, 3, 4]), tensor('INPUT1', 'FP32', [4], [1, 1, 1, 1]),
           outputs=[out('OUTPUT1', classification=2)]))

# ---------------------------------------------------------------------------------------------------------
# Errors raised or returned by a Python model (§5.6)

E = '/v2/models/errmodel/infer'
case('python_ok', 'POST', E, mode(0))
case('python_raises', 'POST', E, mode(1))
case('python_raises_with_id', 'POST', E, mode(1, id='req-7'))
case('python_error_response', 'POST', E, mode(2))
case('python_error_not_found', 'POST', E, mode(3))
case('python_undeclared_output', 'POST', E, mode(4))
case('python_output_wrong_datatype', 'POST', E, mode(5))
case('python_output_wrong_shape', 'POST', E, mode(6))
case('python_too_few_responses', 'POST', E, mode(8))
case('python_no_outputs', 'POST', E, mode(9))
case('python_error_unavailable', 'POST', E, mode(10))
case('python_model_exception', 'POST', E, mode(11))
case('python_error_invalid_arg', 'POST', E, mode(12))
case('python_error_unsupported', 'POST', E, mode(13))

# ---------------------------------------------------------------------------------------------------------
# Ensembles (§5.5): outputs arrive in completion order, and real Triton adds a `parameters` block, the request's
# sequence (sequence_id/start/end) once per output, keys repeated in the JSON (06_ensemble, Hardening).

ENS = infer(tensor('X', 'FP32', [1, 2], [1, 2]))
case('ensemble_infer', 'POST', '/v2/models/ens/infer', ENS, normalize=('sort_outputs',))
case('ensemble_infer_verbatim', 'POST', '/v2/models/ens/infer', dict(ENS, id='e1'))
case('ensemble_sequence_parameters', 'POST', '/v2/models/ens/infer', dict(ENS, parameters={'sequence_id': 5, 'sequence_start': True}))
case('ensemble_sequence_string_id', 'POST', '/v2/models/ens/infer', dict(ENS, parameters={'sequence_id': 'abc', 'sequence_end': True, 'foo': 'bar'}))
case('ensemble_binary_outputs', 'POST', '/v2/models/ens/infer', dict(ENS, parameters={'binary_data_output': True}))
case('ensemble_both_outputs_named', 'POST', '/v2/models/ens/infer', dict(ENS, outputs=[out('SUM', binary_data=True), out('A')]))
case('ensemble_requested_output', 'POST', '/v2/models/ens/infer', dict(ENS, outputs=[out('A')]),
     xfail="Triton 2.51 prunes steps whose outputs were not requested and starves a consumer ('unexpected deadlock', 400); triton-mini runs the whole graph and returns the requested output (the spec's advice)")
case('ensemble_batch_2', 'POST', '/v2/models/ens/infer', infer(tensor('X', 'FP32', [2, 2], [1, 2, 3, 4])),
     normalize=('sort_outputs',))
case('ensemble_wrong_shape', 'POST', '/v2/models/ens/infer', infer(tensor('X', 'FP32', [1, 3], [1, 2, 3])))

# ---------------------------------------------------------------------------------------------------------
# Generate extension (§8)

G = '/v2/models/gen'
case('generate', 'POST', f'{G}/generate', gen_body(id='42', text_input='hi', max_tokens=3, foo='bar'))
case('gzip_response_generate', 'POST', f'{G}/generate', gen_body(id='42', text_input='hi', max_tokens=3), headers={'Accept-Encoding': 'gzip'})
case('generate_parameters_as_inputs', 'POST', f'{G}/generate',
     gen_body(text_input='hi', parameters={'temperature': 0.5, 'top_k': 4}))
case('generate_add_sub', 'POST', f'{ADD}/generate', gen_body(INPUT0=[1, 2, 3, 4], INPUT1=[1, 1, 1, 1]))
case('generate_missing_input', 'POST', f'{G}/generate', gen_body(max_tokens=3),
     xfail="as error_only_optional_inputs, through /generate: Triton's model fails, triton-mini names the missing required input")
case('generate_ensemble', 'POST', '/v2/models/ens/generate', gen_body(X=[1, 2], sequence_id=3))
case('stream_ensemble', 'POST', '/v2/models/ens/generate_stream', gen_body(X=[1, 2]), compare='stream')
case('generate_wrong_shape', 'POST', f'{G}/generate', gen_body(text_input=['a', 'b']))
case('generate_number_for_bytes', 'POST', f'{G}/generate', gen_body(text_input=5))
case('generate_string_for_fp32', 'POST', f'{G}/generate', gen_body(text_input='hi', temperature='hot'))
case('generate_parameters_wrong_shape', 'POST', f'{G}/generate', gen_body(text_input='hi', parameters={'temperature': [0, 0]}))
case('generate_parameters_not_number', 'POST', f'{G}/generate', gen_body(text_input='hi', parameters={'temperature': {'x': 0.5}}))
case('generate_number_among_strings', 'POST', f'{G}/generate', gen_body(text_input=['a', 1]))
case('generate_nested_numbers_for_bytes', 'POST', f'{G}/generate', gen_body(text_input=[[1, 2], [3]]))
case('generate_nested_strings', 'POST', f'{G}/generate', gen_body(text_input=[['a', 'b'], ['c']]))
case('generate_unknown_model', 'POST', '/v2/models/nope/generate', gen_body(text_input='hi'))
case('generate_malformed_json', 'POST', f'{G}/generate', '{"text_input": ')
case('generate_decoupled_one_response', 'POST', '/v2/models/decoupled/generate', gen_body(text_input='hi', N=1))
case('generate_decoupled_three_responses', 'POST', '/v2/models/decoupled/generate', gen_body(text_input='hi', N=3))
case('generate_decoupled_error', 'POST', '/v2/models/decoupled/generate', gen_body(text_input='hi', N=-1))
case('generate_python_raises', 'POST', '/v2/models/errmodel/generate', gen_body(MODE=1))
case('generate_python_error_response', 'POST', '/v2/models/errmodel/generate', gen_body(MODE=2))
case('generate_python_error_not_found', 'POST', '/v2/models/errmodel/generate', gen_body(MODE=3))
case('generate_python_error_unavailable', 'POST', '/v2/models/errmodel/generate', gen_body(MODE=10))
case('generate_ok', 'POST', '/v2/models/errmodel/generate', gen_body(MODE=0))
case('stream_decoupled', 'POST', '/v2/models/decoupled/generate_stream', gen_body(text_input='hi', N=3), compare='stream')
case('stream_decoupled_error_midway', 'POST', '/v2/models/decoupled/generate_stream',
     gen_body(text_input='hi', N=3, fail_at=1), compare='stream')
case('stream_decoupled_first_error', 'POST', '/v2/models/decoupled/generate_stream',
     gen_body(text_input='hi', N=3, fail_at=0), compare='stream')
case('stream_decoupled_no_responses', 'POST', '/v2/models/decoupled/generate_stream', gen_body(text_input='hi', N=0), compare='stream')
case('stream_decoupled_negative', 'POST', '/v2/models/decoupled/generate_stream', gen_body(text_input='hi', N=-1), compare='stream')
case('stream_decoupled_raises', 'POST', '/v2/models/decoupled/generate_stream',
     gen_body(text_input='hi', N=3, raise_at=1), compare='stream')
case('stream_not_decoupled', 'POST', f'{G}/generate_stream', gen_body(id='7', text_input='hi'), compare='stream')
case('stream_missing_input', 'POST', f'{G}/generate_stream', gen_body(foo=1), compare='stream')

# ---------------------------------------------------------------------------------------------------------
# Compression (§0)

case('gzip_request', 'POST', f'{ADD}/infer', gzip.compress(encode(OK)), headers={'Content-Encoding': 'gzip'})
case('gzip_response', 'POST', f'{ADD}/infer', OK, headers={'Accept-Encoding': 'gzip'})
case('deflate_response', 'POST', f'{ADD}/infer', OK, headers={'Accept-Encoding': 'deflate'})
# Which encoding: Triton's own reading of Accept-Encoding (08d_http_hardening: the first of the highest weight wins)
for name, accept in [('deflate_first', 'deflate, gzip'), ('gzip_q0', 'gzip;q=0'), ('weights', 'gzip;q=0.5, deflate'),
                     ('weight_prefix', 'gzip;q=0.7x, deflate;q=0.6'), ('weight_not_a_number', 'gzip;q=abc'),
                     ('weight_hex', 'gzip;q=0x1p-1'), ('identity_first', 'identity, gzip'), ('identity_heavier', 'identity;q=0.5, gzip;q=0.4'),
                     ('uppercase', 'GZIP'), ('x_gzip', 'x-gzip'), ('star', '*'), ('leading_space', ' gzip'), ('br', 'br')]:
    case(f'accept_encoding_{name}', 'POST', f'{ADD}/infer', OK, headers={'Accept-Encoding': accept})
case('accept_encoding_binary', 'POST', f'{ADD}/infer', dict(OK, outputs=[out('OUTPUT0', binary_data=True)]), headers={'Accept-Encoding': 'deflate'})
case('accept_encoding_ensemble', 'POST', '/v2/models/ens/infer', ENS, headers={'Accept-Encoding': 'gzip'})
# Which responses are compressed: only inference results (the aio client's /v2/models/stats read depends on it).
for name, method, path, body in [('model_metadata', 'GET', ADD, None),
                                 ('index', 'POST', '/v2/repository/index', b'{}'),
                                 ('model_config', 'GET', f'{ADD}/config', None),
                                 ('generate_stream', 'POST', '/v2/models/gen/generate_stream', b'{"text_input":"hi"}'),
                                 ('infer_error', 'POST', '/v2/models/no_such_model/infer', OK)]:
    case(f'gzip_response_{name}', method, path, body, headers={'Accept-Encoding': 'gzip'})
case('gzip_response_infer_failed', 'POST', f'{ADD}/infer', encode({'inputs': [{'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]}]}),
     headers={'Accept-Encoding': 'gzip'})

# Bad compressed bodies (issue 18): Triton inflates what it can and goes on with that; only /infer inflates.
GZ = gzip.compress(encode(OK))
case('gzip_truncated', 'POST', f'{ADD}/infer', GZ[:len(GZ) // 2], headers={'Content-Encoding': 'gzip'})
case('gzip_without_trailer', 'POST', f'{ADD}/infer', GZ[:-4], headers={'Content-Encoding': 'gzip'})
case('gzip_corrupt', 'POST', f'{ADD}/infer', GZ[:10] + b'\xff' * 40, headers={'Content-Encoding': 'gzip'})
case('gzip_corrupt_middle', 'POST', f'{ADD}/infer', GZ[:40] + bytes(b ^ 0x5A for b in GZ[40:60]) + GZ[60:], headers={'Content-Encoding': 'gzip'})
case('gzip_not_compressed', 'POST', f'{ADD}/infer', OK, headers={'Content-Encoding': 'gzip'})
case('gzip_empty_body', 'POST', f'{ADD}/infer', b'', headers={'Content-Encoding': 'gzip'})
case('gzip_zlib_framing', 'POST', f'{ADD}/infer', zlib.compress(encode(OK)), headers={'Content-Encoding': 'gzip'})
case('deflate_gzip_framing', 'POST', f'{ADD}/infer', GZ, headers={'Content-Encoding': 'deflate'})
case('deflate_raw_stream', 'POST', f'{ADD}/infer', zlib.compress(encode(OK))[2:-4], headers={'Content-Encoding': 'deflate'})
case('gzip_trailing_bytes', 'POST', f'{ADD}/infer', GZ + b'garbage', headers={'Content-Encoding': 'gzip'})
case('gzip_two_members', 'POST', f'{ADD}/infer', GZ + GZ, headers={'Content-Encoding': 'gzip'})
case('content_encoding_uppercase', 'POST', f'{ADD}/infer', GZ, headers={'Content-Encoding': 'GZIP'})
case('content_encoding_identity', 'POST', f'{ADD}/infer', OK, headers={'Content-Encoding': 'identity'})
case('gzip_index_not_inflated', 'POST', '/v2/repository/index', gzip.compress(b'{}'), headers={'Content-Encoding': 'gzip'})
case('br_index_ignored', 'POST', '/v2/repository/index', b'{}', headers={'Content-Encoding': 'br'})
case('gzip_logging_not_inflated', 'POST', '/v2/logging', gzip.compress(b'{}'), headers={'Content-Encoding': 'gzip'})
case('gzip_generate', 'POST', '/v2/models/gen/generate', gzip.compress(b'{"text_input":"a"}'), headers={'Content-Encoding': 'gzip'})
case('deflate_generate_stream', 'POST', '/v2/models/gen/generate_stream', b'{"text_input":"a"}', headers={'Content-Encoding': 'deflate'})
case('identity_generate', 'POST', '/v2/models/gen/generate', b'{"text_input":"a"}', headers={'Content-Encoding': 'identity'})
case('gzip_unknown_model', 'POST', '/v2/models/nope/infer', b'\x1f\x8b garbage', headers={'Content-Encoding': 'gzip'})

# Inference-Header-Content-Length is read with C's atoi (issue 18: no parse error, 'abc' is 0, a raw request)
case('ihcl_not_a_number', 'POST', f'{ADD}/infer', OK, headers={'Inference-Header-Content-Length': 'abc'})
case('ihcl_not_a_number_one_input', 'POST', '/v2/models/identity_int32/infer', i32(5), headers={'Inference-Header-Content-Length': 'abc'})
case('ihcl_digits_then_text', 'POST', f'{ADD}/infer', OK, headers={'Inference-Header-Content-Length': '12abc'})
case('ihcl_empty', 'POST', f'{ADD}/infer', OK, headers={'Inference-Header-Content-Length': ''})
case('ihcl_negative', 'POST', f'{ADD}/infer', OK, headers={'Inference-Header-Content-Length': '-1'})
case('ihcl_twenty_digits', 'POST', f'{ADD}/infer', OK, headers={'Inference-Header-Content-Length': '9' * 20})
case('ihcl_plus_sign', 'POST', f'{ADD}/infer', OK, headers={'Inference-Header-Content-Length': '+' + str(len(encode(OK)))})
case('ihcl_wraps_at_32_bits', 'POST', f'{ADD}/infer', OK, headers={'Inference-Header-Content-Length': str(2**32 + len(encode(OK)))})

# JSON nested deeper than orjson (1,024) and the standard library (~1,000) go: rapidjson has no limit
DEEP = 2000
case('json_nested_inputs', 'POST', f'{ADD}/infer', b'{"inputs":' + b'[' * DEEP + b']' * DEEP + b'}')
case('json_nested_data', 'POST', f'{ADD}/infer',
     encode(infer(tensor('INPUT0', 'FP32', [1, 4], 0))).replace(b'"data": 0', b'"data": ' + b'[' * DEEP + b'1' + b']' * DEEP))
case('json_nested_root_array', 'POST', f'{ADD}/infer', b'[' * DEEP + b']' * DEEP)
case('json_nested_objects', 'POST', f'{ADD}/infer', b'{"a":' * DEEP + b'1' + b'}' * DEEP)
case('json_nested_unclosed', 'POST', f'{ADD}/infer', b'{"inputs":' + b'[' * 10000)
case('json_nested_100k', 'POST', f'{ADD}/infer', b'{"inputs":' + b'[' * 100_000 + b']' * 100_000 + b'}')
case('json_nested_generate', 'POST', '/v2/models/gen/generate', b'{"a":' * DEEP + b'1' + b'}' * DEEP)
case('json_nested_index', 'POST', '/v2/repository/index', b'{"a":' * DEEP + b'1' + b'}' * DEEP)
case('json_nested_logging', 'POST', '/v2/logging', b'{"a":' * DEEP + b'1' + b'}' * DEEP)
case('json_input_not_an_object', 'POST', f'{ADD}/infer', {'inputs': [[]]})
case('json_input_empty_object', 'POST', f'{ADD}/infer', {'inputs': [{}]})
case('json_binary_size_null', 'POST', f'{ADD}/infer', with_input(0, data=None, parameters={'binary_data_size': None}))
case('json_unknown_model_bad_body', 'POST', '/v2/models/nope/infer', b'{bad')

# Version segments beyond int64 (a 5,000-digit one made triton-mini answer a plain-text 500)
V = '9' * 1000
case('version_beyond_int64', 'GET', f'{ADD}/versions/9223372036854775808')
case('version_int64_max', 'GET', f'{ADD}/versions/9223372036854775807')
case('version_20_digits_ready', 'GET', f'{ADD}/versions/{"9" * 20}/ready')
case('version_20_digits_config', 'GET', f'{ADD}/versions/{"9" * 20}/config')
case('version_20_digits_stats', 'GET', f'{ADD}/versions/{"9" * 20}/stats')
case('version_1000_digits_infer', 'POST', f'{ADD}/versions/{V}/infer', OK)
case('version_1000_digits_metadata', 'GET', f'{ADD}/versions/{V}')
case('version_1000_digits_generate', 'POST', f'/v2/models/gen/versions/{V}/generate', gen_body(text_input='a'))
case('version_1000_digits_wrong_method', 'GET', f'{ADD}/versions/{V}/infer')

# ---------------------------------------------------------------------------------------------------------
# Statistics (§10): stats_model is called only here, so the counts are known; timings are normalised away.

S = '/v2/models/stats_model'
def s_req(*rows): return ('POST', f'{S}/infer', infer(tensor('IN', 'FP32', [len(rows), 2], [v for r in rows for v in r])))
STATS_SETUP = (s_req((1, 2)), s_req((1, 2), (3, 4)), s_req((-1, 0)),
               ('POST', f'{S}/infer', infer(tensor('IN', 'INT32', [1, 2], [1, 2]))))
case('stats_model', 'GET', f'{S}/stats', setup=STATS_SETUP, normalize=('timings',))
case('stats_model_version', 'GET', f'{S}/versions/1/stats', normalize=('timings',))
case('gzip_response_stats', 'GET', '/v2/models/stats', normalize=('stats_shape',), headers={'Accept-Encoding': 'gzip'})
case('deflate_response_model_stats', 'GET', f'{ADD}/stats', normalize=('stats_shape',), headers={'Accept-Encoding': 'deflate'})
case('stats_all_models', 'GET', '/v2/models/stats', normalize=('stats_shape',),
     note='every model and version, with the keys each entry has (the counts depend on every other case)')
case('stats_versioned_all_versions', 'GET', '/v2/models/versioned/stats', normalize=('timings',))
case('stats_unknown_model', 'GET', '/v2/models/nope/stats')
case('stats_unknown_version', 'GET', f'{S}/versions/9/stats')
case('stats_unloaded_version', 'GET', '/v2/models/versioned/versions/1/stats')

# ---------------------------------------------------------------------------------------------------------
# Metrics (metrics-and-cli.md §1): family names, types and HELP; label sets; request counts; custom metrics.

M_SETUP = tuple(('POST', '/v2/models/metricmodel/infer', infer(tensor('X', 'FP32', [1], [x]))) for x in (0.5, 2.0, 50.0))
case('metrics_families', 'GET', '/metrics', compare='metrics:families')
case('metrics_labels', 'GET', '/metrics', compare='metrics:labels')
case('metrics_request_counts', 'GET', '/metrics', compare='metrics:counts=stats_model',
     note='stats_model only: 2 requests succeeded (batch 1 and 2), 1 raised, 1 was rejected')
case('metrics_request_counts_all_models', 'GET', '/metrics', compare='metrics:counts',
     note='every model, after all the cases above',
     xfail='cumulative counts after every case: the three intended differences above change what runs (ensemble and gen counts)')
case('metrics_custom', 'GET', '/metrics', compare='metrics:custom', setup=M_SETUP)
case('metrics_text_content_type', 'GET', '/metrics', compare='metrics:content_type')

# ---------------------------------------------------------------------------------------------------------
# Repository extension in `none` mode (§9)

case('index', 'POST', '/v2/repository/index')
case('index_ready_only', 'POST', '/v2/repository/index', {'ready': True})
case('index_not_ready', 'POST', '/v2/repository/index', {'ready': False})
case('load_in_none_mode', 'POST', '/v2/repository/models/add_sub/load')
case('unload_in_none_mode', 'POST', '/v2/repository/models/add_sub/unload')

# ---------------------------------------------------------------------------------------------------------
# Logging (§12), trace (§11) and shared memory (§13)

case('logging_get', 'GET', '/v2/logging')
case('logging_set_file', 'POST', '/v2/logging', {'log_file': '/tmp/x.log'})
case('logging_bad_level', 'POST', '/v2/logging', {'log_verbose_level': -1})
case('logging_bad_bool', 'POST', '/v2/logging', {'log_info': 'yes'})
case('logging_set_and_restore', 'POST', '/v2/logging', {'log_verbose_level': 0, 'log_info': True})
case('logging_empty_body', 'POST', '/v2/logging', b'')
case('logging_blank_body', 'POST', '/v2/logging', b'  ')
case('logging_null_values', 'POST', '/v2/logging', {'log_verbose_level': None, 'log_format': None, 'log_file': None, 'log_warning': None, 'log_info': True})
case('trace_setting', 'GET', '/v2/trace/setting')
case('trace_setting_model', 'GET', '/v2/models/add_sub/trace/setting')
case('trace_setting_empty_body', 'POST', '/v2/trace/setting', b'')
case('trace_setting_model_empty_body', 'POST', '/v2/models/add_sub/trace/setting', b' ')
# A '#' is part of the path for Triton (no fragment is cut off): no route matches, or the model name holds it
case('fragment_health', 'GET', '/v2/health/live#x')
case('fragment_model_metadata', 'GET', f'{ADD}#x')
case('fragment_infer', 'POST', f'{ADD}/infer#', OK)
case('trace_setting_bad_rate', 'POST', '/v2/trace/setting', {'trace_rate': '0'})
case('index_body_starts_with_nul', 'POST', '/v2/repository/index', b'\0{"ready": true}')   # rapidjson: a NUL ends the text
case('index_body_nul_after_json', 'POST', '/v2/repository/index', b'{"ready": true}\0xyz')
case('generate_key_with_nul', 'POST', '/v2/models/gen/generate', b'{"text_input": "hi", "\\u0000": 1}')   # looked up as ''
case('generate_key_with_nul_prefix', 'POST', '/v2/models/gen/generate', b'{"text_input": "hi", "max_tokens\\u0000x": 2}')
case('generate_body_array', 'POST', '/v2/models/gen/generate', b'["text_input"]')
case('load_parameters_null', 'POST', '/v2/repository/models/add_sub/load', b'{"parameters": null}')
# Shared memory without a shm object (regions that exist are compared in tests/test_shared_memory.py, which makes them)
SHM, CUDA = '/v2/systemsharedmemory', '/v2/cudasharedmemory'
case('shm_status', 'GET', f'{SHM}/status')
case('shm_status_unknown', 'GET', f'{SHM}/region/nope/status')
case('shm_status_post', 'POST', f'{SHM}/status')
case('shm_status_trailing_slash', 'GET', f'{SHM}/region/nope/status/')
case('shm_status_empty_name', 'GET', f'{SHM}//region//status')
case('shm_bare', 'GET', SHM)
case('shm_unregister_unknown', 'POST', f'{SHM}/region/nope/unregister')
case('shm_unregister_all', 'POST', f'{SHM}/unregister', b'{not json')
case('shm_unregister_get', 'GET', f'{SHM}/unregister')
case('shm_register_get', 'GET', f'{SHM}/region/r/register')
case('shm_register_no_name', 'POST', f'{SHM}/register', {'key': '/tm_conf_none', 'offset': 0, 'byte_size': 16})
case('shm_register_missing_object', 'POST', f'{SHM}/region/r/register', {'key': '/tm_conf_none', 'offset': 0, 'byte_size': 16})
case('shm_register_bad_key_path', 'POST', f'{SHM}/region/r/register', {'key': '/a/b', 'byte_size': 16})
case('shm_register_no_key', 'POST', f'{SHM}/region/r/register', {'offset': 0, 'byte_size': 16})
case('shm_register_no_byte_size', 'POST', f'{SHM}/region/r/register', {'key': '/tm_conf_none'})
case('shm_register_key_int', 'POST', f'{SHM}/region/r/register', {'key': 5, 'byte_size': 16})
case('shm_register_offset_str', 'POST', f'{SHM}/region/r/register', {'key': '/tm_conf_none', 'offset': '0', 'byte_size': 16})
case('shm_register_size_negative', 'POST', f'{SHM}/region/r/register', {'key': '/tm_conf_none', 'byte_size': -1})
case('shm_register_list', 'POST', f'{SHM}/region/r/register', [1])
case('shm_register_bad_json', 'POST', f'{SHM}/region/r/register', b'{')
case('shm_register_empty', 'POST', f'{SHM}/region/r/register', b'')
case('shm_status_after_failures', 'GET', f'{SHM}/status')
case('shm_infer', 'POST', f'{ADD}/infer',
     infer(A, tensor('INPUT1', 'FP32', [1, 4], shared_memory_region='nope', shared_memory_byte_size=16)))
case('shm_infer_region_int', 'POST', f'{ADD}/infer', infer(A, tensor('INPUT1', 'FP32', [1, 4], shared_memory_region=5)))
case('shm_infer_size_str', 'POST', f'{ADD}/infer',
     infer(A, tensor('INPUT1', 'FP32', [1, 4], shared_memory_region='nope', shared_memory_byte_size='16')))
case('shm_infer_offset_negative', 'POST', f'{ADD}/infer',
     infer(A, tensor('INPUT1', 'FP32', [1, 4], shared_memory_region='nope', shared_memory_byte_size=16, shared_memory_offset=-1)))
case('shm_infer_with_data', 'POST', f'{ADD}/infer',
     infer(A, tensor('INPUT1', 'FP32', [1, 4], [1, 2, 3, 4], shared_memory_region='nope', shared_memory_byte_size=16)))
case('shm_infer_offset_without_region', 'POST', f'{ADD}/infer',
     infer(A, tensor('INPUT1', 'FP32', [1, 4], [1, 2, 3, 4], shared_memory_offset=8, shared_memory_byte_size=16)))
case('shm_infer_output_unknown', 'POST', f'{ADD}/infer',
     {**infer(A, tensor('INPUT1', 'FP32', [1, 4], [1, 2, 3, 4])),
      'outputs': [{'name': 'OUTPUT0', 'parameters': {'shared_memory_region': 'nope', 'shared_memory_byte_size': 16}}]})
case('shm_infer_output_binary_unknown', 'POST', f'{ADD}/infer',
     {**infer(A, tensor('INPUT1', 'FP32', [1, 4], [1, 2, 3, 4])),
      'outputs': [{'name': 'OUTPUT0', 'parameters': {'shared_memory_region': 'nope', 'shared_memory_byte_size': 16, 'binary_data': True}}]})
case('shm_infer_output_classification_unknown', 'POST', f'{ADD}/infer',
     {**infer(A, tensor('INPUT1', 'FP32', [1, 4], [1, 2, 3, 4])),
      'outputs': [{'name': 'OUTPUT0', 'parameters': {'shared_memory_region': 'nope', 'shared_memory_byte_size': 16, 'classification': 1}}]})
# Triton's front end reads the requested outputs (an unknown region: 404) before its core checks an input's bytes
case('shm_output_unknown_before_input_size', 'POST', f'{ADD}/infer',
     **binary(infer(A, tensor('INPUT1', 'FP32', [1, 4], binary_data_size=12),
                    outputs=[{'name': 'OUTPUT0', 'parameters': {'shared_memory_region': 'nope', 'shared_memory_byte_size': 16}}]),
              f32(1, 2, 3)))
HANDLE = base64.b64encode(bytes(64)).decode()
case('cuda_shm_status', 'GET', f'{CUDA}/status')
case('cuda_shm_status_unknown', 'GET', f'{CUDA}/region/x/status')
case('cuda_shm_unregister', 'POST', f'{CUDA}/region/x/unregister')
case('cuda_shm_unregister_all', 'POST', f'{CUDA}/unregister')
case('cuda_shm_register_no_name', 'POST', f'{CUDA}/register', {'raw_handle': {'b64': HANDLE}, 'device_id': 0, 'byte_size': 16})
case('cuda_shm_register_empty', 'POST', f'{CUDA}/region/x/register', {})
case('cuda_shm_register_short_handle', 'POST', f'{CUDA}/region/x/register', {'raw_handle': {'b64': 'AAAA'}, 'device_id': 0, 'byte_size': 16})
case('cuda_shm_register_handle_str', 'POST', f'{CUDA}/region/x/register', {'raw_handle': HANDLE, 'device_id': 0, 'byte_size': 16})
case('cuda_shm_register_no_device', 'POST', f'{CUDA}/region/x/register', {'raw_handle': {'b64': HANDLE}, 'byte_size': 16})
case('cuda_shm_register_no_size', 'POST', f'{CUDA}/region/x/register', {'raw_handle': {'b64': HANDLE}, 'device_id': 0})
case('cuda_shm_register', 'POST', f'{CUDA}/region/x/register', {'raw_handle': {'b64': HANDLE}, 'device_id': 0, 'byte_size': 16})

# =========================================================================================================
# The explicit pair: model-control-mode explicit, nothing loaded at start. Order matters here.

def X(id, method, path, body=None, **kw): case(id, method, path, body, pair='explicit', **kw)

SIMPLE = infer(tensor('IN', 'FP32', [1, 2], [1, 2]))
X('explicit_index_nothing_loaded', 'POST', '/v2/repository/index')
X('explicit_ready_nothing_loaded', 'GET', '/v2/health/ready')
X('explicit_metadata_never_loaded', 'GET', '/v2/models/simple')
X('explicit_infer_never_loaded', 'POST', '/v2/models/simple/infer', SIMPLE)
X('explicit_load', 'POST', '/v2/repository/models/simple/load')
X('explicit_index_after_load', 'POST', '/v2/repository/index')
X('explicit_infer_after_load', 'POST', '/v2/models/simple/infer', SIMPLE)
X('explicit_load_again', 'POST', '/v2/repository/models/simple/load', {})
X('explicit_load_multi_version', 'POST', '/v2/repository/models/multi/load')
X('explicit_index_multi_version', 'POST', '/v2/repository/index')
X('explicit_metadata_multi_version', 'GET', '/v2/models/multi')
X('explicit_stats_multi_version', 'GET', '/v2/models/multi/stats', normalize=('timings',))
X('explicit_load_ensemble', 'POST', '/v2/repository/models/pipe/load')
X('explicit_infer_ensemble', 'POST', '/v2/models/pipe/infer', SIMPLE)
X('explicit_unload_composing', 'POST', '/v2/repository/models/simple/unload')
X('explicit_index_after_unload', 'POST', '/v2/repository/index', settle='simple')
X('explicit_ready_after_unload', 'GET', '/v2/models/simple/ready')
X('explicit_metadata_after_unload', 'GET', '/v2/models/simple')
X('explicit_infer_after_unload', 'POST', '/v2/models/simple/infer', SIMPLE)
X('explicit_ensemble_after_composing_unload', 'POST', '/v2/models/pipe/infer', SIMPLE)
X('explicit_reload_ensemble', 'POST', '/v2/repository/models/pipe/load', note='loading an ensemble loads its composing models')
X('explicit_index_after_ensemble_reload', 'POST', '/v2/repository/index')
X('explicit_infer_after_ensemble_reload', 'POST', '/v2/models/simple/infer', SIMPLE)
X('explicit_unload_ensemble', 'POST', '/v2/repository/models/pipe/unload')
X('explicit_index_after_ensemble_unload', 'POST', '/v2/repository/index', settle='pipe',
  note='composing models stay loaded')
X('explicit_unload_composing_again', 'POST', '/v2/repository/models/simple/unload')
X('explicit_unload_again', 'POST', '/v2/repository/models/simple/unload')
X('explicit_unload_unknown', 'POST', '/v2/repository/models/nope/unload')
X('explicit_load_unknown', 'POST', '/v2/repository/models/nope/load')
X('explicit_load_syntax_error', 'POST', '/v2/repository/models/bad_syntax/load')
X('explicit_load_init_raises', 'POST', '/v2/repository/models/init_raises/load')
X('explicit_load_no_version_dir', 'POST', '/v2/repository/models/no_version_dir/load')
X('explicit_load_ensemble_unknown_model', 'POST', '/v2/repository/models/ens_unknown_model/load')
X('explicit_index_after_failures', 'POST', '/v2/repository/index')
X('explicit_health_ready_after_failures', 'GET', '/v2/health/ready')

OVERRIDE = {'name': 'simple', 'backend': 'python', 'max_batch_size': 2,
            'input': [{'name': 'IN', 'data_type': 'TYPE_FP32', 'dims': [2]}],
            'output': [{'name': 'OUT', 'data_type': 'TYPE_FP32', 'dims': [2]}]}
X('explicit_load_config_override', 'POST', '/v2/repository/models/simple/load', {'parameters': {'config': json.dumps(OVERRIDE)}})
X('explicit_config_after_override', 'GET', '/v2/models/simple/config', normalize=('proto_maps',))
X('explicit_infer_batch_after_override', 'POST', '/v2/models/simple/infer', infer(tensor('IN', 'FP32', [3, 2], [1] * 6)))
X('explicit_load_config_not_string', 'POST', '/v2/repository/models/simple/load', {'parameters': {'config': OVERRIDE}})
X('explicit_load_config_malformed', 'POST', '/v2/repository/models/simple/load', {'parameters': {'config': '{"name": '}})
X('explicit_load_config_unknown_field', 'POST', '/v2/repository/models/simple/load',
  {'parameters': {'config': json.dumps(dict(OVERRIDE, no_such_field=1))}})

FRESH_PY = b'''import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([42], dtype=np.int32))]) for _ in requests]
'''
FRESH_CONFIG = json.dumps({'name': 'fresh', 'backend': 'python', 'max_batch_size': 0,
                           'input': [{'name': 'X', 'data_type': 'TYPE_INT32', 'dims': [1]}],
                           'output': [{'name': 'Y', 'data_type': 'TYPE_INT32', 'dims': [1]}]})
X('explicit_load_from_files', 'POST', '/v2/repository/models/fresh/load',
  {'parameters': {'config': FRESH_CONFIG, 'file:1/model.py': base64.b64encode(FRESH_PY).decode()}})
X('explicit_infer_loaded_from_files', 'POST', '/v2/models/fresh/infer', infer(tensor('X', 'INT32', [1], [0])))
X('explicit_load_files_without_config', 'POST', '/v2/repository/models/fresh2/load',
  {'parameters': {'file:1/model.py': base64.b64encode(FRESH_PY).decode()}})
X('explicit_load_parameters_not_object', 'POST', '/v2/repository/models/simple/load', {'parameters': 5})
X('explicit_load_malformed_body', 'POST', '/v2/repository/models/simple/load', '{"parameters": ')
X('explicit_unload_dependents', 'POST', '/v2/repository/models/multi/unload', {'parameters': {'unload_dependents': True}})
X('explicit_index_ready_only', 'POST', '/v2/repository/index', {'ready': True}, settle='multi')
X('explicit_load_sequence_model', 'POST', '/v2/repository/models/seqm/load')

# Found by bench/fuzz_repository_vs_triton.py. A config sent with a load request sticks: a later load without one
# reads config.pbtxt again only if the model's folder changed since (Triton's timestamps).
X('explicit_override_simple_again', 'POST', '/v2/repository/models/simple/load',
  {'parameters': {'config': json.dumps(dict(OVERRIDE, max_batch_size=3))}})
X('explicit_plain_load_keeps_override', 'POST', '/v2/repository/models/simple/load')
X('explicit_config_after_plain_load', 'GET', '/v2/models/simple/config', normalize=('proto_maps',))
X('explicit_load_unreadable_override', 'POST', '/v2/repository/models/simple/load', {'parameters': {'config': '{"name": '}})
X('explicit_config_after_unreadable_override', 'GET', '/v2/models/simple/config', normalize=('proto_maps',))
PIPE_STRING = {'name': 'pipe', 'platform': 'ensemble', 'max_batch_size': 4,
               'input': [{'name': 'IN', 'data_type': 'TYPE_STRING', 'dims': [2]}],
               'output': [{'name': 'OUT', 'data_type': 'TYPE_FP32', 'dims': [2]}],
               'ensemble_scheduling': {'step': [
                   {'model_name': 'simple', 'model_version': -1, 'input_map': {'IN': 'IN'}, 'output_map': {'OUT': 'mid'}},
                   {'model_name': 'simple', 'model_version': -1, 'input_map': {'IN': 'mid'}, 'output_map': {'OUT': 'OUT'}}]}}
X('explicit_load_ensemble_bad_override', 'POST', '/v2/repository/models/pipe/load', {'parameters': {'config': json.dumps(PIPE_STRING)}})
# A model loaded from files under the name of a repository folder is listed in the index (Triton walks the folders).
X('explicit_load_files_as_repository_model', 'POST', '/v2/repository/models/seqm/load',
  {'parameters': {'config': FRESH_CONFIG.replace('"fresh"', '"seqm"'), 'file:1/model.py': base64.b64encode(FRESH_PY).decode()}})
X('explicit_index_lists_files_model', 'POST', '/v2/repository/index')
# An ensemble unloaded because a composing model was comes back when that model is loaded again.
X('explicit_load_pipe_again', 'POST', '/v2/repository/models/pipe/load',
  {'parameters': {'config': json.dumps(dict(PIPE_STRING, max_batch_size=2, input=[{'name': 'IN', 'data_type': 'TYPE_FP32', 'dims': [2]}]))}})
X('explicit_unload_composing_under_pipe', 'POST', '/v2/repository/models/simple/unload')
X('explicit_index_pipe_went_with_it', 'POST', '/v2/repository/index', settle='simple')
X('explicit_load_composing_back', 'POST', '/v2/repository/models/simple/load')
X('explicit_index_pipe_came_back', 'POST', '/v2/repository/index', settle='pipe')

# Not sent (they hang real Triton 2.51, so there is nothing to compare with):
# * a non-decoupled Python model whose execute() returns None: the request never completes
#   (triton-mini answers 500 instead).
# * loading a Python model whose version directory has no model.py (`py_missing` in the spec's repo2):
#   the load never finishes.
