"""Triton's OpenVINO backend (nbs/04f_openvino_backend.ipynb) on models made here at test time (no weights committed):
an add_sub IR model built with OpenVINO's opset and written by openvino.save_model, an ONNX model (made with the onnx
package) read by OpenVINO through default_model_filename and compared with ONNX Runtime on the same file, and a
static-shape model reshaped for batching (set_batch) or by RESHAPE_IO_LAYERS, and bare model.xml files without a config.pbtxt
(the backend's auto-complete, AutoCompleteConfig). Served in process and by the
`triton-mini` command to tritonclient over HTTP and gRPC. Error texts: the backend's src/openvino.cc and src/openvino_utils.cc
(ParseParameterHelper, ValidateInputs/ValidateOutputs, CompareDimsSupported, ProcessRequests). The real Triton of the
oracle (PyPI's nvidia-pytriton) ships without the OpenVINO backend, so numpy and ONNX Runtime are the references."""
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

ov = pytest.importorskip('openvino')
from openvino import opset13 as ops

from triton_mini.server import TritonServer
from triton_servers import http


def add_sub(batch=1, width=4):
    a = ops.parameter([batch, width], np.float32, name='INPUT0'); b = ops.parameter([batch, width], np.float32, name='INPUT1')
    add, sub = ops.add(a, b), ops.subtract(a, b)
    add.output(0).get_tensor().set_names({'OUTPUT0'}); sub.output(0).get_tensor().set_names({'OUTPUT1'})
    return ov.Model([add, sub], [a, b], 'add_sub')


def dense_onnx(path):
    "A Gemm + Tanh ONNX model with a dynamic batch dimension: y = tanh(x @ W + b)."
    import onnx
    from onnx import helper, numpy_helper, TensorProto
    rng = np.random.default_rng(0)
    w, b = rng.standard_normal((5, 3)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    graph = helper.make_graph([helper.make_node('Gemm', ['x', 'W', 'B'], ['h']), helper.make_node('Tanh', ['h'], ['y'])], 'dense',
                              [helper.make_tensor_value_info('x', TensorProto.FLOAT, ['N', 5])],
                              [helper.make_tensor_value_info('y', TensorProto.FLOAT, ['N', 3])],
                              [numpy_helper.from_array(w, 'W'), numpy_helper.from_array(b, 'B')])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)]), path)


def io(kind, items):
    return f'{kind} [' + ', '.join(f'{{ name: "{n}" data_type: {t} dims: [ {d} ] }}' for n, t, d in items) + ']\n'


def param(key, value): return f'parameters [{{ key: "{key}" value: {{ string_value: "{value}" }} }}]\n'


ADD_SUB_IO = io('input', [('INPUT0', 'TYPE_FP32', 4), ('INPUT1', 'TYPE_FP32', 4)]) + io('output', [('OUTPUT0', 'TYPE_FP32', 4), ('OUTPUT1', 'TYPE_FP32', 4)])
CONFIGS = {
    'add_sub': 'backend: "openvino"\nmax_batch_size: 16\n' + ADD_SUB_IO + 'dynamic_batching { max_queue_delay_microseconds: 100000 }\n'
               'instance_group [{ count: 2 kind: KIND_CPU }]\n'
               'parameters [{ key: "NUM_STREAMS" value: { string_value: "1" } }, { key: "PERFORMANCE_HINT" value: { string_value: "LATENCY" } }, '
               '{ key: "INFERENCE_NUM_THREADS" value: { string_value: "1" } }]\n',
    'fixed': 'backend: "openvino"\nmax_batch_size: 4\n' + ADD_SUB_IO + param('SKIP_OV_DYNAMIC_BATCHSIZE', 'yes'),
    'padded': 'backend: "openvino"\nmax_batch_size: 4\n' + ADD_SUB_IO + 'parameters [{ key: "SKIP_OV_DYNAMIC_BATCHSIZE" value: { string_value: "YES" } }, '
              '{ key: "ENABLE_BATCH_PADDING" value: { string_value: "yes" } }]\n',
    'unbatched': 'backend: "openvino"\nmax_batch_size: 0\n' + io('input', [('INPUT0', 'TYPE_FP32', '-1, 4'), ('INPUT1', 'TYPE_FP32', '-1, 4')])
                 + io('output', [('OUTPUT0', 'TYPE_FP32', '-1, 4'), ('OUTPUT1', 'TYPE_FP32', '-1, 4')]) + param('RESHAPE_IO_LAYERS', 'yes'),
    'converted': 'backend: "openvino"\nmax_batch_size: 8\n' + ADD_SUB_IO.replace('TYPE_FP32', 'TYPE_INT32'),
    'dense': 'backend: "openvino"\ndefault_model_filename: "model.onnx"\nmax_batch_size: 8\n' + io('input', [('x', 'TYPE_FP32', 5)])
             + io('output', [('y', 'TYPE_FP32', 3)]) + param('NUM_STREAMS', 'AUTO'),
}


