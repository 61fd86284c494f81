"""triton_mini.tritonserver against Triton's documented in-process Python API (python/tritonserver in
triton-inference-server/core): its tutorial and Ray Serve's Triton example run with only the import changed,
and the argument names, defaults, return types and error classes are the package's."""
import asyncio, dataclasses, json, queue, textwrap
from pathlib import Path

import numpy
import numpy as np
import pytest

import triton_mini.tritonserver as tritonserver
from triton_mini.cli import example_repository
from triton_mini.errors import TritonError as CoreTritonError

REPO = str(example_repository())
STREAMER = Path(__file__).parent / 'models' / 'python_backend'

def write_model(repo:Path, name:str, config:str, model_py:str):
    (repo / name / '1').mkdir(parents=True)
    (repo / name / 'config.pbtxt').write_text(textwrap.dedent(config))
    (repo / name / '1' / 'model.py').write_text(textwrap.dedent(model_py))

@pytest.fixture
def server():
    s = tritonserver.Server(model_repository=REPO, model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    s.start(wait_until_ready=True)
    yield s
    s.stop()


# --- Triton's tutorial (Triton_Inference_Server_Python_API), only the import changed ---

def test_the_tutorial_snippet(capsys):
    server = tritonserver.Server(model_repository=REPO, model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    server.start(wait_until_ready=True)
    model = server.load("add_sub")
    outputs = []
    for response in model.infer(inputs={"INPUT0": np.array([[1, 2, 3, 4]], dtype=np.float32),
                                        "INPUT1": np.array([[1, 1, 1, 1]], dtype=np.float32)}):
        outputs.append({name: numpy.from_dlpack(tensor) for name, tensor in response.outputs.items()})
        assert response.final and response.error is None
    server.stop()
    assert [{k: v.tolist() for k, v in o.items()} for o in outputs] == [{'OUTPUT0': [[2, 3, 4, 5]], 'OUTPUT1': [[0, 1, 2, 3]]}]


# --- Ray Serve's "Serving models with Triton Server in Ray Serve", minus Ray (the deployment class as a plain class) ---
# The calls are those of triton-inference-server/tutorials, Triton_Inference_Server_Python_API/examples/rayserve/
# tritonserver_deployment.py (checked 2026-12-05): metadata(), models(), model(..).ready(), load(), infer(inputs=...)
# with nested lists, outputs[..].to_string_array() and numpy.from_dlpack(outputs[..]).

TEXT_MODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            prompt = pb_utils.get_input_tensor_by_name(r, "prompt").as_numpy().reshape(-1)[0]
            image = np.full((1, 8, 8, 3), len(prompt) * 10.0, dtype=np.float32)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("generated_image", image)]))
        return out
'''
IDENTITY = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                for r in requests]
'''

STRING_IDENTITY = '''
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("string_output",
                    pb_utils.get_input_tensor_by_name(r, "string_input").as_numpy())]) for r in requests]
'''

@pytest.fixture
def diffusion_repo(tmp_path):
    write_model(tmp_path, 'stable_diffusion', '''
        backend: "python"
        max_batch_size: 1
        input [{ name: "prompt" data_type: TYPE_STRING dims: [1] }]
        output [{ name: "generated_image" data_type: TYPE_FP32 dims: [8, 8, 3] }]''', TEXT_MODEL)
    write_model(tmp_path, 'identity', '''
        backend: "python"
        max_batch_size: 1
        input [{ name: "string_input" data_type: TYPE_STRING dims: [1] }]
        output [{ name: "string_output" data_type: TYPE_STRING dims: [1] }]''', STRING_IDENTITY)
    for name in ('text_encoder', 'vae'):
        write_model(tmp_path, name, '''
            backend: "python"
            input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
            output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]''', IDENTITY)
    return tmp_path

