"""Triton's PyTorch backend (nbs/04e_pytorch_backend.ipynb) on TorchScript models made here at test time (no weights
committed): a linear layer, a two-input model named by the INPUT__<i> convention, a model configured by forward()'s
argument names, a tuple-returning model (OUTPUT__<i> by position, or config order), a List[str] model (BYTES), and a
dict-returning model, which Triton's TorchScript path refuses, and a sequence model whose START and CORRID controls
are forward()'s arguments. Served in process and by the `triton-mini` command to
tritonclient over HTTP and gRPC; every answer is compared with calling the module directly. Error texts: the backend's
src/pt/model_instance_state.cc and model_state.cc, libtorch_utils.cc (ParseBoolValue/ParseIntValue). The real Triton
of the oracle (PyPI's nvidia-pytriton) ships without the PyTorch backend, so the module itself is the reference."""
import json
from typing import Dict, List, Tuple

import numpy as np
import pytest

torch = pytest.importorskip('torch')

from triton_mini.server import TritonServer
from triton_servers import http


class TwoInputs(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a * 2 - b


class Named(torch.nn.Module):
    def forward(self, values: torch.Tensor, offset: torch.Tensor) -> torch.Tensor:
        return values + offset


class Pair(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        return x.sum(dim=1, keepdim=True), (x * x).to(torch.float64)


class Dict_(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> Dict[str, torch.Tensor]:
        return {'double': x * 2, 'neg': -x}


class DictIn(torch.nn.Module):
    def forward(self, inputs: Dict[str, torch.Tensor]) -> torch.Tensor:
        return inputs['left'] - inputs['right']


class Words(torch.nn.Module):
    def forward(self, words: List[str]) -> List[str]:
        return [w.upper() + '!' for w in words]


torch.manual_seed(1)
LINEAR = torch.jit.script(torch.nn.Linear(5, 3).eval())
MODULES = {'linear': LINEAR, 'two': torch.jit.script(TwoInputs()), 'named': torch.jit.script(Named()),
           'pair': torch.jit.script(Pair()), 'dict': torch.jit.script(Dict_()), 'dictin': torch.jit.script(DictIn()),
           'words': torch.jit.script(Words()),
           'traced': torch.jit.trace(torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.ReLU()).eval(), torch.randn(2, 5))}


def io(kind, items):
    return f'{kind} [' + ', '.join(f'{{ name: "{n}" data_type: {t} dims: [ {d} ] }}' for n, t, d in items) + ']\n'


CONFIGS = {
    'linear': 'platform: "pytorch_libtorch"\nmax_batch_size: 16\n' + io('input', [('INPUT__0', 'TYPE_FP32', 5)]) + io('output', [('OUTPUT__0', 'TYPE_FP32', 3)])
              + 'dynamic_batching { max_queue_delay_microseconds: 100000 }\ninstance_group [{ count: 2 kind: KIND_CPU }]\n',
    'two': 'backend: "pytorch"\nmax_batch_size: 8\n' + io('input', [('INPUT__1', 'TYPE_FP32', 2), ('INPUT__0', 'TYPE_FP32', 2)]) + io('output', [('OUTPUT__0', 'TYPE_FP32', 2)]),
    'named': 'backend: "pytorch"\nmax_batch_size: 8\n' + io('input', [('offset', 'TYPE_INT64', 1), ('values', 'TYPE_INT64', 3)]) + io('output', [('sum', 'TYPE_INT64', 3)]),
    'pair': 'backend: "pytorch"\nmax_batch_size: 8\n' + io('input', [('x', 'TYPE_FP32', 3)]) + io('output', [('SQUARES__1', 'TYPE_FP64', 3), ('TOTAL__0', 'TYPE_FP32', 1)]),
    'pair_ordered': 'backend: "pytorch"\nmax_batch_size: 8\n' + io('input', [('x', 'TYPE_FP32', 3)]) + io('output', [('total', 'TYPE_FP32', 1), ('squares', 'TYPE_FP64', 3)]),
    'dict': 'backend: "pytorch"\nmax_batch_size: 8\n' + io('input', [('INPUT__0', 'TYPE_FP32', 2)]) + io('output', [('double', 'TYPE_FP32', 2), ('neg', 'TYPE_FP32', 2)]),
    'dictin': 'backend: "pytorch"\nmax_batch_size: 0\n' + io('input', [('right', 'TYPE_FP32', 2), ('left', 'TYPE_FP32', 2)]) + io('output', [('OUTPUT__0', 'TYPE_FP32', 2)]),
    'words': 'backend: "pytorch"\nmax_batch_size: 0\n' + io('input', [('INPUT__0', 'TYPE_STRING', -1)]) + io('output', [('OUTPUT__0', 'TYPE_STRING', -1)]),
    'traced': 'backend: "pytorch"\nmax_batch_size: 8\nparameters [{ key: "INFERENCE_MODE" value: { string_value: "false" } }, '
              '{ key: "DISABLE_OPTIMIZED_EXECUTION" value: { string_value: "true" } }, { key: "ENABLE_JIT_PROFILING" value: { string_value: "off" } }, '
              '{ key: "INTRA_OP_THREAD_COUNT" value: { string_value: "1" } }, { key: "ENABLE_CACHE_CLEANING" value: { string_value: "1" } }]\n'
              + io('input', [('INPUT__0', 'TYPE_FP32', 5)]) + io('output', [('OUTPUT__0', 'TYPE_FP32', 4)]),
}


def write(root, name, cfg, module=None):
    (root / name / '1').mkdir(parents=True)
    (module or MODULES[name.split('_')[0]]).save(str(root / name / '1' / 'model.pt'))
    (root / name / 'config.pbtxt').write_text(cfg)


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    root = tmp_path_factory.mktemp('pytorch') / 'models'
    for name, cfg in CONFIGS.items(): write(root, name, cfg)
    return root


@pytest.fixture(scope='module')
def server(repo):
    with TritonServer(repo) as s:
        assert s.start() == {}
        yield s


def direct(name, *args):
    with torch.no_grad(): return MODULES[name](*args)


def test_linear_batched_requests_run_as_one_forward(server):
    from concurrent.futures import ThreadPoolExecutor
    x = np.random.default_rng(0).standard_normal((12, 5)).astype(np.float32)
    before = server.statistics('linear')['model_stats'][0]['execution_count']
    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(lambda i: server.infer('linear', {'INPUT__0': x[i * 3:i * 3 + 3]})['OUTPUT__0'], range(4)))
    assert np.allclose(np.concatenate(got), direct('linear', torch.from_numpy(x)).numpy(), atol=1e-6)
    stats = server.statistics('linear')['model_stats'][0]
    assert stats['inference_count'] >= 12 and stats['execution_count'] - before < 4      # at least two requests shared a forward


def test_named_index_inputs_in_any_config_order(server):
    a, b = np.arange(4, dtype=np.float32).reshape(2, 2), np.ones((2, 2), np.float32)
    out = server.infer('two', {'INPUT__0': a, 'INPUT__1': b})['OUTPUT__0']
    assert np.array_equal(out, direct('two', torch.from_numpy(a), torch.from_numpy(b)).numpy())


def test_forward_argument_names(server):
    v, o = np.arange(6, dtype=np.int64).reshape(2, 3), np.array([[10], [100]], np.int64)
    out = server.infer('named', {'values': v, 'offset': o})['sum']
    assert out.dtype == np.int64 and np.array_equal(out, direct('named', torch.from_numpy(v), torch.from_numpy(o)).numpy())


@pytest.mark.parametrize('name, total, squares', [('pair', 'TOTAL__0', 'SQUARES__1'), ('pair_ordered', 'total', 'squares')])
def test_tuple_outputs_by_index_or_config_order(server, name, total, squares):
    x = np.random.default_rng(1).standard_normal((3, 3)).astype(np.float32)
    t, s = direct('pair', torch.from_numpy(x))
    out = server.infer(name, {'x': x})
    assert np.allclose(out[total], t.numpy()) and out[squares].dtype == np.float64 and np.allclose(out[squares], s.numpy())
    assert list(server.infer(name, {'x': x}, outputs=[squares]).outputs) == [squares]     # only what was asked for


def test_dict_input(server):
    l, r = np.array([5, 7], np.float32), np.array([1, 2], np.float32)
    out = server.infer('dictin', {'left': l, 'right': r})['OUTPUT__0']
    assert np.array_equal(out, direct('dictin', {'left': torch.from_numpy(l), 'right': torch.from_numpy(r)}).numpy())


def test_dict_output_is_refused_as_triton_refuses_it(server):
    with pytest.raises(Exception, match='PyTorch execute failure: output must be of type Tensor, List\\[str\\] or Tuple containing one of '
                                        'these two types. It should not be a List / Dictionary of Tensors or a Scalar'):
        server.infer('dict', {'INPUT__0': np.ones((1, 2), np.float32)})
    assert server.statistics('dict')['model_stats'][0]['inference_stats']['fail']['count'] == 1


def test_bytes_as_list_of_strings(server):
    words = np.array([b'triton', b'mini', 'ü'.encode()], dtype=object)
    out = server.infer('words', {'INPUT__0': words})['OUTPUT__0']
    assert out.tolist() == [w.encode() for w in direct('words', ['triton', 'mini', 'ü'])]


def test_documented_parameters_on_a_traced_model(server):
    x = np.random.default_rng(2).standard_normal((4, 5)).astype(np.float32)
    assert np.allclose(server.infer('traced', {'INPUT__0': x})['OUTPUT__0'], direct('traced', torch.from_numpy(x)).numpy(), atol=1e-6)
    assert torch.get_num_threads() == 1          # INTRA_OP_THREAD_COUNT: the first model that sets it wins, process-wide


def param(key, value): return f'parameters [{{ key: "{key}" value: {{ string_value: "{value}" }} }}]\n'


@pytest.mark.parametrize('module, cfg, error', [
    ('two', CONFIGS['two'].replace(", { name: \"INPUT__0\" data_type: TYPE_FP32 dims: [ 2 ] }", ''),
     "unable to load model 'm', configuration expects 1 inputs, model provides 2"),
    ('linear', CONFIGS['linear'].replace('TYPE_FP32 dims: [ 5 ]', 'TYPE_UINT32 dims: [ 5 ]'), "unsupported datatype TYPE_UINT32 for input 'INPUT__0' for model 'm'"),
    ('words', CONFIGS['words'].replace('max_batch_size: 0', 'max_batch_size: 4').replace('TYPE_STRING dims: [ -1 ] }]\noutput', 'TYPE_STRING dims: [ 1 ] }]\noutput'),
     "Triton only supports 1 dimensional List of String as input for 'INPUT__0' for model 'm'"),
    ('linear', CONFIGS['linear'] + param('INFERENCE_MODE', 'maybe'), "failed to convert 'maybe' to boolean"),
    ('linear', CONFIGS['linear'] + param('INTER_OP_THREAD_COUNT', 'many'), "failed to convert 'many' to integral number"),
    ('linear', CONFIGS['linear'] + param('ENABLE_NVFUSER', 'true'), 'ENABLE_NVFUSER needs a CUDA device'),
    ('linear', CONFIGS['linear'] + 'default_model_filename: "other.pt"\n', "unable to find '"),
])
def test_config_errors_fail_the_load_with_the_backends_words(tmp_path, module, cfg, error):
    write(tmp_path, 'm', cfg, MODULES[module])
    with TritonServer(tmp_path, model_control_mode='explicit', load_models=['m']) as s:
        failures = s.start()
        assert 'm' in failures and error in failures['m'], failures


def test_output_index_and_dtype_errors_at_execution(tmp_path):
    write(tmp_path, 'idx', CONFIGS['linear'].replace('OUTPUT__0', 'OUTPUT__3'), LINEAR)
    write(tmp_path, 'dt', CONFIGS['linear'].replace('TYPE_FP32 dims: [ 3 ]', 'TYPE_FP64 dims: [ 3 ]'), LINEAR)
    with TritonServer(tmp_path) as s:
        assert s.start() == {}
        x = {'INPUT__0': np.ones((1, 5), np.float32)}
        with pytest.raises(Exception, match="The output OUTPUT__3 in the model configuration refers to an output index which doesn't exist. This model has 1 outputs"):
            s.infer('idx', x)
        with pytest.raises(Exception, match="configuration expects datatype TYPE_FP64 for output 'OUTPUT__0', model provides TYPE_FP32"):
            s.infer('dt', x)


def test_missing_torch_says_which_extra(monkeypatch):
    import sys, triton_mini.pytorch_backend as pb
    monkeypatch.setitem(sys.modules, 'torch', None)
    with pytest.raises(Exception, match=r"pip install 'triton-mini\[pytorch\]'"): pb._torch()


def test_served_over_http_and_grpc_with_tritonclient(repo, mini_process):
    """The `triton-mini` command serves TorchScript models to Triton's own HTTP and gRPC clients: a batched model (rows
    of one request, then of two concurrent requests), an unbatched two-input one, and List[str] as BYTES."""
    import tritonclient.http as httpclient, tritonclient.grpc as grpcclient
    from concurrent.futures import ThreadPoolExecutor
    s = mini_process(repo, '--model-control-mode=explicit', '--load-model=linear', '--load-model=two', '--load-model=words',
                     '--load-model=dictin')
    x = np.random.default_rng(3).standard_normal((7, 5)).astype(np.float32)
    a, b = np.full((2, 2), 3, np.float32), np.eye(2, dtype=np.float32)
    l, r = np.array([5, 7], np.float32), np.array([1, 2], np.float32)
    for module, port in ((httpclient, s.http_port), (grpcclient, s.grpc_port)):
        c = module.InferenceServerClient(f'127.0.0.1:{port}')

        def linear(rows):              # a client per thread: tritonclient.http's gevent client stays in its thread
            i = module.InferInput('INPUT__0', list(rows.shape), 'FP32'); i.set_data_from_numpy(rows)
            return module.InferenceServerClient(f'127.0.0.1:{port}').infer('linear', [i]).as_numpy('OUTPUT__0')
        assert np.allclose(linear(x), direct('linear', torch.from_numpy(x)).numpy(), atol=1e-6), module.__name__
        with ThreadPoolExecutor(2) as pool: halves = list(pool.map(linear, (x[:3], x[3:])))
        assert np.allclose(np.concatenate(halves), direct('linear', torch.from_numpy(x)).numpy(), atol=1e-6), module.__name__
        ins = []
        for name, arr in (('INPUT__0', a), ('INPUT__1', b)):
            ins.append(module.InferInput(name, [2, 2], 'FP32')); ins[-1].set_data_from_numpy(arr)
        assert np.array_equal(c.infer('two', ins).as_numpy('OUTPUT__0'), direct('two', torch.from_numpy(a), torch.from_numpy(b)).numpy())
        ins = []
        for name, arr in (('left', l), ('right', r)):                  # max_batch_size 0: the shapes are the model's own
            ins.append(module.InferInput(name, [2], 'FP32')); ins[-1].set_data_from_numpy(arr)
        assert np.array_equal(c.infer('dictin', ins).as_numpy('OUTPUT__0'),
                              direct('dictin', {'left': torch.from_numpy(l), 'right': torch.from_numpy(r)}).numpy())
        w = module.InferInput('INPUT__0', [3], 'BYTES'); w.set_data_from_numpy(np.array([b'a', b'bc', 'ü'.encode()], dtype=object))
        assert c.infer('words', [w]).as_numpy('OUTPUT__0').tolist() == [v.encode() for v in direct('words', ['a', 'bc', 'ü'])]
    i = httpclient.InferInput('INPUT__0', [2, 2], 'FP32'); i.set_data_from_numpy(a, binary_data=False)      # JSON tensors too
    j = httpclient.InferInput('INPUT__1', [2, 2], 'FP32'); j.set_data_from_numpy(b, binary_data=False)
    got = httpclient.InferenceServerClient(f'127.0.0.1:{s.http_port}').infer('two', [i, j]).as_numpy('OUTPUT__0')
    assert np.array_equal(got, direct('two', torch.from_numpy(a), torch.from_numpy(b)).numpy())
    status, _, body = http(s.http_port, 'GET', '/v2/models/linear/config')
    assert status == 200 and json.loads(body)['platform'] == 'pytorch_libtorch' and json.loads(body)['backend'] == 'pytorch'


def test_parameters_are_logged_once_per_version_as_triton_does(tmp_path, caplog):
    "ModelState::ParseParameters logs per model version (the libtorch QA counts 3 for 3 versions), not per instance."
    import logging
    cfg = ('backend: "pytorch"\nmax_batch_size: 8\nversion_policy: { all { }}\ninstance_group [{ count: 2 kind: KIND_CPU }]\n'
           'parameters [{ key: "DISABLE_CUDNN" value: { string_value: "true" } }]\n'
           + io('input', [('INPUT__0', 'TYPE_FP32', 5)]) + io('output', [('OUTPUT__0', 'TYPE_FP32', 3)]))
    write(tmp_path, 'linear', cfg)
    (tmp_path / 'linear' / '2').mkdir()
    MODULES['linear'].save(str(tmp_path / 'linear' / '2' / 'model.pt'))
    with caplog.at_level(logging.INFO, logger='triton_mini.pytorch_backend'), TritonServer(tmp_path) as s:
        assert s.start() == {}
    said = [r.getMessage() for r in caplog.records if r.name == 'triton_mini.pytorch_backend']
    assert said.count("cuDNN is disabled for model instance 'linear'") == 2, said
    assert said.count("Inference Mode is enabled for model instance 'linear'") == 2, said


class Tagged(torch.nn.Module):
    def forward(self, x: torch.Tensor, start: torch.Tensor, corrid: torch.Tensor) -> torch.Tensor:
        return x + 100 * start + 1000 * corrid


def sequence_config(corrid_type='TYPE_INT32', start='START__1', corrid='CORRID__2'):
    return ('backend: "pytorch"\nmax_batch_size: 4\nsequence_batching { control_input [\n'
            f'  {{ name: "{start}" control [{{ kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] }}] }},\n'
            f'  {{ name: "{corrid}" control [{{ kind: CONTROL_SEQUENCE_CORRID data_type: {corrid_type} }}] }} ] }}\n'
            + io('input', [('INPUT__0', 'TYPE_INT32', 1)]) + io('output', [('OUTPUT__0', 'TYPE_INT32', 1)]))


def test_sequence_control_inputs_are_forward_arguments_at_their_index(tmp_path):
    "A sequence model's controls count among forward()'s arguments and are filled in per request (was: 'expects 1 inputs, model provides 3')."
    write(tmp_path, 'tag', sequence_config(), torch.jit.script(Tagged()))
    with TritonServer(tmp_path) as s:
        assert s.start() == {}
        tag = lambda v, **kw: s.infer('tag', {'INPUT__0': np.array([[v]], np.int32)}, sequence_id=7, **kw)['OUTPUT__0'].item()
        assert [tag(1, sequence_start=True), tag(2), tag(3, sequence_end=True)] == [7101, 7002, 7003]


@pytest.mark.parametrize('cfg, error', [
    (sequence_config('TYPE_UINT32'), "input 'CORRID__2' type 'TYPE_UINT32' is not supported by PyTorch."),   # L0_libtorch_io_types greps it
    (sequence_config('TYPE_STRING'), "input 'CORRID__2' type 'TYPE_STRING' is not supported by PyTorch."),
    (sequence_config(start='START'), "input 'START' does not follow <name>__<index> naming convention."),
    (sequence_config(corrid='CORRID__x'), "input 'CORRID__x' does not follow <name>__<index> naming convention."),
])
def test_sequence_controls_are_checked_before_forward_as_the_backend_does(tmp_path, cfg, error):
    write(tmp_path, 'm', cfg, torch.jit.script(Tagged()))
    with TritonServer(tmp_path, model_control_mode='explicit', load_models=['m']) as s:
        failures = s.start()
        assert 'm' in failures and error in failures['m'], failures


class Accumulate(torch.nn.Module):
    def forward(self, INPUT__0: torch.Tensor, STATE_IN__1: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        total = INPUT__0 + STATE_IN__1
        return total * 10, total


class AccumulateNamed(torch.nn.Module):
    def forward(self, value: torch.Tensor, carried: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        total = value + carried
        return total * 10, total


def state_config(inp='INPUT__0', out='OUTPUT__0', state_in='STATE_IN__1', state_out='STATE_OUT__1', outputs=()):
    return ('backend: "pytorch"\nmax_batch_size: 4\nsequence_batching { state [ '
            f'{{ input_name: "{state_in}" output_name: "{state_out}" data_type: TYPE_INT32 dims: [ 1 ] }} ] }}\n'
            + io('input', [(inp, 'TYPE_INT32', 1)]) + io('output', [(out, 'TYPE_INT32', 1), *outputs]))


@pytest.mark.parametrize('module, cfg', [
    (Accumulate(), state_config()),                                                  # <name>__<index>
    (AccumulateNamed(), state_config('value', 'OUTPUT__0', 'carried', 'STATE__1')),  # forward()'s argument names
], ids=['named_index', 'forward_argument'])
def test_implicit_state_is_an_argument_and_an_output_carried_between_requests(tmp_path, module, cfg):
    """`sequence_batching.state`: one more forward() argument (counted as ValidateInputs counts it) and one more output
    (always `<name>__<index>`), which the sequence batcher feeds back; two interleaved sequences keep their own."""
    write(tmp_path, 'acc', cfg, torch.jit.script(module))
    with TritonServer(tmp_path) as s:
        assert s.start() == {}
        name = next(i.name for i in s.model_config('acc').input)
        def add(seq, v, **kw):
            r = s.infer('acc', {name: np.array([[v]], np.int32)}, sequence_id=seq, **kw)
            return sorted(r.outputs), r['OUTPUT__0'].item()
        got = [add(1, 5, sequence_start=True), add(2, 100, sequence_start=True), add(1, 6), add(2, 1), add(1, 7, sequence_end=True)]
        assert [v for _, v in got] == [50, 1000, 110, 1010, 180]
        assert all(names == ['OUTPUT__0'] for names, _ in got)   # the state stays inside the server


def test_a_state_also_listed_as_an_output_reaches_the_client(tmp_path):
    "Both in `output` and in `state`: the backend returns it to the client too (libtorch.cc's model_outputs_ comment)."
    write(tmp_path, 'acc', state_config(outputs=[('STATE_OUT__1', 'TYPE_INT32', 1)]), torch.jit.script(Accumulate()))
    with TritonServer(tmp_path) as s:
        assert s.start() == {}
        first = s.infer('acc', {'INPUT__0': np.array([[3]], np.int32)}, sequence_id=4, sequence_start=True)
        second = s.infer('acc', {'INPUT__0': np.array([[4]], np.int32)}, sequence_id=4, sequence_end=True)
        assert (first['STATE_OUT__1'].item(), second['STATE_OUT__1'].item(), second['OUTPUT__0'].item()) == (3, 7, 70)


def test_a_model_without_the_state_argument_fails_to_load_with_the_count(tmp_path):
    write(tmp_path, 'acc', state_config(), LINEAR)
    with TritonServer(tmp_path, model_control_mode='explicit', load_models=['acc']) as s:
        failures = s.start()
        assert "unable to load model 'acc', configuration expects 2 inputs, model provides 1" in failures['acc'], failures


# ---------------------------------------------------------------------------------------------------------------
# Ragged batching: a flat ragged input, batch inputs as forward() arguments, a scattered batch output

class Offsets(torch.nn.Module):
    "Each request's row: its offset in the flat batch and its element count (from two batch inputs)."
    def forward(self, VALUES__0: torch.Tensor, STARTS__1: torch.Tensor, COUNTS__2: torch.Tensor) -> torch.Tensor:
        total = VALUES__0.sum().to(torch.int32).expand(COUNTS__2.shape[0])
        return torch.stack([STARTS__1[:-1], COUNTS__2, total], dim=1)


class Scaled(torch.nn.Module):
    def forward(self, x: torch.Tensor, n: torch.Tensor) -> torch.Tensor:
        return x * n.max()


def ragged_config(inp, batch_inputs, out, out_dims, batch_output=''):
    bis = ', '.join(f'{{ kind: {k} target_name: "{t}" data_type: {d} source_input: "{inp}" }}' for k, t, d in batch_inputs)
    return ('backend: "pytorch"\nmax_batch_size: 4\n'
            f'input [ {{ name: "{inp}" data_type: TYPE_FP32 dims: [ -1 ] allow_ragged_batch: true }} ]\n'
            f'batch_input [ {bis} ]\n' + io('output', [(out, 'TYPE_FP32' if batch_output else 'TYPE_INT32', out_dims)]) + batch_output)


def test_batch_inputs_are_arguments_at_their_index_and_the_ragged_input_is_flat(tmp_path):
    cfg = ragged_config('VALUES__0', [('BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO', 'STARTS__1', 'TYPE_INT32'),
                                      ('BATCH_ELEMENT_COUNT', 'COUNTS__2', 'TYPE_INT32')], 'OUT__0', 3)
    write(tmp_path, 'off', cfg.replace('data_type: TYPE_FP32 dims: [ -1 ] allow', 'data_type: TYPE_INT32 dims: [ -1 ] allow'),
          torch.jit.script(Offsets()))
    from triton_mini.backend import InferenceRequest, InstanceArgs
    from triton_mini.config_parser import parse_config
    from triton_mini.pytorch_backend import PyTorchInstance
    inst = PyTorchInstance(InstanceArgs('off', 1, tmp_path / 'off', parse_config((tmp_path / 'off' / 'config.pbtxt').read_text()), 'off_0'))
    assert inst.input_pos == {'VALUES__0': 0, 'STARTS__1': 1, 'COUNTS__2': 2} and inst.controls == []
    out = inst.execute([InferenceRequest('off', {'VALUES__0': np.ones((1, n), np.int32)}) for n in (2, 5, 1)])
    assert [o['OUT__0'].tolist() for o in out] == [[[0, 2, 8]], [[2, 5, 8]], [[7, 1, 8]]]


def test_batch_output_scattered_and_a_forgotten_batch_input_refused_with_the_count(tmp_path):
    scatter = 'batch_output [ { target_name: "y" kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: "x" } ]\n'
    write(tmp_path, 'sc', ragged_config('x', [('BATCH_MAX_ELEMENT_COUNT_AS_SHAPE', 'n', 'TYPE_FP32')], 'y', -1, scatter),
          torch.jit.script(Scaled()))
    write(tmp_path, 'bad', ragged_config('x', [], 'y', -1, scatter).replace('batch_input [  ]\n', ''), torch.jit.script(Scaled()))
    with TritonServer(tmp_path) as s:
        failures = s.start()
        assert failures.keys() == {'bad'} and "unable to load model 'bad', configuration expects 1 inputs, model provides 2" in failures['bad']
        # one request at a time: n is the batch input of shape [max element count], zeros here, so y is x * 0
        got = s.infer('sc', {'x': np.arange(3, dtype=np.float32).reshape(1, 3)})['y']
        assert got.shape == (1, 3) and got.tolist() == [[0, 0, 0]]