def write(root, name, cfg, model='add_sub'):
    (root / name / '1').mkdir(parents=True)
    if model == 'dense': dense_onnx(root / name / '1' / 'model.onnx')
    else: ov.save_model(add_sub(), root / name / '1' / 'model.xml')
    (root / name / 'config.pbtxt').write_text(cfg)


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp('openvino') / 'models'
    for name, cfg in CONFIGS.items(): write(root, name, cfg, 'dense' if name == 'dense' else 'add_sub')
    return root


@pytest.fixture(scope='module')
def server(repo):
    with TritonServer(repo) as s:
        assert s.start() == {}
        yield s


def rows(n, seed=0):
    return np.random.default_rng(seed).standard_normal((2, n, 4)).astype(np.float32)


def test_ir_model_batched_requests_run_as_one_inference(server):
    "A static batch-1 IR model with max_batch_size 16: the batch is made dynamic; four requests share executions."
    x, y = rows(12)
    before = server.statistics('add_sub')['model_stats'][0]['execution_count']
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: server.infer('add_sub', {'INPUT0': x[i * 3:i * 3 + 3], 'INPUT1': y[i * 3:i * 3 + 3]}), range(4)))
    assert np.array_equal(np.concatenate([g['OUTPUT0'] for g in got]), x + y)
    assert np.array_equal(np.concatenate([g['OUTPUT1'] for g in got]), x - y)
    stats = server.statistics('add_sub')['model_stats'][0]
    assert stats['inference_count'] >= 12 and stats['execution_count'] - before < 4
    assert list(server.infer('add_sub', {'INPUT0': x[:1], 'INPUT1': y[:1]}, outputs=['OUTPUT1']).outputs) == ['OUTPUT1']


def dense_answers(repo, x) -> tuple:
    """The dense model's `y` for `x` from OpenVINO itself (compiled as the backend compiles it: no properties) and from
    onnxruntime, and how close OpenVINO can come to onnxruntime on this CPU: OpenVINO's CPU plugin infers in bf16 by
    default where the CPU has bf16 instructions (this machine's AMD EPYC has AVX512_BF16: differences of ~0.006 seen),
    and Triton's openvino backend leaves that default alone unless HINT_BF16 (src/openvino.cc, r24.10)."""
    ort = pytest.importorskip('onnxruntime')
    path = str(repo / 'dense' / '1' / 'model.onnx')
    compiled = ov.Core().compile_model(path, 'CPU')
    own = compiled({'x': x})[compiled.output(0)]
    precision = str(compiled.get_property('INFERENCE_PRECISION_HINT'))
    tolerance = 1e-5 if precision == 'f32' else 3e-2   # bf16/f16: 8/11 bits of mantissa through a Gemm and a Tanh
    return own, ort.InferenceSession(path, providers=['CPUExecutionProvider']).run(None, {'x': x})[0], tolerance


def test_onnx_model_read_by_openvino_equals_onnxruntime(server, repo):
    x = np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32)
    own, want, tolerance = dense_answers(repo, x)
    got = server.infer('dense', {'x': x})['y']
    assert got.shape == (7, 3) and np.allclose(got, own, rtol=0, atol=1e-6)   # OpenVINO's own answer
    assert np.allclose(got, want, atol=tolerance)                              # and onnxruntime's, as closely as the precision allows