class TritonDeployment:   # Ray's example, with @serve.deployment/@serve.ingress and FastAPI removed
    def __init__(self, model_repository):
        self._triton_server = tritonserver
        self._triton_server = tritonserver.Server(
            model_repository=model_repository,
            model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
            log_info=False,
        )
        self._triton_server.start(wait_until_ready=True)
        self.metadata, self.models = self._triton_server.metadata(), self._triton_server.models()   # the example prints them

    def test(self, name: str) -> str:
        if not self._triton_server.model("identity").ready():
            self._test_model = self._triton_server.load("identity")

        output = []
        for response in self._test_model.infer(inputs={"string_input": [[name]]}):
            output.append(response.outputs["string_output"].to_string_array()[0][0])

        return "".join(output)

    def generate(self, prompt: str):
        if not self._triton_server.model("stable_diffusion").ready():
            try:
                self._triton_server.load("text_encoder")
                self._triton_server.load("vae")
                self._stable_diffusion = self._triton_server.load("stable_diffusion")
                if not self._stable_diffusion.ready():
                    raise Exception("Model not ready")
            except Exception as error:
                print(f"Error can't load stable diffusion model, {error}")
                return
        for response in self._stable_diffusion.infer(inputs={"prompt": [[prompt]]}):
            generated_image = (
                numpy.from_dlpack(response.outputs["generated_image"])
                .squeeze()
                .astype(numpy.uint8)
            )
            return generated_image

def test_the_ray_serve_example(diffusion_repo):
    d = TritonDeployment([str(diffusion_repo)])
    assert d.metadata['name'] == 'triton'
    assert {(n, m.state) for (n, _), m in d.models.items()} == {     # explicit mode: the index, nothing loaded yet
        ('identity', None), ('stable_diffusion', None), ('text_encoder', None), ('vae', None)}
    assert d.test("Theodore") == "Theodore"                            # the example's /identity endpoint
    image = d.generate("a cat")
    assert image.shape == (8, 8, 3) and image.dtype == np.uint8 and int(image[0, 0, 0]) == 50
    assert d.generate("hello").max() == 50          # the second call finds the model ready
    assert {k for k, m in d._triton_server.models(exclude_not_ready=True).items()} == {
        ('identity', 1), ('stable_diffusion', 1), ('text_encoder', 1), ('vae', 1)}
    d._triton_server.stop()


# --- Options and Server ---

TRITON_OPTION_FIELDS = [   # python/tritonserver/_api/_server.py, Options, in order
    'model_repository', 'server_id', 'model_control_mode', 'startup_models', 'strict_model_config', 'rate_limiter_mode',
    'rate_limiter_resources', 'pinned_memory_pool_size', 'cuda_memory_pool_sizes', 'cache_config', 'cache_directory',
    'min_supported_compute_capability', 'exit_on_error', 'strict_readiness', 'exit_timeout', 'buffer_manager_thread_count',
    'model_load_thread_count', 'model_load_retry_count', 'model_namespacing', 'enable_peer_access', 'log_file', 'log_info',
    'log_warn', 'log_error', 'log_format', 'log_verbose', 'metrics', 'gpu_metrics', 'cpu_metrics', 'metrics_interval',
    'backend_directory', 'repo_agent_directory', 'model_load_device_limits', 'backend_configuration', 'host_policies',
    'metrics_configuration']

def test_options_has_every_field_of_triton_with_its_defaults():
    o = tritonserver.Options()
    assert [f.name for f in dataclasses.fields(o)] == TRITON_OPTION_FIELDS
    assert (o.server_id, o.model_control_mode, o.exit_on_error, o.strict_readiness, o.exit_timeout, o.pinned_memory_pool_size,
            o.backend_directory, o.log_info, o.metrics) == ('triton', tritonserver.ModelControlMode.NONE, True, True, 30, 1 << 28,
                                                            '/opt/tritonserver/backends', False, True)

def test_gpu_options_are_accepted_and_ignored():
    s = tritonserver.Server(tritonserver.Options(
        model_repository=REPO, model_control_mode=tritonserver.ModelControlMode.EXPLICIT, startup_models=['add_sub'],
        cuda_memory_pool_sizes={0: 1 << 20}, min_supported_compute_capability=7.0, gpu_metrics=False,
        rate_limiter_mode=tritonserver.RateLimitMode.EXEC_COUNT,
        rate_limiter_resources=[tritonserver.RateLimiterResource('R', 1, 0)],
        model_load_device_limits=[tritonserver.ModelLoadDeviceLimit(tritonserver.InstanceGroupKind.GPU, 0, 0.5)],
        host_policies={'gpu_0': {'numa-node': '0'}}, backend_configuration={'python': {'shm-default-byte-size': '1'}}))
    assert s.start(wait_until_ready=True) is s
    assert list(s.models(exclude_not_ready=True)) == [('add_sub', 1)]
    s.stop()

