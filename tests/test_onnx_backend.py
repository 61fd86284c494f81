"""The ONNX Runtime backend on real ONNX models built with the onnx helper API (nbs/04b_onnx_backend.ipynb).

Outputs are compared with numpy. The real Triton oracle has no onnxruntime backend, so there is nothing to
compare against there: behaviour and messages follow triton-inference-server/onnxruntime_backend r24.10.
"""
import shutil, threading
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

onnx = pytest.importorskip('onnx')
from onnx import helper, numpy_helper as onnx_numpy_helper

from triton_mini.tensors import TritonError
from triton_mini.server import TritonServer
from triton_mini.config_parser import parse_config
from triton_mini.model_config_utils import autofill_config
from triton_mini.backend import InferenceRequest, InstanceArgs, batch_input_tensor
from triton_mini.onnx_backend import (ONNXRuntimeBackend, ONNXRuntimeInstance, linear_weights, make_add_sub_onnx,
                                      make_linear_onnx, make_onnx_model, save_onnx)

ROOT = Path(__file__).resolve().parents[1]

ADD_SUB = '''name: "{name}" platform: "onnxruntime_onnx" max_batch_size: 8
input [ {{ name: "INPUT0" data_type: {t} dims: [ {d} ] }}, {{ name: "INPUT1" data_type: {t} dims: [ {d} ] }} ]
output [ {{ name: "OUTPUT0" data_type: {t} dims: [ {d} ] }}, {{ name: "OUTPUT1" data_type: {t} dims: [ {d} ] }} ]
instance_group [ {{ count: 1 kind: KIND_CPU }} ]'''

def add_sub_config(name='add_sub', t='TYPE_FP32', d='4', extra=''): return ADD_SUB.format(name=name, t=t, d=d) + '\n' + extra

def write_model(repo:Path, name:str, config:str|None, build, version=1) -> Path:
    "<repo>/<name>/config.pbtxt (unless None) and <repo>/<name>/<version>/model.onnx written by build(path)."
    d = repo / name
    build(d / str(version) / 'model.onnx')
    if config is not None: (d / 'config.pbtxt').write_text(config)
    return d

def load(model_dir:Path, config_text:str|None=None, backend=None) -> ONNXRuntimeInstance:
    "One instance, with the config completed the way the server does (defaults, auto-complete, defaults)."
    backend = backend or ONNXRuntimeBackend()
    name = model_dir.name
    fill = lambda c: autofill_config(c, name, backend='onnxruntime', default_model_filename='model.onnx')
    cfg = fill(backend.auto_complete_config(fill(parse_config(config_text or '')), model_dir))
    return backend.create_instance(InstanceArgs(name, 1, model_dir, cfg, f'{name}_0'))

def request(model, **inputs): return InferenceRequest(model, {k: np.asarray(v) for k, v in inputs.items()})

# ---------------------------------------------------------------------------------------------------------------
# The linear projection (seed 000) and add_sub, compared with numpy

def test_bundled_linear_model_is_what_make_linear_onnx_writes(tmp_path):
    fresh = make_linear_onnx(tmp_path / 'model.onnx')
    assert (ROOT / 'model_repository/linear_onnx/1/model.onnx').read_bytes() == fresh.read_bytes()

@pytest.mark.parametrize('n_in,n_out,seed', [(4, 2, 0), (16, 3, 5), (1, 1, 2)])
def test_linear_matches_numpy(tmp_path, n_in, n_out, seed):
    d = write_model(tmp_path, 'lin', None, lambda p: make_linear_onnx(p, n_in, n_out, seed))
    inst = load(d)
    x = np.random.default_rng(seed).normal(size=(3, n_in)).astype(np.float32)
    w, b = linear_weights(n_in, n_out, seed)
    (resp,) = inst.execute([request('lin', INPUT0=x)])
    np.testing.assert_allclose(resp['OUTPUT0'], x @ w + b, rtol=1e-5, atol=1e-6)

@pytest.mark.parametrize('dtype,config_type', [(np.float32, 'TYPE_FP32'), (np.float64, 'TYPE_FP64'), (np.float16, 'TYPE_FP16'),
                                               (np.int32, 'TYPE_INT32'), (np.int64, 'TYPE_INT64'), (np.int8, 'TYPE_INT8'),
                                               (np.uint8, 'TYPE_UINT8'), (np.uint32, 'TYPE_UINT32')])
def test_add_sub_every_numeric_type(tmp_path, dtype, config_type):
    d = write_model(tmp_path, 'add_sub', None, lambda p: make_add_sub_onnx(p, dtype))
    inst = load(d, add_sub_config(t=config_type))
    rng = np.random.default_rng(0)
    a, b = (rng.integers(0, 50, size=(2, 4)).astype(dtype) for _ in range(2))
    (resp,) = inst.execute([request('add_sub', INPUT0=a, INPUT1=b)])
    assert resp['OUTPUT0'].dtype == dtype
    np.testing.assert_array_equal(resp['OUTPUT0'], a + b)
    np.testing.assert_array_equal(resp['OUTPUT1'], a - b)

# ---------------------------------------------------------------------------------------------------------------
# Concatenation and splitting across requests