def test_static_model_reshaped_by_reshape_io_layers(server):
    x, y = rows(5, seed=2)
    out = server.infer('unbatched', {'INPUT0': x, 'INPUT1': y})
    assert out['OUTPUT0'].shape == (5, 4) and np.array_equal(out['OUTPUT0'], x + y) and np.array_equal(out['OUTPUT1'], x - y)


def test_skip_dynamic_batchsize_fixes_the_batch_and_padding_fills_it(server):
    x, y = rows(4, seed=3)
    assert np.array_equal(server.infer('fixed', {'INPUT0': x, 'INPUT1': y})['OUTPUT0'], x + y)       # a full batch
    with pytest.raises(Exception, match="expected requests with batch size '4', got '2'... this error can be avoided by setting "
                                        "'ENABLE_BATCH_PADDING' parameter in model configuration to 'YES' at a performance cost."):
        server.infer('fixed', {'INPUT0': x[:2], 'INPUT1': y[:2]})
    assert server.statistics('fixed')['model_stats'][0]['inference_stats']['fail']['count'] == 1
    out = server.infer('padded', {'INPUT0': x[:2], 'INPUT1': y[:2]})
    assert out['OUTPUT0'].shape == (2, 4) and np.array_equal(out['OUTPUT1'], x[:2] - y[:2])


def test_config_type_converted_to_the_models(server):
    "Triton's backend sets the config's element type on the pre-processing tensor: an INT32 config on an f32 model is converted."
    a, b = np.arange(8, dtype=np.int32).reshape(2, 4), np.full((2, 4), 3, np.int32)
    out = server.infer('converted', {'INPUT0': a, 'INPUT1': b})
    assert out['OUTPUT0'].dtype == np.int32 and np.array_equal(out['OUTPUT0'], a + b) and np.array_equal(out['OUTPUT1'], a - b)


def test_documented_parameters_reach_the_compiled_model(server):
    "NUM_STREAMS, INFERENCE_NUM_THREADS and PERFORMANCE_HINT are the compiled model's OpenVINO properties; one per instance."
    import gc
    from triton_mini.openvino_backend import OpenVINOInstance
    insts = [o for o in gc.get_objects() if isinstance(o, OpenVINOInstance) and o.config.name == 'add_sub' and o.compiled is not None]
    assert len(insts) == 2 and insts[0].compiled is not insts[1].compiled
    c = insts[0].compiled
    assert c.get_property('NUM_STREAMS') == 1 and c.get_property('INFERENCE_NUM_THREADS') == 1 and str(c.get_property('PERFORMANCE_HINT')) == 'LATENCY'


