"""`import triton_python_backend_utils as pb_utils` without Triton: unit-testing model.py files directly,
and pb_utils itself compared with the real one.

The first part is what Triton users have long asked for: a plain pytest that imports a model.py, builds
`pb_utils.InferenceRequest`s, calls `initialize` and `execute`, and checks the responses, with no
server, no container and no GPU. It uses the models in tests/models/python_backend.

The second part runs a list of small pb_utils snippets (constructors, dtype helpers, serialization,
errors, metrics, auto-complete rules ...) three ways: with no server, inside a model served by triton_mini,
and (marker `oracle`) inside the same model served by the real Triton 2.51, and compares the results,
including the exact text of every exception.
"""
import importlib.util, json, logging, re, shutil, warnings
from pathlib import Path

import numpy as np
import pytest

import triton_python_backend_utils as pb_utils
import triton_mini.pb_utils
from triton_mini.server import TritonServer

from triton_servers import RealTriton, http, model_path

MODELS = model_path('python_backend')


def load_model_py(name):
    "Import tests/models/python_backend/<name>/1/model.py the way a user's test would, and return its TritonPythonModel class."
    spec = importlib.util.spec_from_file_location(f'user_model_{name}', MODELS / name / '1' / 'model.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.TritonPythonModel


def config_json(name, **extra) -> str:
    "The bits of a model's config that its initialize reads, as the JSON string Triton passes."
    return json.dumps(extra, separators=(',', ':'))


def request(inputs:dict, parameters=None):
    "A request as execute receives it, built with pb_utils' own constructor."
    return pb_utils.InferenceRequest(model_name='under_test', inputs=[pb_utils.Tensor(k, v) for k, v in inputs.items()],
                                     requested_output_names=[], parameters=parameters or {})


def outputs(response) -> dict: return {t.name(): t.as_numpy() for t in response.output_tensors()}


# ------------------------------------------------------------------------------ the module, without a server

def test_import_gives_triton_mini_pb_utils():
    assert pb_utils.Tensor is triton_mini.pb_utils.Tensor and pb_utils.InferenceRequest is triton_mini.pb_utils.InferenceRequest
    names = {'Tensor', 'InferenceRequest', 'InferenceResponse', 'TritonError', 'TritonModelException', 'Logger', 'MetricFamily',
             'ModelConfig', 'get_input_tensor_by_name', 'get_output_tensor_by_name', 'get_input_config_by_name',
             'get_output_config_by_name', 'using_decoupled_model_transaction_policy', 'triton_string_to_numpy',
             'triton_to_numpy_type', 'numpy_to_triton_type', 'serialize_byte_tensor', 'deserialize_bytes_tensor',
             'get_model_dir', 'is_model_ready', 'load_model', 'unload_model', 'TRITON_STRING_TO_NUMPY', 'PreferredMemory',
             'TRITONSERVER_RESPONSE_COMPLETE_FINAL', 'TRITONSERVER_REQUEST_FLAG_SEQUENCE_START', 'TRITONSERVER_MEMORY_CPU'}
    assert names <= set(dir(pb_utils))


def test_unit_test_add_sub_without_a_server():
    model = load_model_py('add_sub')()
    fp32 = {'data_type': 'TYPE_FP32', 'dims': [4]}
    model.initialize({'model_config': config_json('add_sub', output=[{'name': 'OUTPUT0', **fp32}, {'name': 'OUTPUT1', **fp32}])})
    rng = np.random.default_rng(1)
    batch = [(rng.standard_normal((2, 4)).astype(np.float32), rng.standard_normal((2, 4)).astype(np.float32)) for _ in range(3)]
    responses = model.execute([request({'INPUT0': a, 'INPUT1': b}) for a, b in batch])
    assert len(responses) == 3
    for (a, b), r in zip(batch, responses):
        assert not r.has_error()
        np.testing.assert_array_equal(outputs(r)['OUTPUT0'], a + b)
        np.testing.assert_array_equal(outputs(r)['OUTPUT1'], a - b)


def test_unit_test_string_and_parameter_models():
    strings = load_model_py('string_ops')()
    out = outputs(strings.execute([request({'TEXT': np.array(['Grüße'.encode(), b'ab'], dtype=object)})])[0])
    assert (out['UPPER'].tolist(), out['REVERSED'].tolist(), out['LENGTH'].tolist()) == (
        ['GRÜSSE'.encode(), b'AB'], ['eßürG'.encode(), b'ba'], [5, 2])
    scaled = load_model_py('scaled')()
    scaled.initialize({'model_config': config_json('scaled', output=[{'name': 'Y', 'data_type': 'TYPE_FP64'}], parameters={
        'scale': {'string_value': '3'}, 'offset': {'string_value': '0.5'}, 'note': {'string_value': 'n'}})})
    x = np.array([[1.0, 2.0]], np.float32)
    y = outputs(scaled.execute([request({'X': x}, parameters={'offset': 1})])[0])['Y']
    assert y.dtype == np.float64 and y.tolist() == [[4.5, 7.5]]      # the output dtype came from the config given


def test_unit_test_error_responses():
    model = load_model_py('errors')()
    r = model.execute([request({'MODE': np.array([12], np.int32)})])[0]
    assert r.has_error() and (r.error().message(), r.error().code()) == ('error with code NOT_FOUND', pb_utils.TritonError.NOT_FOUND)
    with pytest.raises(ValueError, match='boom from execute'):            # an exception is just an exception here
        model.execute([request({'MODE': np.array([1], np.int32)})])
    assert model.execute([request({'MODE': np.array([3], np.int32)})]) == []


def test_unit_test_decoupled_model():
    "A decoupled model's sends are recorded on the request's sender (`.sent`): a triton_mini addition for tests."
    model = load_model_py('streamer')()
    model.initialize({'model_config': config_json('streamer', model_transaction_policy={'decoupled': True})})
    req = request({'TEXT': np.array([b'tok'], dtype=object), 'N': np.array([3], np.int32)}, parameters={'fail_at': 1})
    assert model.execute([req]) is None
    sent = req.get_response_sender().sent
    assert [(r.error().message() if r is not None and r.has_error() else r and outputs(r)['TOKEN'].tolist(), final)
            for r, final in sent] == [([b'tok #0'], False), ('failed at 1', False), ([b'tok #2'], False), (None, True)]
    with pytest.raises(pb_utils.TritonModelException, match='streamer must be decoupled'):
        model.initialize({'model_config': config_json('streamer')})


def test_unit_test_auto_complete_config():
    cls = load_model_py('autocomplete')
    cfg = cls.auto_complete_config(pb_utils.ModelConfig(json.dumps({'name': 'autocomplete', 'max_batch_size': 0, 'input': [], 'output': []})))
    assert cfg.as_dict() == {'name': 'autocomplete', 'max_batch_size': 4, 'dynamic_batching': {},
                             'input': [{'name': 'IN', 'data_type': 'TYPE_FP32', 'dims': [2]}],
                             'output': [{'name': 'OUT', 'data_type': 'TYPE_FP32', 'dims': [2]}]}


def test_unit_test_logging_and_metrics(caplog):
    caplog.set_level(logging.INFO, logger='triton_mini.model')
    model = load_model_py('telemetry')()
    model.initialize({'model_name': 'telemetry', 'model_version': '1'})
    model.execute([request({'X': np.array([3.0], np.float32)})])
    assert [(r.levelname, r.getMessage()) for r in caplog.records][:4] == [
        ('INFO', 'telemetry initialized'), ('INFO', 'info from model x=3.0'), ('WARNING', 'warning from model'), ('ERROR', 'error from model')]
    assert (model.requests.value(), model.last.value()) == (1.0, 3.0)


def test_calls_that_need_a_server_say_so():
    model = load_model_py('bls')()
    with pytest.raises(pb_utils.TritonModelException, match='BLS needs a running server'):
        import asyncio
        asyncio.run(model.execute([request({'A': np.ones(4, np.float32), 'MODE': np.array([0], np.int32)})]))
    with pytest.raises(pb_utils.TritonModelException, match='only available inside a running model'):
        pb_utils.get_model_dir()


# ----------------------------------------------------------------------------------- pb_utils, three ways

PROBE_CONFIG = '''name: "pb_probe"
backend: "python"
max_batch_size: 0
input [ { name: "CHECKS" data_type: TYPE_STRING dims: [ 1 ] } ]
output [ { name: "RESULTS" data_type: TYPE_STRING dims: [ 1 ] } ]
'''

PROBE_MODEL = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils


def run_checks(checks, request=None):
    "Run each snippet (it sets `r`); the result is repr(r), or 'ExceptionType: message'."
    results = {}
    for name, code in checks.items():
        ns = {"pb_utils": pb_utils, "np": np, "json": json, "request": request}
        try:
            exec(code, ns)
            results[name] = repr(ns.get("r"))
        except BaseException as e:
            results[name] = "%s: %s" % (type(e).__name__, e)
    return results


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            checks = json.loads(pb_utils.get_input_tensor_by_name(request, "CHECKS").as_numpy()[0])
            out = json.dumps(run_checks(checks, request)).encode()
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("RESULTS", np.array([out], dtype=np.object_))]))
        return responses