@pytest.fixture(scope='module')
def add_sub_instance(tmp_path_factory):
    repo = tmp_path_factory.mktemp('repo')
    d = write_model(repo, 'add_sub', None, lambda p: make_add_sub_onnx(p, np.float32, ('batch', 'n')))
    return load(d, add_sub_config(d='-1').replace('max_batch_size: 8', 'max_batch_size: 64'))

@settings(max_examples=40, deadline=None)
@given(sizes=st.lists(st.integers(0, 6), min_size=1, max_size=8), width=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_a_batch_of_requests_is_one_run_and_each_gets_its_own_rows(add_sub_instance, sizes, width, seed):
    rng = np.random.default_rng(seed)
    xs = [rng.normal(size=(n, width)).astype(np.float32) for n in sizes]
    ys = [rng.normal(size=(n, width)).astype(np.float32) for n in sizes]
    calls = []
    run = add_sub_instance._run
    add_sub_instance._run = lambda names, feeds: calls.append(feeds['INPUT0'].shape) or run(names, feeds)
    try: responses = add_sub_instance.execute([request('add_sub', INPUT0=x, INPUT1=y) for x, y in zip(xs, ys)])
    finally: del add_sub_instance._run
    assert calls == [(sum(sizes), width)]
    for x, y, r in zip(xs, ys, responses, strict=True):
        assert r.error is None
        np.testing.assert_array_equal(r['OUTPUT0'], x + y)
        np.testing.assert_array_equal(r['OUTPUT1'], x - y)

def test_requested_outputs_per_request(add_sub_instance):
    x = np.ones((1, 3), np.float32)
    reqs = [InferenceRequest('add_sub', {'INPUT0': x, 'INPUT1': x}, requested_outputs=['OUTPUT1']),
            InferenceRequest('add_sub', {'INPUT0': x, 'INPUT1': x}, requested_outputs=[]),
            InferenceRequest('add_sub', {'INPUT0': x, 'INPUT1': x})]
    out = add_sub_instance.execute(reqs)
    assert [list(r.outputs) for r in out] == [['OUTPUT1'], [], ['OUTPUT0', 'OUTPUT1']]

def test_only_needed_outputs_are_computed(add_sub_instance):
    x = np.ones((1, 3), np.float32)
    seen = []
    run = add_sub_instance._run
    add_sub_instance._run = lambda names, feeds: seen.append(names) or run(names, feeds)
    try: add_sub_instance.execute([InferenceRequest('add_sub', {'INPUT0': x, 'INPUT1': x}, requested_outputs=['OUTPUT1'])])
    finally: del add_sub_instance._run
    assert seen == [['OUTPUT1']]

def test_timing_and_failed_flag(add_sub_instance):
    x = np.ones((2, 3), np.float32)
    add_sub_instance.execute([request('add_sub', INPUT0=x, INPUT1=x)])
    assert add_sub_instance.failed is False and len(add_sub_instance.timing) == 3 and add_sub_instance.timing[1] > 0
    out = add_sub_instance.execute([request('add_sub', INPUT0=x, INPUT1=np.ones((2, 2), np.float32))])
    assert add_sub_instance.failed is True
    assert out[0].error.code == 'INTERNAL' and out[0].error.message.startswith('onnx runtime error ')

def test_batch_larger_than_max_batch_size_fails_as_a_whole(add_sub_instance):
    x = np.ones((40, 3), np.float32)
    out = add_sub_instance.execute([request('add_sub', INPUT0=x, INPUT1=x)] * 2)
    assert [r.error.message for r in out] == ["batch size 80 for 'add_sub_0', max allowed is 64"] * 2
    assert add_sub_instance.failed

def test_incompatible_shapes_in_one_batch_are_reported(add_sub_instance):
    a, b = np.ones((1, 3), np.float32), np.ones((1, 2), np.float32)
    out = add_sub_instance.execute([request('add_sub', INPUT0=a, INPUT1=a), request('add_sub', INPUT0=b, INPUT1=b)])
    assert "the requests of one batch must have the same shape apart from the batch dimension, got [1,3] and [1,2]" in out[0].error.message

def test_non_batching_model_runs_requests_whole(tmp_path):
    d = write_model(tmp_path, 'fixed', None, lambda p: make_add_sub_onnx(p, np.int64, (2, 3)))
    inst = load(d)
    assert inst.config.max_batch_size == 0
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    (r,) = inst.execute([request('fixed', INPUT0=a, INPUT1=a)])
    np.testing.assert_array_equal(r['OUTPUT1'], np.zeros((2, 3), np.int64))
    out = inst.execute([request('fixed', INPUT0=a, INPUT1=a)] * 2)
    assert out[0].error.message == "batch size 2 for 'fixed_0', max allowed is 0"

# ---------------------------------------------------------------------------------------------------------------
# BYTES (ONNX strings), reshape, scalars

def strings_model(path):
    "OUT = the strings of each row followed by the same strings (Concat on axis 1)."
    save_onnx(make_onnx_model([helper.make_node('Concat', ['TEXT', 'TEXT'], ['TWICE'], axis=1)],
                              [('TEXT', object, ['batch', 'n'])], [('TWICE', object, ['batch', 'm'])]), path)

def test_strings_round_trip_as_bytes_and_batch(tmp_path):
    inst = load(write_model(tmp_path, 'twice', None, strings_model))
    words = [np.array([['héllo'.encode(), b'']], dtype=object), np.array([[b'a', b'b'], [b'c', b'd']], dtype=object)]
    out = inst.execute([InferenceRequest('twice', {'TEXT': w}) for w in words])
    for w, r in zip(words, out, strict=True):
        assert r['TWICE'].dtype == object and r['TWICE'].tolist() == np.concatenate([w, w], axis=1).tolist()

def test_non_utf8_string_fails_only_its_request(tmp_path):
    inst = load(write_model(tmp_path, 'twice', None, strings_model))
    out = inst.execute([InferenceRequest('twice', {'TEXT': np.array([[b'\xff']], dtype=object)}),
                        InferenceRequest('twice', {'TEXT': np.array([[b'ok']], dtype=object)})])
    assert out[0].error.message == "input 'TEXT': ONNX Runtime's Python API only accepts UTF-8 strings"
    assert out[1]['TWICE'].tolist() == [[b'ok', b'ok']] and not inst.failed

def test_batched_scalar_gets_dims_1_and_a_reshape(tmp_path):
    "An ONNX input of shape [-1] (one scalar per batch item) is completed as dims [1] + reshape [] and served so."
    def neg(path):
        save_onnx(make_onnx_model([helper.make_node('Neg', ['X'], ['Y'])], [('X', np.float32, ['b'])], [('Y', np.float32, ['b'])]), path)
    inst = load(write_model(tmp_path, 'neg', None, neg))
    assert [(i.dims, i.reshape.shape) for i in inst.config.input] == [([1], [])]
    # the server core applies the reshape before the backend sees the request: [2, 1] arrives as [2]
    (r,) = inst.execute([request('neg', X=np.array([1.5, 2.0], np.float32))])
    np.testing.assert_array_equal(r['Y'], np.array([[-1.5], [-2.0]], np.float32))

def test_model_file_in_a_directory_and_other_filename(tmp_path):
    d = tmp_path / 'lin'
    make_linear_onnx(d / '1' / 'model.onnx' / 'model.onnx')        # <version>/model.onnx/ is a directory
    x = np.ones((1, 4), np.float32)
    w, b = linear_weights()
    np.testing.assert_allclose(load(d).execute([request('lin', INPUT0=x)])[0]['OUTPUT0'], x @ w + b)
    make_linear_onnx(tmp_path / 'lin2' / '1' / 'weights.onnx')
    inst = load(tmp_path / 'lin2', 'default_model_filename: "weights.onnx"')
    np.testing.assert_allclose(inst.execute([request('lin2', INPUT0=x)])[0]['OUTPUT0'], x @ w + b)

# ---------------------------------------------------------------------------------------------------------------
# Auto-complete

def test_auto_complete_fills_everything_from_the_model(tmp_path):
    inst = load(write_model(tmp_path, 'add_sub', None, make_add_sub_onnx))
    cfg = inst.config
    assert (cfg.max_batch_size, cfg.dynamic_batching.preferred_batch_size) == (4, [4])
    assert [(i.name, i.data_type, i.dims) for i in cfg.input] == [('INPUT0', 'TYPE_FP32', [4]), ('INPUT1', 'TYPE_FP32', [4])]
    assert [(o.name, o.data_type, o.dims) for o in cfg.output] == [('OUTPUT0', 'TYPE_FP32', [4]), ('OUTPUT1', 'TYPE_FP32', [4])]
    assert [(g.kind, g.count) for g in cfg.instance_group] == [('KIND_CPU', 2)]   # Triton's default for onnxruntime on CPU

def test_auto_complete_default_max_batch_size_is_configurable(tmp_path):
    inst = load(write_model(tmp_path, 'add_sub', None, make_add_sub_onnx), backend=ONNXRuntimeBackend(default_max_batch_size=16))
    assert (inst.config.max_batch_size, inst.config.dynamic_batching.preferred_batch_size) == (16, [16])
    inst = load(tmp_path / 'add_sub', backend=ONNXRuntimeBackend(default_max_batch_size=1))
    assert (inst.config.max_batch_size, inst.config.dynamic_batching) == (1, None)

def test_auto_complete_keeps_what_the_config_says(tmp_path):
    d = write_model(tmp_path, 'add_sub', None, make_add_sub_onnx)
    kept = load(d, 'max_batch_size: 2 dynamic_batching { max_queue_delay_microseconds: 7 }').config
    assert (kept.max_batch_size, kept.dynamic_batching.max_queue_delay_microseconds, kept.dynamic_batching.preferred_batch_size) == (2, 7, [2])
    partial = load(d, 'input [ { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }, { name: "INPUT0" data_type: TYPE_FP32 dims: [ 4 ] } ]')
    assert [i.name for i in partial.config.input] == ['INPUT1', 'INPUT0'] and [o.name for o in partial.config.output] == ['OUTPUT0', 'OUTPUT1']

def test_auto_complete_skipped_when_inputs_and_outputs_given(tmp_path):
    "Then not even max_batch_size is completed, and a batch-dimension model no longer matches its dims."
    d = write_model(tmp_path, 'add_sub', None, make_add_sub_onnx)
    with pytest.raises(TritonError, match=r"tensor 'INPUT0': the model expects 2 dimensions \(shape \[-1,4\]\) but the model configuration specifies 1 dimensions \(shape \[4\]\)"):
        load(d, add_sub_config().replace('max_batch_size: 8', ''))

def test_auto_complete_of_a_model_that_cannot_batch(tmp_path):
    d = write_model(tmp_path, 'fixed', None, lambda p: make_add_sub_onnx(p, np.float32, (2, 3)))
    assert (load(d).config.max_batch_size, load(d).config.input[0].dims) == (0, [2, 3])
    with pytest.raises(TritonError, match="autofill failed for model 'fixed': model does not support batching while non-zero max_batch_size is specified"):
        load(d, 'max_batch_size: 4')

# ---------------------------------------------------------------------------------------------------------------
# Load-time errors (the config against the session)

MISMATCHES = [
    (lambda c: c.replace(', { name: "INPUT1" data_type: TYPE_FP32 dims: [ 4 ] }', ''),
     "unable to load model 'add_sub', configuration expects 1 inputs, model provides 2"),
    (lambda c: c.replace('"INPUT1"', '"IN1"'), "unexpected inference input 'IN1', allowed inputs are: INPUT0, INPUT1"),
    (lambda c: c.replace('"OUTPUT0"', '"OUT0"'), "unexpected inference output 'OUT0', allowed outputs are: OUTPUT0, OUTPUT1"),
    (lambda c: c.replace('TYPE_FP32', 'TYPE_FP16', 1),
     "unable to load model 'add_sub', configuration expects datatype TYPE_FP16 for input 'INPUT0', model provides TYPE_FP32"),
    (lambda c: c[::-1].replace('TYPE_FP32'[::-1], 'TYPE_STRING'[::-1], 1)[::-1],
     "unable to load model 'add_sub', configuration expects datatype TYPE_STRING for output 'OUTPUT1', model provides TYPE_FP32"),
    (lambda c: c.replace('TYPE_FP32', 'TYPE_BF16', 1), "unsupported datatype TYPE_BF16 for input 'INPUT0' for model 'add_sub'"),
    (lambda c: c.replace('dims: [ 4 ] }, { name: "INPUT1"', 'dims: [ 2, 2 ] }, { name: "INPUT1"'),
     "model 'add_sub', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,4]) but the model configuration specifies 3 dimensions "
     "(an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [-1,2,2])"),
    (lambda c: c.replace('dims: [ 4 ] }, { name: "OUTPUT1"', 'dims: [ -1 ] }, { name: "OUTPUT1"'),
     "model 'add_sub', tensor 'OUTPUT0': the model expects 2 dimensions (shape [-1,4]) but the model configuration specifies 2 dimensions "
     "(an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [-1,-1])"),
    (lambda c: c.replace('max_batch_size: 8', 'max_batch_size: 0').replace('[ 4 ]', '[ -1, 4 ]').replace('dims: [ -1, 4 ] }, { name: "INPUT1"', 'dims: [ -1, 4 ] optional: true }, { name: "INPUT1"'),
     "unable to load model 'add_sub', configuration expects 1 inputs, model provides 2"),
    (lambda c: c + ' parameters { key: "execution_mode" value: { string_value: "3" } }',
     "Invalid configuration value provided. Expected values for  execution_mode are 0 or 1 but got 3 ."),
    (lambda c: c + ' parameters { key: "intra_op_thread_count" value: { string_value: "many" } }', "failed to convert 'many' to integral number"),
    (lambda c: c + ' parameters { key: "enable_mem_pattern" value: { string_value: "yes" } }', "failed to convert 'yes' to boolean"),
    (lambda c: c + ' optimization { execution_accelerators { cpu_execution_accelerator [ { name: "openvino" } ] } }',
     "unknown Execution Accelerator 'openvino' is requested"),
]

@pytest.mark.parametrize('edit,message', MISMATCHES)
def test_config_mismatch_is_refused_with_tritons_words(tmp_path, edit, message):
    d = write_model(tmp_path, 'add_sub', None, make_add_sub_onnx)
    with pytest.raises(TritonError) as e: load(d, edit(add_sub_config()))
    assert e.value.message == message

def test_scalar_model_tensor_needs_dims_of_ones(tmp_path):
    def scalar(path):
        save_onnx(make_onnx_model([helper.make_node('Neg', ['X'], ['Y'])], [('X', np.float32, [])], [('Y', np.float32, [])]), path)
    d = write_model(tmp_path, 'scalar', None, scalar)
    inst = load(d, 'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]')
    (r,) = inst.execute([request('scalar', X=np.array([3.0], np.float32))])
    assert r['Y'].tolist() == [-3.0]                  # the response has the configured dims
    with pytest.raises(TritonError, match=r"scalar tensor 'X', should only provide 1 in the model configuration when the model doesn't support batching. Model configuration provided: \[2\]."):
        load(d, 'input [ { name: "X" data_type: TYPE_FP32 dims: [ 2 ] } ] output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]')

def test_missing_and_broken_model_files(tmp_path):
    d = write_model(tmp_path, 'add_sub', None, make_add_sub_onnx)
    shutil.rmtree(d / '1')
    with pytest.raises(TritonError) as e: load(d, add_sub_config())
    assert (e.value.code, e.value.message) == ('UNAVAILABLE', f"unable to find '{d / '1' / 'model.onnx'}' for model instance 'add_sub'")
    (d / '1').mkdir(); (d / '1' / 'model.onnx').write_bytes(b'\x08garbage')
    with pytest.raises(TritonError) as e: load(d, add_sub_config())
    assert e.value.code == 'INTERNAL' and e.value.message.startswith('onnx runtime error ')

# ---------------------------------------------------------------------------------------------------------------
# Ragged batching: a ragged input concatenated flat, batch inputs computed from the batch, a scattered batch output

RAGGED = '''name: "ragged" platform: "onnxruntime_onnx" max_batch_size: 8
input [ { name: "VALUES" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true } ]
batch_input [ { kind: KIND target_name: "B" data_type: TYPE_FP32 source_input: "VALUES" } ]
output [ { name: "DOUBLED" data_type: TYPE_FP32 dims: [ -1 ] } ]
batch_output [ { target_name: "DOUBLED" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "VALUES" } ]'''

def ragged_onnx(path, b_shape=('m',), values_shape=('total',)):
    "DOUBLED = VALUES + VALUES (flat); the batch input B comes back as BOUT, unscattered, for the test to read."
    nodes = [helper.make_node('Add', ['VALUES', 'VALUES'], ['DOUBLED']), helper.make_node('Identity', ['B'], ['BOUT'])]
    return save_onnx(make_onnx_model(nodes, [('VALUES', np.float32, values_shape), ('B', np.float32, b_shape)],
                                     [('DOUBLED', np.float32, values_shape), ('BOUT', np.float32, b_shape)]), path)

# requests of VALUES [1, 2], [1, 4], [1, 1], [1, 3] (as in Triton's L0_batch_input), and what B is for each kind
BATCH_INPUT_KINDS = {
    'BATCH_ELEMENT_COUNT': [2, 4, 1, 3],
    'BATCH_ACCUMULATED_ELEMENT_COUNT': [2, 6, 7, 10],
    'BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO': [0, 2, 6, 7, 10],
    'BATCH_MAX_ELEMENT_COUNT_AS_SHAPE': [0, 0, 0, 0],            # only the shape, [max element count], says something
    'BATCH_ITEM_SHAPE': [[2], [4], [1], [3]],                    # [batch size, rank - 1]
    'BATCH_ITEM_SHAPE_FLATTEN': [2, 4, 1, 3],
}

@pytest.mark.parametrize('kind', BATCH_INPUT_KINDS)
def test_each_batch_input_kind_reaches_the_model_and_the_ragged_input_runs_flat(tmp_path, kind):
    d = write_model(tmp_path, 'ragged', None, lambda p: ragged_onnx(p, ('m', 1) if kind == 'BATCH_ITEM_SHAPE' else ('m',)))
    inst = load(d, RAGGED.replace('KIND', kind))
    reqs = [request('ragged', VALUES=np.full((1, n), n, np.float32)) for n in (2, 4, 1, 3)]
    feeds, sizes, errors = inst._gather(reqs)
    assert feeds['VALUES'].tolist() == [2, 2, 4, 4, 4, 4, 1, 3, 3, 3] and sizes == [1, 1, 1, 1] and not errors
    assert feeds['B'].dtype == np.float32 and feeds['B'].tolist() == BATCH_INPUT_KINDS[kind]
    responses = inst.execute(reqs)
    assert [r.error for r in responses] == [None] * 4
    assert [r['DOUBLED'].tolist() for r in responses] == [[[2 * n] * n] for n in (2, 4, 1, 3)]

def test_batch_input_tensor_int32_and_multi_row_requests():
    assert batch_input_tensor('BATCH_ELEMENT_COUNT', [(1, 2), (2, 3)]).dtype == np.int32
    assert batch_input_tensor('BATCH_ITEM_SHAPE', [(2, 1, 2), (1, 1, 2), (1, 2, 2)]).tolist() == [[1, 2], [1, 2], [1, 2], [2, 2]]
    assert batch_input_tensor('BATCH_ITEM_SHAPE_FLATTEN', [(1, 4, 1), (1, 1, 2)]).tolist() == [4, 1, 1, 2]
    assert batch_input_tensor('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', [(1, 2), (2, 3)]).shape == (6,)

def test_batch_output_scatters_with_each_requests_input_shape(tmp_path):
    d = write_model(tmp_path, 'ragged', None, ragged_onnx)
    inst = load(d, RAGGED.replace('KIND', 'BATCH_ELEMENT_COUNT'))
    reqs = [request('ragged', VALUES=np.arange(6, dtype=np.float32).reshape(2, 3)), request('ragged', VALUES=[[7.0]])]
    out = inst.execute(reqs)
    assert [o['DOUBLED'].shape for o in out] == [(2, 3), (1, 1)]
    assert out[0]['DOUBLED'].tolist() == [[0, 2, 4], [6, 8, 10]] and out[1]['DOUBLED'].tolist() == [[14]]

def test_a_batch_input_the_model_does_not_take_fails_the_load_with_the_count(tmp_path):
    d = write_model(tmp_path, 'add_sub', None, make_add_sub_onnx)
    extra = 'batch_input [ { kind: BATCH_ELEMENT_COUNT target_name: "N" data_type: TYPE_INT32 source_input: "INPUT0" } ]'
    with pytest.raises(TritonError) as e: load(d, add_sub_config(extra=extra))
    assert (e.value.code, e.value.message) == ('INVALID_ARG', "unable to load model 'add_sub', configuration expects 3 inputs, model provides 2")

def test_a_ragged_input_must_be_flat_in_the_model(tmp_path):
    d = write_model(tmp_path, 'add_sub', None, make_add_sub_onnx)
    with pytest.raises(TritonError) as e:
        load(d, add_sub_config().replace('dims: [ 4 ] }, { name: "INPUT1"', 'dims: [ 4 ] allow_ragged_batch: true }, { name: "INPUT1"'))
    assert (e.value.code, e.value.message) == ('INVALID_ARG', "unable to load model 'add_sub', configuration expects model provides "
                                               "input with shape [-1]  for ragged input 'INPUT0', model provides [-1,4]")

def test_a_ragged_input_cannot_be_optional(tmp_path):
    "An optional input is an initializer the model lets requests override; ragged, it is refused (max_batch_size 0)."
    def build(p):
        w = onnx_numpy_helper.from_array(np.zeros(3, np.float32), 'W')
        return save_onnx(make_onnx_model([helper.make_node('Add', ['X', 'W'], ['Y'])], [('X', np.float32, [3]), ('W', np.float32, [3])],
                                         [('Y', np.float32, [3])], [w]), p)
    d = write_model(tmp_path, 'opt', None, build)
    config = '''name: "opt" platform: "onnxruntime_onnx" max_batch_size: 0
    input [ { name: "X" data_type: TYPE_FP32 dims: [ 3 ] }, { name: "W" data_type: TYPE_FP32 dims: [ 3 ] optional: true allow_ragged_batch: true } ]
    output [ { name: "Y" data_type: TYPE_FP32 dims: [ 3 ] } ]'''
    with pytest.raises(TritonError) as e: load(d, config)
    assert e.value.message == ("unable to load model 'opt', configuration expects model provides input with shape [-1] for "
                               "ragged input 'W', which is not supported for optional input")

def test_a_batch_output_keeps_its_datatype_check(tmp_path):
    d = write_model(tmp_path, 'ragged', None, ragged_onnx)
    with pytest.raises(TritonError, match="configuration expects datatype TYPE_INT32 for output 'DOUBLED', model provides TYPE_FP32"):
        load(d, RAGGED.replace('KIND', 'BATCH_ELEMENT_COUNT').replace('name: "DOUBLED" data_type: TYPE_FP32', 'name: "DOUBLED" data_type: TYPE_INT32'))

def test_thread_parameters_reach_the_session(tmp_path):
    d = write_model(tmp_path, 'add_sub', None, make_add_sub_onnx)
    extra = ' '.join(f'parameters {{ key: "{k}" value: {{ string_value: "{v}" }} }}'
                     for k, v in [('intra_op_thread_count', 1), ('inter_op_thread_count', 2), ('execution_mode', 1)])
    opts = load(d, add_sub_config(extra=extra)).session.get_session_options()
    assert (opts.intra_op_num_threads, opts.inter_op_num_threads, opts.execution_mode.name) == (1, 2, 'ORT_PARALLEL')

# ---------------------------------------------------------------------------------------------------------------
# Through the server

server_mod = pytest.importorskip('triton_mini.server')
TritonServer = server_mod.TritonServer

def test_bundled_linear_onnx_through_the_server():
    with TritonServer(ROOT / 'model_repository', model_control_mode='explicit', load_models=['linear_onnx']) as server:
        x = np.arange(12, dtype=np.float32).reshape(3, 4)
        resp = server.infer('linear_onnx', {'INPUT0': x})
        w, b = linear_weights()
        np.testing.assert_allclose(resp['OUTPUT0'], x @ w + b)
        cfg = server.model_config('linear_onnx')
        assert (cfg.backend, cfg.max_batch_size, cfg.parameters['intra_op_thread_count'].string_value) == ('onnxruntime', 8, '1')

@pytest.fixture
def repo(tmp_path):
    write_model(tmp_path, 'add_sub', add_sub_config(extra='dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 5000000 }'),
                make_add_sub_onnx)
    write_model(tmp_path, 'auto_add_sub', None, make_add_sub_onnx)
    write_model(tmp_path, 'twice', None, strings_model)
    write_model(tmp_path, 'any_len', add_sub_config('any_len', d='-1'), lambda p: make_add_sub_onnx(p, np.float32, ('batch', 'n')))
    write_model(tmp_path, 'wrong_type', add_sub_config('wrong_type', t='TYPE_INT32'), make_add_sub_onnx)
    (tmp_path / 'no_file' / '1').mkdir(parents=True)
    (tmp_path / 'no_file' / 'config.pbtxt').write_text(add_sub_config('no_file'))
    return tmp_path

def test_dynamic_batching_runs_concurrent_requests_together(repo):
    with TritonServer(repo, model_control_mode='explicit', load_models=['add_sub']) as server:
        n = 8
        barrier, results = threading.Barrier(n), [None] * n
        def call(i):
            x = np.full((1, 4), i, np.float32)
            barrier.wait()
            results[i] = server.infer('add_sub', {'INPUT0': x, 'INPUT1': np.ones_like(x)})
        threads = [threading.Thread(target=call, args=(i,)) for i in range(n)]
        for t in threads: t.start()
        for t in threads: t.join(30)
        for i, r in enumerate(results):
            np.testing.assert_array_equal(r['OUTPUT0'], np.full((1, 4), i + 1, np.float32))
            np.testing.assert_array_equal(r['OUTPUT1'], np.full((1, 4), i - 1, np.float32))
        stats = server.statistics('add_sub')['model_stats'][0]
        assert (stats['inference_count'], stats['execution_count']) == (8, 2)     # preferred size 4: two runs of 4
        assert [b['batch_size'] for b in stats['batch_stats']] == [4]
        assert stats['inference_stats']['compute_infer']['count'] == 8 and stats['inference_stats']['compute_infer']['ns'] > 0

def test_auto_completed_model_through_the_server(repo):
    with TritonServer(repo, model_control_mode='explicit', load_models=['auto_add_sub']) as server:
        cfg = server.model_config('auto_add_sub')
        assert (cfg.max_batch_size, cfg.dynamic_batching.preferred_batch_size, [i.dims for i in cfg.input]) == (4, [4], [[4], [4]])
        meta = server.model_metadata('auto_add_sub')
        assert [(t['name'], t['datatype'], t['shape']) for t in meta['inputs']] == [('INPUT0', 'FP32', [-1, 4]), ('INPUT1', 'FP32', [-1, 4])]
        x = np.arange(8, dtype=np.float32).reshape(2, 4)
        resps = server.infer_batch('auto_add_sub', [{'INPUT0': x, 'INPUT1': x}, {'INPUT0': x[:1], 'INPUT1': -x[:1]}])
        np.testing.assert_array_equal(resps[0]['OUTPUT0'], 2 * x)
        np.testing.assert_array_equal(resps[1]['OUTPUT1'], 2 * x[:1])

def test_strings_through_the_server(repo):
    with TritonServer(repo, model_control_mode='explicit', load_models=['twice']) as server:
        resp = server.infer('twice', {'TEXT': np.array([['tri', 'tön']])}, outputs=['TWICE'])
        assert resp['TWICE'].tolist() == [[b'tri', 'tön'.encode(), b'tri', 'tön'.encode()]]

def test_failed_execution_is_an_error_response_and_a_failure_statistic(repo):
    with TritonServer(repo, model_control_mode='explicit', load_models=['any_len']) as server:
        with pytest.raises(TritonError) as e:
            server.infer('any_len', {'INPUT0': np.zeros((1, 3), np.float32), 'INPUT1': np.zeros((1, 4), np.float32)})
        assert e.value.code == 'INTERNAL' and e.value.message.startswith('onnx runtime error 1: Non-zero status code returned while running')
        stats = server.statistics('any_len')['model_stats'][0]['inference_stats']
        assert (stats['success']['count'], stats['fail']['count']) == (0, 1)
        ok = server.infer('any_len', {'INPUT0': np.ones((1, 3), np.float32), 'INPUT1': np.ones((1, 3), np.float32)})
        np.testing.assert_array_equal(ok['OUTPUT0'], np.full((1, 3), 2, np.float32))

def test_load_failures_in_the_repository_index(repo):
    with TritonServer(repo, model_control_mode='explicit') as server:
        for name in ('wrong_type', 'no_file'):
            with pytest.raises(TritonError): server.load_model(name)
        index = {m['name']: m for m in server.repository_index()}
        assert index['wrong_type']['state'] == 'UNAVAILABLE'
        assert index['wrong_type']['reason'] == ("Invalid argument: unable to load model 'wrong_type', configuration expects datatype "
                                                 "TYPE_INT32 for input 'INPUT0', model provides TYPE_FP32")
        assert index['no_file']['reason'] == f"Unavailable: unable to find '{repo / 'no_file' / '1' / 'model.onnx'}' for model instance 'no_file'"

def test_real_tritonclient_over_http(repo, mini):
    "The unchanged tritonclient talks to an ONNX model over the KServe v2 HTTP protocol."
    httpclient = pytest.importorskip('tritonclient.http')
    port = mini(repo, metrics=False, model_control_mode='explicit', load_models=['auto_add_sub', 'twice']).http_port
    client = httpclient.InferenceServerClient(f'127.0.0.1:{port}')
    meta = client.get_model_metadata('auto_add_sub')
    assert [(t['name'], t['datatype'], t['shape']) for t in meta['outputs']] == [('OUTPUT0', 'FP32', [-1, 4]), ('OUTPUT1', 'FP32', [-1, 4])]
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    inputs = [httpclient.InferInput(n, [2, 4], 'FP32') for n in ('INPUT0', 'INPUT1')]
    inputs[0].set_data_from_numpy(x, binary_data=True); inputs[1].set_data_from_numpy(np.ones_like(x), binary_data=False)
    result = client.infer('auto_add_sub', inputs, outputs=[httpclient.InferRequestedOutput('OUTPUT1', binary_data=True)])
    np.testing.assert_array_equal(result.as_numpy('OUTPUT1'), x - 1)
    assert result.as_numpy('OUTPUT0') is None
    text = httpclient.InferInput('TEXT', [1, 2], 'BYTES')
    text.set_data_from_numpy(np.array([[b'on', 'nx'.encode()]], dtype=object))
    np.testing.assert_array_equal(client.infer('twice', [text]).as_numpy('TWICE'), np.array([[b'on', b'nx', b'on', b'nx']], dtype=object))
    client.close()

# ---------------------------------------------------------------------------------------------------------------
# Implicit state and sequence controls: more inputs (and outputs) than the config's `input` and `output` list

def accumulate_onnx(path, control=True):
    "OUTPUT = (INPUT + STATE_IN) * 10, STATE_OUT = INPUT + STATE_IN (+ 1000 * START when `control`): a running sum."
    nodes = [helper.make_node('Add', ['INPUT', 'STATE_IN'], ['sum'])]
    ins = [('INPUT', np.int32, ['b', 1]), ('STATE_IN', np.int32, ['b', 1])]
    if control:
        nodes += [helper.make_node('Mul', ['START', 'k1000'], ['start_mark']), helper.make_node('Add', ['sum', 'start_mark'], ['marked'])]
        ins.append(('START', np.int32, ['b', 1]))
    total = 'marked' if control else 'sum'
    nodes += [helper.make_node('Mul', [total, 'k10'], ['OUTPUT']), helper.make_node('Identity', ['sum'], ['STATE_OUT'])]
    inits = [onnx_numpy_helper.from_array(np.array([10], np.int32), 'k10'), onnx_numpy_helper.from_array(np.array([1000], np.int32), 'k1000')]
    save_onnx(make_onnx_model(nodes, ins, [('OUTPUT', np.int32, ['b', 1]), ('STATE_OUT', np.int32, ['b', 1])], inits), path)

def accumulate_config(control=True, outputs=''):
    return ('name: "acc" platform: "onnxruntime_onnx" max_batch_size: 4\n'
            'input [ { name: "INPUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
            f'output [ {{ name: "OUTPUT" data_type: TYPE_INT32 dims: [ 1 ] }}{outputs} ]\n'
            'sequence_batching { state [ { input_name: "STATE_IN" output_name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
            + ('  control_input [ { name: "START" control [ { kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] } ]\n' if control else '')
            + '}\n')

def test_implicit_state_and_controls_are_model_inputs_fed_by_the_sequence_batcher(tmp_path):
    """The state's input is fed, its output carried to the sequence's next request and kept from the client; START is
    fed as the model's input; two interleaved sequences keep their own sums (was: 'expects 1 inputs, model provides 3')."""
    write_model(tmp_path, 'acc', accumulate_config(), accumulate_onnx)
    with TritonServer(tmp_path) as s:
        assert s.start() == {}
        def add(seq, v, **kw):
            r = s.infer('acc', {'INPUT': np.array([[v]], np.int32)}, sequence_id=seq, **kw)
            return sorted(r.outputs), r['OUTPUT'].item()
        got = [add(1, 5, sequence_start=True), add(2, 100, sequence_start=True), add(1, 6), add(2, 1), add(1, 7, sequence_end=True)]
        assert [v for _, v in got] == [10050, 11000, 110, 1010, 180]
        assert all(names == ['OUTPUT'] for names, _ in got)

def test_state_is_carried_when_the_client_asks_for_other_outputs_and_returned_when_configured(tmp_path):
    write_model(tmp_path, 'acc', accumulate_config(False, ', { name: "STATE_OUT" data_type: TYPE_INT32 dims: [ 1 ] }'),
                lambda p: accumulate_onnx(p, control=False))
    with TritonServer(tmp_path) as s:
        assert s.start() == {}
        ask = lambda v, outs, **kw: s.infer('acc', {'INPUT': np.array([[v]], np.int32)}, sequence_id=3, outputs=outs, **kw)
        first, second = ask(2, ['OUTPUT'], sequence_start=True), ask(3, None, sequence_end=True)
        assert (sorted(first.outputs), first['OUTPUT'].item()) == (['OUTPUT'], 20)
        assert {k: v.item() for k, v in second.outputs.items()} == {'OUTPUT': 50, 'STATE_OUT': 5}

def test_a_state_or_control_missing_from_the_model_fails_the_load_with_the_count(tmp_path):
    write_model(tmp_path, 'acc', accumulate_config(), lambda p: accumulate_onnx(p, control=False))
    with TritonServer(tmp_path, model_control_mode='explicit', load_models=['acc']) as s:
        failures = s.start()
        assert "unable to load model 'acc', configuration expects 3 inputs, model provides 2" in failures['acc'], failures