@pytest.mark.parametrize('cfg, error', [
    (CONFIGS['fixed'].replace(", { name: \"INPUT1\" data_type: TYPE_FP32 dims: [ 4 ] }", ''),
     "unable to load model 'm', configuration expects 1 inputs, model provides 2"),
    (CONFIGS['fixed'].replace('"INPUT1"', '"B"'), "unexpected inference input 'B', allowed inputs are: INPUT0, INPUT1"),
    (CONFIGS['fixed'].replace('"OUTPUT1"', '"DIFF"'), "unexpected inference output 'DIFF', allowed outputs are: OUTPUT0, OUTPUT1"),
    (CONFIGS['fixed'].replace('"INPUT0" data_type: TYPE_FP32', '"INPUT0" data_type: TYPE_STRING'), "unsupported datatype TYPE_STRING for input 'INPUT0' for model 'm'"),
    (CONFIGS['fixed'].replace('"INPUT0" data_type: TYPE_FP32 dims: [ 4 ]', '"INPUT0" data_type: TYPE_FP32 dims: [ 5 ]'),
     "model 'm', tensor 'INPUT0': the model expects 2 dimensions (shape [1,4]) but the model configuration specifies 2 dimensions "
     "(an initial batch dimension because max_batch_size > 0 followed by the explicit tensor shape, making complete shape [4,5])"),
    (CONFIGS['unbatched'].replace(param('RESHAPE_IO_LAYERS', 'yes'), ''),
     "model 'm', tensor 'INPUT0': the model expects 2 dimensions (shape [1,4]) but the model configuration specifies 2 dimensions (shape [-1,4])"),
    (CONFIGS['unbatched'].replace('dims: [ -1, 4 ] }, { name: "INPUT1"', 'dims: [ -2, 4 ] }, { name: "INPUT1"'),
     "model input 'INPUT0' dimension must be integer >= 1, or -1 to indicate a variable-size dimension"),   # the core's check, first
    # RESHAPE_IO_LAYERS goes input by input as ValidateInputs does: INPUT0's shape is set before INPUT1's name is looked at
    (CONFIGS['unbatched'].replace('"INPUT1"', '"B"').replace('dims: [ -1, 4 ] }, { name: "B"', 'dims: [ -1, 4, 2 ] }, { name: "B"'),
     "model 'm', tensor 'INPUT0': RESHAPE_IO_LAYERS cannot give 3 dims to an input of rank 2"),
    (CONFIGS['unbatched'].replace('"INPUT1"', '"B"'), "unexpected inference input 'B', allowed inputs are: INPUT0, INPUT1"),
    (CONFIGS['fixed'] + param('NUM_STREAMS', 'Lots'), "expected the parameter 'NUM_STREAMS' to be either AUTO/NUMA/<int_value>, got lots"),
    (CONFIGS['fixed'] + param('INFERENCE_NUM_THREADS', 'two'), "expected the parameter 'INFERENCE_NUM_THREADS' to be a non-negative number, got two"),
    (CONFIGS['fixed'] + param('PERFORMANCE_HINT', 'FAST'), "expected the parameter 'PERFORMANCE_HINT' to be LATENCY/THROUGHPUT/CUMULATIVE_THROUGHPUT, got fast"),
    (CONFIGS['fixed'] + param('CPU_EXTENSION_PATH', '/nonexistent/libcustom.so'), 'openvino error in  loading custom CPU extensions : '),
    (CONFIGS['fixed'] + 'default_model_filename: "other.xml"\n', "unable to find '"),
    (CONFIGS['fixed'] + 'instance_group [{ kind: KIND_MODEL }]\n',
     "unable to load model 'm', Triton OpenVINO backend supports only Kind CPU and AUTO"),
])
def test_config_errors_fail_the_load_with_the_backends_words(tmp_path, cfg, error):
    write(tmp_path, 'm', cfg)
    with TritonServer(tmp_path, model_control_mode='explicit', load_models=['m']) as s:
        failures = s.start()
        assert 'm' in failures and error in failures['m'], failures


def test_missing_openvino_says_which_extra(monkeypatch):
    import sys, triton_mini.openvino_backend as ob
    monkeypatch.setitem(sys.modules, 'openvino', None)
    with pytest.raises(Exception, match=r"pip install 'triton-mini\[openvino\]'"): ob._openvino()