'''

MC = 'c = pb_utils.ModelConfig(json.dumps({"name": "m", "max_batch_size": %s, "input": %s, "output": %s%s})); '
NEW = lambda name, kind: f'f = pb_utils.MetricFamily(name="{name}", description="d", kind=pb_utils.MetricFamily.{kind}); '
CHECKS = {
    # errors
    'codes': 'r = [(n, int(getattr(pb_utils.TritonError, n))) for n in ["UNKNOWN","INTERNAL","NOT_FOUND","INVALID_ARG","UNAVAILABLE","UNSUPPORTED","ALREADY_EXISTS","CANCELLED"]]',
    'code_str': 'r = [str(pb_utils.TritonError("m").code()), repr(pb_utils.TritonError.NOT_FOUND)]',
    'error': 'e = pb_utils.TritonError("m", pb_utils.TritonError.INVALID_ARG); r = (e.message(), int(e.code()))',
    'error_int_code': 'pb_utils.TritonError("m", 2)',
    'error_code_json': 'json.dumps(pb_utils.TritonError("m").code())',
    'model_exception': 'r = issubclass(pb_utils.TritonModelException, Exception)',
    # tensors
    'tensor_list': 'pb_utils.Tensor("T", [1, 2])',
    'tensor_int_name': 'pb_utils.Tensor(5, np.ones(1))',
    'tensor_unicode': 'pb_utils.Tensor("T", np.array(["a", "b"]))',
    'tensor_object': 't = pb_utils.Tensor("T", np.array([b"a", b"bc"], dtype=np.object_)); r = (str(t.as_numpy().dtype), t.as_numpy().tolist(), t.shape(), t.name(), t.is_cpu())',
    'tensor_object_str': 'r = pb_utils.Tensor("T", np.array(["a"], dtype=np.object_)).as_numpy().tolist()',
    'tensor_S': 't = pb_utils.Tensor("T", np.array([b"a", b"bc"])); r = (str(t.as_numpy().dtype), t.as_numpy().tolist())',
    'tensor_noncontiguous': 'r = pb_utils.Tensor("T", np.arange(6, dtype=np.float32).reshape(2, 3)[:, 1]).as_numpy().tolist()',
    'tensor_scalar': 't = pb_utils.Tensor("T", np.array(5, dtype=np.int64)); r = (t.shape(), t.as_numpy().tolist())',
    'tensor_triton_dtype': 'r = pb_utils.Tensor("T", np.ones(1, np.float32)).triton_dtype()',
    'tensor_empty_name': 'pb_utils.Tensor("", np.ones(1))',
    'tensor_made_c_contiguous': 'r = pb_utils.Tensor("T", np.arange(6).reshape(2, 3).T).as_numpy().flags["C_CONTIGUOUS"]',
    # DLPack (from_dlpack of a numpy *array* kills Triton 2.51's stub: see test_from_dlpack_of_arrays below)
    'dlpack_capsule': 't = pb_utils.Tensor("A", np.arange(6, dtype=np.float32).reshape(2, 3)); u = pb_utils.Tensor.from_dlpack("B", t.to_dlpack()); r = (u.name(), u.as_numpy().tolist(), str(u.as_numpy().dtype), u.shape(), u.is_cpu())',
    'dlpack_of_tensor': 'r = np.from_dlpack(pb_utils.Tensor("A", np.arange(3, dtype=np.int64))).tolist()',
    'dlpack_device': 'r = pb_utils.Tensor("A", np.ones(1)).__dlpack_device__()',
    'dlpack_transposed': 'pb_utils.Tensor.from_dlpack("B", np.arange(6).reshape(2, 3).T)',
    'dlpack_strings': 'pb_utils.Tensor("S", np.array([b"a"], dtype=np.object_)).to_dlpack()',
    'dlpack_not_tensor': 'pb_utils.Tensor.from_dlpack("B", [1, 2])',
    'dlpack_empty_name': 'pb_utils.Tensor.from_dlpack("", np.ones(1))',
    'tensor_bool_fp16': 'r = [str(pb_utils.Tensor("T", a).as_numpy().dtype) for a in (np.array([True]), np.array([1.5], np.float16))]',
    # datatypes
    'string_to_numpy': 'r = [(k, np.dtype(pb_utils.triton_string_to_numpy(k)).str) for k in sorted(pb_utils.TRITON_STRING_TO_NUMPY)]',
    'string_to_numpy_bf16': 'r = pb_utils.triton_string_to_numpy("TYPE_BF16")',
    'to_numpy_type': 'r = [(i, None if pb_utils.triton_to_numpy_type(i) is None else np.dtype(pb_utils.triton_to_numpy_type(i)).str) for i in range(15)]',
    'numpy_to_triton': 'r = [pb_utils.numpy_to_triton_type(t) for t in [bool, np.bool_, np.uint8, np.uint16, np.uint32, np.uint64, np.int8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64, np.object_, np.bytes_, bytes, object, str, int, float, np.str_, np.dtype("float32"), np.dtype("O")]]',
    # BYTES serialization
    'serialize': 'r = [pb_utils.serialize_byte_tensor(a) for a in (np.array([b"a", b"bc"], dtype=np.object_), np.array([[b"a"], [b"bc"]], dtype=np.object_), np.array(["hé"], dtype=np.object_), np.array([b"ab", b"c"]), np.array([1, 22], dtype=np.object_))]',
    'serialize_quirks': 'r = (pb_utils.serialize_byte_tensor(np.array([], dtype=np.object_)), pb_utils.serialize_byte_tensor(np.array([1, 2])))',
    'deserialize': 'r = [(str(a.dtype), a.tolist()) for a in (pb_utils.deserialize_bytes_tensor(b"\\x01\\x00\\x00\\x00a\\x02\\x00\\x00\\x00bc"), pb_utils.deserialize_bytes_tensor(b""))]',
    # constants and enums
    'consts': 'r = sorted((n, getattr(pb_utils, n)) for n in dir(pb_utils) if n.startswith("TRITONSERVER_") and isinstance(getattr(pb_utils, n), int))',
    'memory': 'r = [repr(pb_utils.TRITONSERVER_MEMORY_CPU), repr(pb_utils.TRITONSERVER_MEMORY_GPU)]',
    'logger_levels': 'r = [(int(l), str(l)) for l in (pb_utils.Logger.INFO, pb_utils.Logger.WARNING, pb_utils.Logger.ERROR, pb_utils.Logger.VERBOSE)]',
    'logger_bad_level': 'pb_utils.Logger.log("x", 9)',
    'metric_kinds': 'r = [(int(k), str(k)) for k in (pb_utils.MetricFamily.COUNTER, pb_utils.MetricFamily.GAUGE, pb_utils.MetricFamily.HISTOGRAM)]',
    # responses
    'response_default': 'x = pb_utils.InferenceResponse(); r = (x.has_error(), x.error(), x.output_tensors())',
    'response_error': 'x = pb_utils.InferenceResponse([], pb_utils.TritonError("e")); r = (x.has_error(), x.error().message(), x.output_tensors())',
    'response_parameters': 'pb_utils.InferenceResponse([], parameters={"a": 1})',
    'response_not_tensors': 'pb_utils.InferenceResponse([np.ones(1)])',
    'response_none_tensor': 'pb_utils.InferenceResponse(output_tensors=[None])',
    'response_none_second_tensor': 'pb_utils.InferenceResponse([pb_utils.Tensor("A", np.ones(1)), None])',
    'response_none_list': 'pb_utils.InferenceResponse(output_tensors=None)',
    'get_output_by_name': 'x = pb_utils.InferenceResponse([pb_utils.Tensor("A", np.ones(1))]); r = (pb_utils.get_output_tensor_by_name(x, "A").name(), pb_utils.get_output_tensor_by_name(x, "B"))',
    'config_helpers': 'c = {"input": [{"name": "A", "dims": [1]}]}; r = (pb_utils.get_input_config_by_name(c, "A"), pb_utils.get_input_config_by_name(c, "B"), pb_utils.get_output_config_by_name({}, "B"))',
    'using_decoupled': 'r = [pb_utils.using_decoupled_model_transaction_policy(c) for c in [{}, {"model_transaction_policy": {"decoupled": True}}, {"model_transaction_policy": {"decoupled": False}}]]',
    'using_decoupled_no_key': 'pb_utils.using_decoupled_model_transaction_policy({"model_transaction_policy": {}})',
    # BLS requests
    'bls_no_outputs': 'pb_utils.InferenceRequest(model_name="x", inputs=[])',
    'bls_positional': 'pb_utils.InferenceRequest("x", [], ["A"])',
    'bls_version_str': 'pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[], model_version="1")',
    'bls_request': 'x = pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=["A"], request_id="i", correlation_id=3, flags=1, timeout=5); r = (x.request_id(), x.correlation_id(), x.flags(), x.timeout(), x.requested_output_names(), x.inputs(), x.parameters())',
    'bls_tuple_inputs': 'r = len(pb_utils.InferenceRequest(model_name="x", inputs=(pb_utils.Tensor("A", np.ones(1)),), requested_output_names=[]).inputs())',
    'bls_string_correlation': 'r = pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[], correlation_id="abc").correlation_id()',
    'bls_set_flags': 'x = pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[]); x.set_flags(3); r = x.flags()',
    'bls_trace': 't = pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[]).trace(); r = (type(t).__name__, t.get_context())',
    'bls_parameters': 'r = pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[], parameters={"a": 1, "b": "s", "c": True}).parameters()',
    'bls_parameters_float': 'pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[], parameters={"a": 1.5})',
    'bls_parameters_str': 'pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[], parameters="{}")',
    'bls_none_input': 'pb_utils.InferenceRequest(model_name="x", inputs=[None], requested_output_names=["A"])',
    'bls_none_second_input': 'pb_utils.InferenceRequest(model_name="x", inputs=[pb_utils.Tensor("A", np.ones(1)), None], requested_output_names=["A"], request_id="r1")',
    'bls_none_input_bad_parameters': 'pb_utils.InferenceRequest(model_name="x", inputs=[None], requested_output_names=["A"], parameters={"a": 1.5})',
    'bls_empty_output_name': 'pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=["A", ""])',
    'bls_none_output_name': 'pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[None])',
    'bls_none_correlation_id': 'pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[], correlation_id=None)',
    'bls_float_correlation_id': 'pb_utils.InferenceRequest(model_name="x", inputs=[], requested_output_names=[], correlation_id=1.5)',
    # metrics
    'hist_no_buckets': NEW('p_h1', 'HISTOGRAM') + 'f.Metric(labels={"a": "b"})',
    'counter_buckets': NEW('p_c1', 'COUNTER') + 'f.Metric(labels={"a": "b"}, buckets=[1.0])',
    'counter_negative': NEW('p_c2', 'COUNTER') + 'f.Metric(labels={"a": "b"}).increment(-1)',
    'counter_set': NEW('p_c3', 'COUNTER') + 'f.Metric(labels={"a": "b"}).set(4)',
    'counter_observe': NEW('p_c4', 'COUNTER') + 'f.Metric(labels={"a": "b"}).observe(4)',
    'counter_value': NEW('p_c5', 'COUNTER') + 'm = f.Metric(labels={"a": "b"}); m.increment(2); m.increment(0.5); r = m.value()',
    'gauge': NEW('p_g1', 'GAUGE') + 'm = f.Metric(labels={"a": "b"}); m.set(4); m.increment(-1.5); r = m.value()',
    'gauge_observe': NEW('p_g2', 'GAUGE') + 'f.Metric(labels={"a": "b"}).observe(4)',
    'hist_value': NEW('p_h2', 'HISTOGRAM') + 'm = f.Metric(labels={"a": "b"}, buckets=[1.0]); m.observe(0.5); r = m.value()',
    'hist_increment': NEW('p_h3', 'HISTOGRAM') + 'f.Metric(labels={"a": "b"}, buckets=[1.0]).increment(1)',
    'hist_set': NEW('p_h4', 'HISTOGRAM') + 'f.Metric(labels={"a": "b"}, buckets=[1.0]).set(1)',
    'hist_unsorted': NEW('p_h5', 'HISTOGRAM') + 'f.Metric(labels={"a": "b"}, buckets=[2.5, 0.1, 1.0])',
    'hist_duplicate_bucket': NEW('p_h6', 'HISTOGRAM') + 'f.Metric(labels={"a": "b"}, buckets=[1, 1, 2])',
    'hist_unsorted_existing': NEW('p_h7', 'HISTOGRAM') + 'm = f.Metric(labels={"a": "b"}, buckets=[1.0, 2.0]); f.Metric(labels={"a": "b"}, buckets=[3.0, 1.0])',
    'hist_other_buckets_existing': NEW('p_h8', 'HISTOGRAM') + 'm = f.Metric(labels={"a": "b"}, buckets=[1.0, 2.0]); f.Metric(labels={"a": "b"}, buckets=[5.0]); r = "ok"',
    'hist_empty_buckets': NEW('p_h9', 'HISTOGRAM') + 'm = f.Metric(labels={}, buckets=[]); m.observe(1); r = "ok"',
    'family_bad_kind': 'pb_utils.MetricFamily(name="p_k", description="d", kind=7)',
    'labels_not_dict': NEW('p_l', 'COUNTER') + 'f.Metric(labels=[1])',
    'no_labels': NEW('p_n', 'COUNTER') + 'm = f.Metric(); m.increment(1); r = m.value()',
    'family_deleted': NEW('p_d', 'COUNTER') + 'm = f.Metric(labels={"a": "b"}); del f; m.increment(1)',
    'family_deleted_value': NEW('p_d2', 'GAUGE') + 'm = f.Metric(labels={"a": "b"}); del f; r = m.value()',
    'family_same_name': NEW('p_s', 'COUNTER') + 'g = pb_utils.MetricFamily(name="p_s", description="d", kind=pb_utils.MetricFamily.COUNTER); r = "ok"',
    'family_same_name_other_kind': NEW('p_t', 'COUNTER') + 'g = pb_utils.MetricFamily(name="p_t", description="d", kind=pb_utils.MetricFamily.GAUGE)',
    # auto-complete rules
    'mc_extra_key': MC % (0, '[]', '[]', '') + 'c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [1], "format": "x"})',
    'mc_output_optional': MC % (0, '[]', '[]', '') + 'c.add_output({"name": "O", "data_type": "TYPE_FP32", "dims": [1], "optional": True})',
    'mc_missing_name': MC % (0, '[]', '[]', '') + 'c.add_input({"data_type": "TYPE_FP32", "dims": [1]})',
    'mc_missing_dims': MC % (0, '[]', '[]', '') + 'c.add_input({"name": "I", "data_type": "TYPE_FP32"})',
    'mc_missing_data_type': MC % (0, '[]', '[]', '') + 'c.add_output({"name": "O", "dims": [1]})',
    'mc_other_data_type': MC % (0, '[{"name": "I", "data_type": "TYPE_FP32", "dims": [1]}]', '[]', '') + 'c.add_input({"name": "I", "data_type": "TYPE_INT32", "dims": [1]})',
    'mc_other_dims': MC % (0, '[{"name": "I", "data_type": "TYPE_FP32", "dims": [1]}]', '[]', '') + 'c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [2]})',
    'mc_other_output_dims': MC % (0, '[]', '[{"name": "O", "data_type": "TYPE_FP32", "dims": [1]}]', '') + 'c.add_output({"name": "O", "data_type": "TYPE_FP32", "dims": [2]})',
    'mc_fill': MC % (0, '[{"name": "I", "data_type": "TYPE_INVALID", "dims": []}]', '[]', '') + 'c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [3]}); r = c.as_dict()["input"]',
    'mc_fill_optional': MC % (0, '[]', '[]', '') + 'c.add_input({"name": "I", "data_type": "TYPE_FP32", "dims": [3], "optional": True}); r = c.as_dict()["input"]',
    'mc_mbs_lower': MC % (8, '[]', '[]', '') + 'c.set_max_batch_size(4)',
    'mc_mbs_higher': MC % (4, '[]', '[]', '') + 'c.set_max_batch_size(8); r = c.as_dict()["max_batch_size"]',
    'mc_mbs_negative': MC % (0, '[]', '[]', '') + 'c.set_max_batch_size(-1)',
    'mc_dynamic_with_sequence': MC % (0, '[]', '[]', ', "sequence_batching": {}') + 'c.set_dynamic_batching()',
    'mc_dynamic_with_ensemble': MC % (0, '[]', '[]', ', "ensemble_scheduling": {}') + 'c.set_dynamic_batching()',
    'mc_dynamic_twice': MC % (0, '[]', '[]', ', "dynamic_batching": {"max_queue_delay_microseconds": 5}') + 'c.set_dynamic_batching(); r = c.as_dict()["dynamic_batching"]',
    'mc_decoupled': MC % (0, '[]', '[]', '') + 'c.set_model_transaction_policy({"decoupled": True}); r = c.as_dict()["model_transaction_policy"]',
    'mc_decoupled_conflict': MC % (0, '[]', '[]', ', "model_transaction_policy": {"decoupled": false}') + 'c.set_model_transaction_policy({"decoupled": True})',
    'mc_policy_bad_key': MC % (0, '[]', '[]', '') + 'c.set_model_transaction_policy({"foo": True})',
    'mc_dict': 'pb_utils.ModelConfig({"name": "m"})',
}
NEEDS_A_REQUEST = {  # checks that use the request execute received, or the server behind it
    'request': 'r = (request.request_id(), request.correlation_id(), request.flags(), request.timeout(), sorted(request.requested_output_names()), request.parameters(), request.is_cancelled(), [t.name() for t in request.inputs()])',
    'request_set_flags': 'request.set_flags(2); r = request.flags()',
    'request_trace': 't = request.trace(); r = (type(t).__name__, t.get_context())',
    'request_missing_input': 'r = pb_utils.get_input_tensor_by_name(request, "NOPE")',
    'model_dir': 'r = pb_utils.get_model_dir().endswith("/pb_probe/1")',
    'is_model_ready': 'r = (pb_utils.is_model_ready("pb_probe"), pb_utils.is_model_ready("nope"), pb_utils.is_model_ready("pb_probe", "1"), pb_utils.is_model_ready("pb_probe", "9"))',
    'sender_of_a_model_not_decoupled': 's = request.get_response_sender(); r = s.is_cancelled()',
    'sender_none': 's = request.get_response_sender(); s.send(None)',
}
# Where triton_mini deliberately differs (each is also listed in the notebooks' "How real Triton differs").
KNOWN = {'tensor_triton_dtype': 'Triton 2.51 raises TypeError (unregistered enum); triton_mini returns the code'}


def normalize(results:dict) -> dict:
    "Drop what can never match: object addresses in pybind11 signatures."
    return {k: re.sub(r' at 0x[0-9a-f]+>', '>', v) for k, v in results.items()}


@pytest.fixture(scope='module')
def probe_repo(tmp_path_factory):
    root = tmp_path_factory.mktemp('probe') / 'models'
    (root / 'pb_probe' / '1').mkdir(parents=True)
    (root / 'pb_probe' / 'config.pbtxt').write_text(PROBE_CONFIG)
    (root / 'pb_probe' / '1' / 'model.py').write_text(PROBE_MODEL)
    return root


def run_in_server(server, checks) -> dict:
    out = server.infer('pb_probe', {'CHECKS': np.array([json.dumps(checks).encode()], dtype=object)})
    return normalize(json.loads(out['RESULTS'][0]))


def results_in(probe_repo, mode:str) -> tuple:
    s = TritonServer(probe_repo, python_backend_mode=mode)
    assert s.start() == {}
    try: return run_in_server(s, CHECKS), run_in_server(s, NEEDS_A_REQUEST)
    finally: s.stop()


@pytest.fixture(scope='module')
def mini_results(probe_repo): return results_in(probe_repo, 'thread')


def test_probe_in_a_stub_process_matches_thread_mode(probe_repo, mini_results):
    "Every check gives the same answer when the model runs in a stub process (`--python-backend-mode=process`)."
    stub = results_in(probe_repo, 'process')
    for mine, theirs in zip(mini_results, stub, strict=True):
        assert {k: (mine[k], theirs[k]) for k in mine if mine[k] != theirs[k]} == {}


def test_probe_without_a_server_matches_inside_triton_mini(probe_repo, mini_results):
    "pb_utils behaves the same in a plain unit test as inside a model the server runs."
    spec = importlib.util.spec_from_file_location('pb_probe_model', probe_repo / 'pb_probe' / '1' / 'model.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    alone = normalize(module.run_checks(CHECKS))
    inside = mini_results[0]
    differ = {k: (alone[k], inside[k]) for k in CHECKS if alone[k] != inside[k]}
    # error texts that name the model instance are the only difference: there is no instance in a unit test
    assert all(a.replace("model ''", "model 'pb_probe_0'") == b for a, b in differ.values()), differ


def test_probe_results_inside_triton_mini(mini_results):
    "A few results spelled out (the oracle test below compares all of them with the real Triton)."
    r, req = mini_results
    assert r['serialize_quirks'] == "((), None)"
    assert r['counter_negative'] == ("TritonModelException: Failed to increment metric value: Failed to process the request for model "
                                     "'pb_probe_0', message: TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by non-negative values.")
    assert r['bls_none_second_input'] == "TritonModelException: Input tensor for request with id 'r1' and model name 'x' should not be empty."
    assert r['response_none_tensor'] == 'TritonModelException: Output tensor for inference response should not be empty.'
    assert r['hist_duplicate_bucket'] == r['hist_unsorted_existing'] == (   # custom_metrics QA's test_histogram_args
        "TritonModelException: Error when creating Metric: Failed to process the request for model 'pb_probe_0', message: "
        "Bucket Boundaries must be strictly sorted")
    assert r['family_deleted'].startswith("TritonModelException: Failed to increment metric value: Invalid metric operation as the "
                                          "corresponding 'MetricFamily' has been deleted.")
    assert r['bls_parameters'] == '\'{"a": 1, "b": "s", "c": true}\''
    assert req['is_model_ready'] == '(True, False, True, False)' and req['model_dir'] == 'True'
    assert r['dlpack_capsule'] == "('B', [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]], 'float32', [2, 3], True)"
    assert r['dlpack_of_tensor'] == '[0, 1, 2]' and r['dlpack_device'] == '(1, 0)'
    assert r['dlpack_transposed'].startswith('TritonModelException: DLPack tensor is not contiguous.')
    assert r['tensor_empty_name'] == 'TritonModelException: Tensor name cannot be an empty string.'
    assert (r['bls_set_flags'], r['bls_trace'], req['request_set_flags']) == ('3', "('InferenceTrace', None)", '2')
    assert req['sender_none'] == 'TritonModelException: Inference Response object must be provided when the response flags is set to zero.'


@pytest.mark.oracle
def test_probe_matches_real_triton(probe_repo, mini_results):
    # Triton 2.51 sometimes aborts (boost::interprocess::lock_exception) after a metric operation the server
    # refused (a counter going down, `set` on a counter ...): so one check per request, and a fresh server
    # to retry a check that took it down. On a loaded machine one such check can take down every fresh server
    # in a row (five of five in a CI run beside other jobs; none in five on a quiet machine): a check real Triton
    # never answers is left out of the comparison and named, and at most three may be.
    real, unanswered = [RealTriton(probe_repo)], []
    def run(name, code, attempts=5):
        body = {'inputs': [{'name': 'CHECKS', 'datatype': 'BYTES', 'shape': [1], 'data': [json.dumps({name: code})]}]}
        try: status, _, text = http(real[0].http_port, 'POST', '/v2/models/pb_probe/infer', body)
        except ConnectionError:
            real[0].stop(); real[0] = RealTriton(probe_repo)
            if attempts == 1: unanswered.append(name); return None
            return run(name, code, attempts - 1)
        assert status == 200, text
        return normalize(json.loads(json.loads(text)['outputs'][0]['data'][0]))[name]
    try: results = [{name: run(name, code) for name, code in checks.items()} for checks in (CHECKS, NEEDS_A_REQUEST)]
    finally: real[0].stop()
    assert len(unanswered) <= 3, f'real Triton died on every try of {unanswered}'
    if unanswered: warnings.warn(f'left out of the comparison: real Triton died on every try of {unanswered}')
    for mine, theirs in zip(mini_results, results, strict=True):
        differ = {k: {'mini': mine[k], 'real': theirs[k]} for k in theirs if mine[k] != theirs[k] and k not in KNOWN and k not in unanswered}
        assert differ == {}


def test_from_dlpack_of_arrays():
    """`from_dlpack` of an object with `__dlpack__` shares its memory. (Triton 2.51 converts it, then its stub dies,
    "Stub process 'pb_probe_0' is not healthy.", so these are not in the probe.)"""
    a = np.zeros(3, np.float32)
    t = pb_utils.Tensor.from_dlpack('B', a)
    a[0] = 7
    assert t.as_numpy().tolist() == [7.0, 0.0, 0.0] and t.triton_dtype() == 11
    assert pb_utils.Tensor.from_dlpack('B', np.array([True, False])).as_numpy().dtype == np.bool_
    assert pb_utils.Tensor.from_dlpack('B', np.array(3.5)).shape() == []
    with pytest.raises(pb_utils.TritonModelException, match='not contiguous'):    # Triton reads the wrong elements here
        pb_utils.Tensor.from_dlpack('B', np.arange(6).reshape(2, 3)[:, 1])

    class OnGpu:
        def __dlpack__(self, stream=None): raise AssertionError('not asked')
        def __dlpack_device__(self): return (2, 0)
    with pytest.raises(pb_utils.TritonModelException, match='allocated on GPU device,           when GPU is not available'):
        pb_utils.Tensor.from_dlpack('B', OnGpu())


def test_a_bls_response_iterator_replays_once_finished():
    """Triton's ResponseIterator keeps the responses: once the last arrived, a new loop over an exhausted iterator
    yields them all again, and a loop broken off resumes (Triton's QA model bls, test_response_iterator)."""
    from triton_mini.backend import InferenceResponse as CoreResponse
    from triton_mini.config_parser import parse_config
    from triton_mini.pb_utils import ModelContext, reset_context, set_context

    class Stream:
        def model_config(self, name, version=-1): return parse_config('model_transaction_policy { decoupled: true }')
        def submit(self, req):
            for i in range(4): req.send(CoreResponse({'OUT': np.array([i], np.int32)}), False)
            req.send(None, True)
    tok = set_context(ModelContext('bls', server=Stream()))
    try:
        it = pb_utils.InferenceRequest(model_name='square', inputs=[pb_utils.Tensor('IN', np.array([4], np.int32))],
                                       requested_output_names=['OUT']).exec(decoupled=True)
        assert next(it).output_tensors()[0].as_numpy().tolist() == [0]
        assert len(list(it)) == 4                        # the rest: three responses and the empty final one
        assert [len(list(it)) for _ in range(2)] == [5, 5]
        for n, _ in enumerate(it):
            if n == 1: break
        assert len(list(it)) == 3                        # resumed where the loop stopped
        with pytest.raises(StopIteration): next(it)
    finally: reset_context(tok)