def test_repo_agent_directory_is_the_one_named_when_an_agent_is_missing(tmp_path, caplog):
    "A model naming a repository agent fails to poll (Triton's wheel has no agent; test_cli compares with it), naming repo_agent_directory."
    write_model(tmp_path, 'summed', 'backend: "python"\nmodel_repository_agents { agents [ { name: "checksum" } ] }\n', 'raise RuntimeError("never imported")\n')
    s = tritonserver.Server(model_repository=str(tmp_path), exit_on_error=False, repo_agent_directory='/nowhere/repoagents').start()
    try:
        assert list(s.models(exclude_not_ready=True)) == []
        assert "unable to find 'libtritonrepoagent_checksum.so' for repo agent 'checksum', searched: /nowhere/repoagents" in caplog.text
    finally: s.stop()

def test_server_lifecycle_errors():
    s = tritonserver.Server(model_repository=REPO, model_control_mode=tritonserver.ModelControlMode.EXPLICIT)
    for call in (s.live, s.ready, s.metadata, s.models, lambda: s.model('add_sub'), s.stop):
        with pytest.raises(tritonserver.InvalidArgumentError, match='Server not started'): call()
    s.start()
    with pytest.raises(tritonserver.InvalidArgumentError, match='already started'): s.start()
    assert s.live() and s.ready() and s.metadata()['name'] == 'triton'
    assert s.stop() is None
    with pytest.raises(tritonserver.InvalidArgumentError): tritonserver.Server().start()   # no repository

def test_a_failed_model_fails_start_unless_exit_on_error_is_off(tmp_path):
    write_model(tmp_path, 'broken', 'backend: "python"\n', 'raise RuntimeError("no")\n')
    with pytest.raises(tritonserver.InternalError, match='failed to load all models'):
        tritonserver.Server(model_repository=str(tmp_path)).start()
    s = tritonserver.Server(model_repository=str(tmp_path), exit_on_error=False).start()
    assert s.live() and not s.ready()          # strict readiness: a model failed
    s.stop()
    with pytest.raises(tritonserver.UnavailableError, match='Timeout before ready'):
        s.start(wait_until_ready=True, polling_interval=0.01, timeout=0.1)
    s.stop()   # started, though not ready (as in Triton)
    s = tritonserver.Server(model_repository=str(tmp_path), exit_on_error=False, strict_readiness=False).start(wait_until_ready=True)
    assert s.ready() and s.models()[('broken', 1)].state == 'UNAVAILABLE'
    s.stop()


# --- models, load, unload ---

def test_models_model_load_and_unload(server):
    models = server.models()
    assert isinstance(models, dict) and ('add_sub', -1) in models and models[('add_sub', -1)].state is None
    assert not server.model('add_sub').ready()
    model = server.load('add_sub')
    assert isinstance(model, tritonserver.Model) and (model.name, model.version) == ('add_sub', -1) and model.ready()
    assert server.models()[('add_sub', 1)].state == 'READY' and server.models()['add_sub'].version == -1
    with pytest.raises(KeyError, match='Unknown Model'): server.models()['nope']
    assert server.unload('add_sub', wait_until_unloaded=True) is None
    assert server.models()[('add_sub', 1)].state == 'UNAVAILABLE' and not model.ready()
    server.unload(server.load('add_sub'))       # a Model object works too
    with pytest.raises(tritonserver.TritonError): server.load('nope')

def test_load_with_a_config_override(server):
    cfg = json.loads(json.dumps(server.load('add_sub').config()))
    cfg['max_batch_size'] = 2
    model = server.load('add_sub', parameters={'config': json.dumps(cfg)})
    assert model.config()['max_batch_size'] == 2
    with pytest.raises(tritonserver.InvalidArgumentError, match="'bogus'"): server.load('add_sub', parameters={'bogus': 1})

def test_model_queries(server):
    model = server.load('add_sub')
    md = model.metadata()
    assert md['name'] == 'add_sub' and md['versions'] == ['1'] and md['inputs'][0] == {'name': 'INPUT0', 'datatype': 'FP32', 'shape': [-1, 4]}
    assert model.config()['backend'] == 'python'
    assert model.statistics()['model_stats'][0]['name'] == 'add_sub'
    assert model.batch_properties() is tritonserver.ModelBatchFlag.FIRST_DIM
    assert model.transaction_properties() is tritonserver.ModelTxnPropertyFlag.ONE_TO_ONE
    assert str(model) == "{'name': 'add_sub', 'version': -1, 'state': None}"
    with pytest.raises(tritonserver.NotFoundError): server.model('nope').metadata()
    assert not server.model('nope').ready()