def test_served_over_http_and_grpc_with_tritonclient(repo, mini_process):
    """The `triton-mini` command serves the IR and the ONNX model to Triton's own HTTP and gRPC clients: batched (one
    request, then two concurrent ones the dynamic batcher may join) and unbatched (RESHAPE_IO_LAYERS)."""
    import tritonclient.http as httpclient, tritonclient.grpc as grpcclient
    s = mini_process(repo, '--model-control-mode=explicit', '--load-model=add_sub', '--load-model=dense', '--load-model=unbatched')
    x, y = rows(3, seed=4)
    d = np.random.default_rng(5).standard_normal((6, 5)).astype(np.float32)
    own, want, tolerance = dense_answers(repo, d)
    assert np.allclose(own, want, atol=tolerance)
    want = own   # served: OpenVINO's own answer, whatever precision this CPU gives it
    for module, port in ((httpclient, s.http_port), (grpcclient, s.grpc_port)):
        c = module.InferenceServerClient(f'127.0.0.1:{port}')
        ins = []
        for name, arr in (('INPUT0', x), ('INPUT1', y)):
            ins.append(module.InferInput(name, list(arr.shape), 'FP32')); ins[-1].set_data_from_numpy(arr)
        r = c.infer('add_sub', ins)
        assert np.array_equal(r.as_numpy('OUTPUT0'), x + y) and np.array_equal(r.as_numpy('OUTPUT1'), x - y), module.__name__
        r = c.infer('unbatched', ins)
        assert np.array_equal(r.as_numpy('OUTPUT0'), x + y) and np.array_equal(r.as_numpy('OUTPUT1'), x - y), module.__name__

        def dense(part):               # a client per thread: tritonclient.http's gevent client stays in its thread
            i = module.InferInput('x', list(part.shape), 'FP32'); i.set_data_from_numpy(part)
            return module.InferenceServerClient(f'127.0.0.1:{port}').infer('dense', [i]).as_numpy('y')
        assert np.allclose(dense(d), want, atol=1e-6), module.__name__
        with ThreadPoolExecutor(2) as pool: halves = list(pool.map(dense, (d[:2], d[2:])))
        assert np.allclose(np.concatenate(halves), want, atol=1e-6), module.__name__
    i = httpclient.InferInput('x', [6, 5], 'FP32'); i.set_data_from_numpy(d, binary_data=False)           # JSON tensors too
    assert np.allclose(httpclient.InferenceServerClient(f'127.0.0.1:{s.http_port}').infer('dense', [i]).as_numpy('y'), want, atol=1e-6)
    status, _, body = http(s.http_port, 'GET', '/v2/models/add_sub/config')
    assert status == 200 and json.loads(body)['backend'] == 'openvino'


def laid_out(model):
    "`model` with the layout NC on every input and output: a batch dimension the backend's auto-complete can see."
    for p in model.get_parameters(): p.set_layout(ov.Layout('NC'))
    for r in model.get_results(): r.set_layout(ov.Layout('NC'))
    return model


def test_auto_complete_serves_a_model_without_config(tmp_path, mini_process):
    """AutoCompleteConfig (src/openvino.cc): a bare model.xml is served by the `triton-mini` command; the config it
    shows is filled from the model. No layout: no batching, the full shape as dims. Layouts with N: max_batch_size 4
    (the default-max-batch-size), dynamic batching, dims without the batch. A dynamic row count without layout: every
    dim -1 (the whole-shape rule), which the backend's own dims check then refuses, as Triton's does."""
    import tritonclient.grpc as grpcclient
    for name, model in (('plain', add_sub()), ('batched', laid_out(add_sub()))):
        (tmp_path / name / '1').mkdir(parents=True)
        ov.save_model(model, tmp_path / name / '1' / 'model.xml')
    (tmp_path / 'rows' / '1').mkdir(parents=True)
    ov.save_model(add_sub(batch=-1), tmp_path / 'rows' / '1' / 'model.xml')
    s = mini_process(tmp_path, '--model-control-mode=explicit', '--load-model=plain', '--load-model=batched')
    configs = {n: json.loads(http(s.http_port, 'GET', f'/v2/models/{n}/config')[2]) for n in ('plain', 'batched')}
    plain, batched = configs['plain'], configs['batched']
    assert (plain['backend'], plain['max_batch_size'], 'dynamic_batching' in plain) == ('openvino', 0, False)
    assert [(t['name'], t['data_type'], [int(d) for d in t['dims']]) for t in plain['input'] + plain['output']] == \
        [(n, 'TYPE_FP32', [1, 4]) for n in ('INPUT0', 'INPUT1', 'OUTPUT0', 'OUTPUT1')]
    assert (batched['max_batch_size'], batched['dynamic_batching']['preferred_batch_size']) == (4, [4])
    assert [(t['name'], [int(d) for d in t['dims']]) for t in batched['input'] + batched['output']] == \
        [(n, [4]) for n in ('INPUT0', 'INPUT1', 'OUTPUT0', 'OUTPUT1')]
    x, y = rows(3, seed=6)
    c = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}')
    ins = []
    for name, arr in (('INPUT0', x), ('INPUT1', y)):
        ins.append(grpcclient.InferInput(name, list(arr.shape), 'FP32')); ins[-1].set_data_from_numpy(arr)
    r = c.infer('batched', ins)
    assert np.array_equal(r.as_numpy('OUTPUT0'), x + y) and np.array_equal(r.as_numpy('OUTPUT1'), x - y)
    status, _, body = http(s.http_port, 'POST', '/v2/repository/models/rows/load', {})
    assert status == 400 and ("model 'rows', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,4]) but the model "
                              "configuration specifies 2 dimensions (shape [-1,-1])") in json.loads(body)['error']
    assert "autofilled max_batch_size to 4 for model 'batched' since batching is supported" in s.log()


def test_auto_complete_keeps_what_the_config_says(tmp_path):
    "Only missing inputs or outputs are filled; a written max_batch_size on a layout-less model stays (a warning, no failure)."
    from triton_mini.config_parser import parse_config
    from triton_mini.openvino_backend import OpenVINOBackend
    (tmp_path / 'm' / '1').mkdir(parents=True); (tmp_path / 'm' / '2').mkdir()
    ov.save_model(add_sub(), tmp_path / 'm' / '1' / 'model.xml')
    ov.save_model(laid_out(add_sub(width=3)), tmp_path / 'm' / '2' / 'model.xml')          # the newest version is read
    backend = OpenVINOBackend(default_max_batch_size=16)
    done = backend.auto_complete_config(parse_config('name: "m"\n' + io('input', [('INPUT0', 'TYPE_FP16', 3)])), tmp_path / 'm')
    assert (done.max_batch_size, done.dynamic_batching is not None) == (16, True)
    assert [(t.name, t.data_type, t.dims) for t in done.input] == [('INPUT0', 'TYPE_FP16', [3])]          # kept as written
    assert [(t.name, t.data_type, t.dims) for t in done.output] == [('OUTPUT0', 'TYPE_FP32', [3]), ('OUTPUT1', 'TYPE_FP32', [3])]
    (tmp_path / 'm' / '2' / 'model.xml').unlink(); (tmp_path / 'm' / '2' / 'model.bin').unlink()
    kept = backend.auto_complete_config(parse_config('name: "m"\nmax_batch_size: 8\n'), tmp_path / 'm')
    assert (kept.max_batch_size, kept.dynamic_batching, [t.dims for t in kept.input]) == (8, None, [[4], [4]])
    assert backend.auto_complete_config(parse_config('name: "m"'), tmp_path / 'nothing') .input == []        # no model file: left alone


def test_disable_auto_complete_config_needs_the_config(tmp_path):
    "With --disable-auto-complete-config the backend fills nothing: a bare model.xml does not even reach it (the poll fails)."
    (tmp_path / 'm' / '1').mkdir(parents=True)
    ov.save_model(add_sub(), tmp_path / 'm' / '1' / 'model.xml')
    with TritonServer(tmp_path, strict_model_config=True) as s:
        failures = s.start()
        assert failures == {'m': "failed to load 'm', failed to poll from model repository"}


@pytest.mark.parametrize('side', ['input', 'output'])
def test_each_tensor_is_checked_whole_before_the_next(side):
    "ValidateInputs/ValidateOutputs check one tensor's name, type and dims before the next's: the first bad dims win."
    from triton_mini.config_parser import parse_config
    from triton_mini.openvino_backend import configure_model, openvino_options
    good = {'input': [('INPUT0', 'TYPE_FP32', '1, 4'), ('INPUT1', 'TYPE_FP32', '1, 4')],
            'output': [('OUTPUT0', 'TYPE_FP32', '1, 4'), ('OUTPUT1', 'TYPE_FP32', '1, 4')]}
    first = 'INPUT0' if side == 'input' else 'OUTPUT0'
    good[side] = [(first, 'TYPE_FP32', '1, 5'), ('UNKNOWN', 'TYPE_FP32', '1, 4')]
    cfg = parse_config('name: "m"\nmax_batch_size: 0\n' + io('input', good['input']) + io('output', good['output']))
    with pytest.raises(Exception, match=rf"model 'm', tensor '{first}': the model expects 2 dimensions \(shape \[1,4\]\)"):
        configure_model(ov, add_sub(), cfg, openvino_options(cfg))