# --- inference ---

def test_create_request_then_infer(server):
    model = server.load('add_sub')
    request = model.create_request(request_id='7', parameters={'p': 1})
    request.inputs['INPUT0'] = tritonserver.Tensor.from_dlpack(np.arange(4, dtype=np.float32)[None])
    request.inputs['INPUT1'] = np.ones((1, 4), np.float32)
    responses = list(model.infer(request))
    assert len(responses) == 1
    r = responses[0]
    assert isinstance(r, tritonserver.InferenceResponse) and r.request_id == '7' and r.final
    assert (r.model.name, r.model.version) == ('add_sub', 1)
    out = r.outputs['OUTPUT0']
    assert isinstance(out, tritonserver.Tensor) and out.data_type == tritonserver.DataType.FP32 and list(out.shape) == [1, 4]
    assert out.memory_type == tritonserver.MemoryType.CPU and out.__dlpack_device__() == (1, 0)
    assert np.from_dlpack(out).tolist() == [[1, 2, 3, 4]]

def test_inputs_as_lists_and_request_errors(server):
    model = server.load('add_sub')
    with pytest.raises(tritonserver.InvalidArgumentError, match="'FP64'"):   # Python floats are FP64, as in Triton
        model.infer(inputs={'INPUT0': [[1.0, 2.0, 3.0, 4.0]], 'INPUT1': [[1.0, 2.0, 3.0, 4.0]]})
    with pytest.raises(tritonserver.InvalidArgumentError, match='unexpected shape'):
        model.infer(inputs={'INPUT0': np.zeros((1, 3), np.float32), 'INPUT1': np.zeros((1, 3), np.float32)})
    with pytest.raises(tritonserver.NotFoundError, match="'nope'"): server.model('nope').infer(inputs={})
    with pytest.raises(tritonserver.InvalidArgumentError): model.infer(inputs={'INPUT0': {'a': 1}})
    with pytest.raises(tritonserver.InvalidArgumentError, match='Request Parameter'):
        model.infer(inputs={}, parameters={'p': [1]})

def test_bytes_tensors(server):
    model = server.load('identity_bytes')
    cfg = model.config()
    name_in, name_out = cfg['input'][0]['name'], cfg['output'][0]['name']
    shape = [1, 1] if cfg['max_batch_size'] > 0 else [1]
    for value in (np.array(['héllo']).reshape(shape), [['héllo']] if len(shape) == 2 else ['héllo'],
                  tritonserver.Tensor.from_string_array(np.array(['héllo']).reshape(shape))):
        (r,) = model.infer(inputs={name_in: value})
        out = r.outputs[name_out]
        assert out.data_type == tritonserver.DataType.BYTES
        assert out.to_bytes_array().reshape(-1).tolist() == ['héllo'.encode()]
        assert out.to_string_array().reshape(-1).tolist() == ['héllo']
        with pytest.raises(tritonserver.UnsupportedError): np.from_dlpack(out)

STREAM = '''
import time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            sender = r.get_response_sender()
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            fail = dict(__import__("json").loads(r.parameters())).get("fail_at", -1)
            for i in range(n):
                if sender.is_cancelled(): break
                if i == fail:
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("failed at %d" % i)))
                    continue
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], dtype=np.int32))]))
                time.sleep(0.005)
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''

@pytest.fixture
def stream_server(tmp_path):
    write_model(tmp_path, 'count', '''
        backend: "python"
        model_transaction_policy { decoupled: true }
        input [{ name: "N" data_type: TYPE_INT32 dims: [1] }]
        output [{ name: "I" data_type: TYPE_INT32 dims: [1] }]''', STREAM)
    s = tritonserver.Server(model_repository=str(tmp_path)).start(wait_until_ready=True)
    yield s
    s.stop()

def test_a_decoupled_model_streams(stream_server):
    model = stream_server.model('count')
    assert model.transaction_properties() is tritonserver.ModelTxnPropertyFlag.DECOUPLED
    responses = list(model.infer(inputs={'N': np.array([3], np.int32)}))
    assert [int(np.from_dlpack(r.outputs['I'])[0]) for r in responses if r.outputs] == [0, 1, 2]
    assert [r.final for r in responses] == [False, False, False, True] and responses[-1].outputs == {}

def test_error_responses_and_raise_on_error(stream_server):
    model = stream_server.model('count')
    it = model.infer(inputs={'N': np.array([3], np.int32)}, parameters={'fail_at': 1})
    assert next(it).error is None
    with pytest.raises(tritonserver.TritonError, match='failed at 1'): next(it)   # raise_on_error defaults to True
    responses = list(model.infer(inputs={'N': np.array([3], np.int32)}, parameters={'fail_at': 1}, raise_on_error=False))
    errors = [r.error for r in responses if r.error is not None]
    assert len(errors) == 1 and isinstance(errors[0], tritonserver.TritonError) and isinstance(errors[0], CoreTritonError)
    assert errors[0].args[-1] is [r for r in responses if r.error is not None][0]   # Triton appends the response

def test_cancel(stream_server):
    it = stream_server.model('count').infer(inputs={'N': np.array([10000], np.int32)})
    first = next(it)
    assert first.outputs and not first.final
    it.cancel()
    rest = list(it)
    assert rest[-1].final and len(rest) < 1000

def test_response_queue(stream_server):
    q = queue.SimpleQueue()
    it = stream_server.model('count').infer(inputs={'N': np.array([2], np.int32)}, response_queue=q)
    from_iterator = list(it)
    from_queue = [q.get(timeout=5) for _ in from_iterator]
    assert [r.final for r in from_queue] == [False, False, True] and from_queue == from_iterator

def test_async_infer(stream_server):
    model = stream_server.model('count')
    async def main():
        it = model.async_infer(inputs={'N': np.array([3], np.int32)})
        assert isinstance(it, tritonserver.AsyncResponseIterator)
        return [int(np.from_dlpack(r.outputs['I'])[0]) async for r in it if r.outputs]
    assert asyncio.run(main()) == [0, 1, 2]


# --- what is not supported says so ---

def test_repository_registration_is_unsupported(server):
    with pytest.raises(tritonserver.UnsupportedError): server.register_model_repository(REPO, {'add_sub': 'other'})
    with pytest.raises(tritonserver.UnsupportedError): server.unregister_model_repository(REPO)
    with pytest.raises(tritonserver.UnsupportedError, match='POLL'): server.poll_model_repository()


# --- metrics: the text the metrics port serves ---

def _samples(text:str, skip=('nv_cpu_utilization', 'nv_cpu_memory_used_bytes')) -> dict:
    "Every sample of a Prometheus text by (name, labels), leaving out the gauges that move between two reads."
    from prometheus_client.parser import text_string_to_metric_families
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for f in text_string_to_metric_families(text) for s in f.samples if s.name not in skip}

def test_metrics_is_what_the_metrics_port_serves(server):
    "Server.metrics() and GET :PORT/metrics of HTTPMetricsServer over the same core: the same families and values."
    import urllib.request
    from triton_mini.asgi import HTTPService, bind_socket
    from triton_mini.metrics_server import HTTPMetricsServer
    model = server.load('add_sub')
    for _ in range(3): list(model.infer(inputs={'INPUT0': np.ones((2, 4), np.float32), 'INPUT1': np.ones((2, 4), np.float32)}))
    with HTTPService({HTTPMetricsServer(server.core): bind_socket('127.0.0.1', 0)}) as svc:
        served = urllib.request.urlopen(f'http://127.0.0.1:{svc.ports[0]}/metrics').read().decode()
    text = server.metrics()
    mine, port = _samples(text), _samples(served)
    assert mine == port and len(mine) > 40
    assert mine[('nv_inference_request_success_total', (('model', 'add_sub'), ('version', '1')))] == 3
    assert mine[('nv_inference_count_total', (('model', 'add_sub'), ('version', '1')))] == 6
    names = lambda t: [l for l in t.splitlines() if l.startswith('# ')]
    assert names(text) == names(served)          # the same families, HELP and TYPE, in the same order

def test_metrics_options(server):
    assert 'nv_cpu_utilization' in server.metrics(tritonserver.MetricFormat.PROMETHEUS)
    with pytest.raises(tritonserver.InvalidArgumentError, match='unsupported metric format'): server.metrics(3)
    s = tritonserver.Server(model_repository=REPO, model_control_mode=tritonserver.ModelControlMode.EXPLICIT, cpu_metrics=False).start()
    try: assert 'nv_cpu_utilization' not in s.metrics() and '# TYPE nv_inference_count counter' in s.metrics()
    finally: s.stop()
    s = tritonserver.Server(model_repository=REPO, model_control_mode=tritonserver.ModelControlMode.EXPLICIT, metrics=False).start()
    try:
        with pytest.raises(tritonserver.UnavailableError, match='disabled'): s.metrics()
    finally: s.stop()
    with pytest.raises(tritonserver.InvalidArgumentError, match='not started'): s.metrics()

def test_metrics_configuration_is_metrics_config(server):
    """`Options.metrics_configuration` {'': {setting: value}} (Triton's package hands it to
    TRITONSERVER_ServerOptionsSetMetricsConfig; the core reads the '' group, where --metrics-config puts its settings):
    the same summary families as the command line's, for a model loaded after the start, from its first request."""
    from triton_mini.metrics import MetricsCollector, MetricsConfig, parse_metrics_config
    flags = ['summary_latencies=true', 'summary_quantiles=0.5:0.05,0.9:0.01', 'counter_latencies=false']
    s = tritonserver.Server(model_repository=REPO, model_control_mode=tritonserver.ModelControlMode.EXPLICIT,
                            metrics_configuration={'': dict(f.split('=', 1) for f in flags), 'other': {'summary_latencies': 'false'}}).start()
    try:
        ones = {'INPUT0': np.ones((1, 4), np.float32), 'INPUT1': np.ones((1, 4), np.float32)}
        model = s.load('add_sub')
        for _ in range(2): list(model.infer(inputs=ones))
        text = s.metrics()
        assert 'nv_inference_request_summary_us_count{model="add_sub",version="1"} 2' in text
        assert 'quantile="0.9"' in text and 'quantile="0.99"' not in text and '_duration_us' not in text
        cli = MetricsCollector(s.core, allow_cpu_metrics=False).configure(MetricsConfig.from_settings(parse_metrics_config(flags)))
        types = lambda t: [l for l in t.splitlines() if l.startswith('# TYPE') and 'cpu' not in l and 'memory' not in l]
        assert types(text) == types(cli.render())
    finally: s.stop()
    assert 'metrics_configuration' not in tritonserver.IGNORED_OPTIONS

def test_poll_model_repository_in_poll_mode(tmp_path):
    s = tritonserver.Server(model_repository=str(tmp_path), model_control_mode=tritonserver.ModelControlMode.POLL).start()
    assert list(s.models()) == []
    write_model(tmp_path, 'ident', '''
        backend: "python"
        input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
        output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]''', IDENTITY)
    s.poll_model_repository()
    assert s.model('ident').ready()
    s.stop()


def test_error_classes_and_enums():
    for cls in (tritonserver.NotFoundError, tritonserver.InvalidArgumentError, tritonserver.UnavailableError,
                tritonserver.UnsupportedError, tritonserver.InternalError, tritonserver.AlreadyExistsError, tritonserver.UnknownError):
        assert issubclass(cls, tritonserver.TritonError) and issubclass(cls, CoreTritonError)
    assert tritonserver.DataType.BYTES == 13 and tritonserver.MemoryType.CPU == 0
    assert tritonserver.ModelControlMode.EXPLICIT == 2 and tritonserver.LogFormat.ISO8601 == 1
    assert tritonserver.InstanceGroupKind.CPU == 1 and tritonserver.ModelBatchFlag.FIRST_DIM == 2

def test_stopping_while_a_stream_runs(tmp_path):
    "Responses that arrive after stop() still reach the iterator, which ends with the final flag."
    write_model(tmp_path, 'count', '''
        backend: "python"
        model_transaction_policy { decoupled: true }
        input [{ name: "N" data_type: TYPE_INT32 dims: [1] }]
        output [{ name: "I" data_type: TYPE_INT32 dims: [1] }]''', STREAM)
    s = tritonserver.Server(model_repository=str(tmp_path), exit_timeout=5).start(wait_until_ready=True)
    it = s.model('count').infer(inputs={'N': np.array([40], np.int32)})
    assert next(it).outputs
    s.stop()                     # waits for the execution to finish (exit_timeout)
    rest = list(it)
    assert rest[-1].final and all(r.model.name == 'count' for r in rest)
    it.cancel()                  # after stop: nothing to cancel, no error
