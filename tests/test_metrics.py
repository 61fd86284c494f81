"""The metrics port parsed by Prometheus' own parser: Triton's families, labels and types, the counting
rules from ../shared/spec/metrics-and-cli.md, custom pb_utils metrics, and the seed's families."""
import shutil, textwrap, urllib.request
import numpy as np
import pytest

parser = pytest.importorskip('prometheus_client.parser')
from triton_mini.cli import example_repository
from triton_mini.server import TritonServer
from triton_mini.metrics import MetricsCollector, REQUEST_FAMILIES
from triton_mini.metrics_server import HTTPMetricsServer
from triton_mini.http_server import HTTPService, bind_socket
from triton_mini.tensors import TritonError

ERRMODEL = '''
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args):
        self.fam = pb_utils.MetricFamily(name="my_requests_total", description="my counter", kind=pb_utils.MetricFamily.COUNTER)
        self.counter = self.fam.Metric(labels={"model": "errmodel", "version": "1"})
        self.hist_family = pb_utils.MetricFamily("my_hist", "my histogram", pb_utils.MetricFamily.HISTOGRAM)  # keep it: Triton deletes dropped families
        self.hist = self.hist_family.Metric(labels={"a": "b"}, buckets=[0.1, 1.0, 10.0])
    def execute(self, requests):
        out = []
        for r in requests:
            mode = int(pb_utils.get_input_tensor_by_name(r, "MODE").as_numpy()[0])
            self.counter.increment(1); self.hist.observe(0.5)
            if mode == 1: raise ValueError("boom")
            out.append(pb_utils.InferenceResponse(error=pb_utils.TritonError("custom")) if mode == 2
                       else pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([mode], np.int32))]))
        return out
'''


@pytest.fixture(scope='module')
def server(tmp_path_factory):
    root = tmp_path_factory.mktemp('metrics') / 'models'
    shutil.copytree(example_repository(), root, ignore=shutil.ignore_patterns('qwen*', '__pycache__'))
    (root / 'errmodel' / '1').mkdir(parents=True)
    (root / 'errmodel' / 'config.pbtxt').write_text('name: "errmodel" backend: "python" input [{name: "MODE" data_type: TYPE_INT32 dims: [1]}] output [{name: "OUT" data_type: TYPE_INT32 dims: [1]}]')
    (root / 'errmodel' / '1' / 'model.py').write_text(textwrap.dedent(ERRMODEL))
    s = TritonServer(root)
    assert s.start() == {}
    yield s
    s.stop()


def families(server):
    return {f.name: f for f in parser.text_string_to_metric_families(MetricsCollector(server).render())}


def value(fams, name, **labels):
    "One sample's value (prometheus_client names counter samples `<family>_total`)."
    found = [s.value for f in fams.values() for s in f.samples
             if s.name in (name, name + '_total') and all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(found) == 1, (name, labels, found)
    return found[0]


def test_every_loaded_version_has_every_family(server):
    fams = families(server)
    for name, kind, _, _ in REQUEST_FAMILIES:
        prom_name = name[:-len('_total')] if name.endswith('_total') else name
        assert fams[prom_name].type == kind
    ready = {e['name'] for e in server.repository_index(ready=True)}
    assert {s.labels['model'] for s in fams['nv_inference_request_success'].samples} == ready
    reasons = {s.labels['reason'] for s in fams['nv_inference_request_failure'].samples if s.labels['model'] == 'add_sub'}
    assert reasons == {'REJECTED', 'CANCELED', 'BACKEND', 'OTHER'}
    assert fams['nv_cpu_memory_total_bytes'].samples[0].value > 0
    assert 0 <= fams['nv_cpu_utilization'].samples[0].value <= 1


def test_counting_rules(server):
    "Spec §1.2: error responses count as success, exceptions as BACKEND failures, invalid requests nowhere."
    assert server.infer('errmodel', {'MODE': np.array([0], np.int32)})['OUT'].tolist() == [0]           # a response
    with pytest.raises(TritonError, match='boom'): server.infer('errmodel', {'MODE': np.array([1], np.int32)})    # execute raised
    with pytest.raises(TritonError, match='custom'): server.infer('errmodel', {'MODE': np.array([2], np.int32)})  # an error response
    with pytest.raises(TritonError): server.infer('errmodel', {'MODE': np.array([0.5], np.float32)})   # wrong dtype
    x = np.ones((2, 4), np.float32)
    server.infer('add_sub', {'INPUT0': x, 'INPUT1': x})
    fams = families(server)
    assert value(fams, 'nv_inference_request_success', model='errmodel') == 2
    assert value(fams, 'nv_inference_request_failure', model='errmodel', reason='BACKEND') == 1
    assert value(fams, 'nv_inference_exec_count', model='errmodel') == 3
    assert value(fams, 'nv_inference_count', model='add_sub') == 2          # one request of batch size 2
    assert value(fams, 'nv_inference_request_duration_us', model='add_sub') > 0
    # custom families, with exactly the model's labels
    assert value(fams, 'my_requests', model='errmodel', version='1') == 3
    assert value(fams, 'my_hist_count', a='b') == 3 and value(fams, 'my_hist_sum', a='b') == 1.5
    assert value(fams, 'my_hist_bucket', a='b', le='1') == 3 and value(fams, 'my_hist_bucket', a='b', le='0.1') == 0


def test_seed_families(server):
    x = np.ones((1, 4), np.float32)
    server.infer_batch('linear_onnx', [{'INPUT0': x} for _ in range(6)])
    fams = families(server)
    n = value(fams, 'triton_mini_inference_count', model='linear_onnx')
    assert n >= 6
    assert value(fams, 'triton_mini_inference_latency_microseconds_count', model='linear_onnx') == n
    sizes = value(fams, 'triton_mini_batch_size_sum', model='linear_onnx')
    execs = value(fams, 'triton_mini_batch_size_count', model='linear_onnx')
    assert sizes == value(fams, 'nv_inference_count', model='linear_onnx') and execs == value(fams, 'nv_inference_exec_count', model='linear_onnx')
    assert execs < n                                                       # dynamic batching grouped some


def test_metrics_endpoint(server):
    svc = HTTPService({HTTPMetricsServer(server): bind_socket('127.0.0.1', 0)}).start()
    try:
        base = f'http://127.0.0.1:{svc.ports[0]}'
        with urllib.request.urlopen(base + '/metrics') as r:
            assert r.headers['Content-Type'] == 'text/plain; charset=utf-8'
            list(parser.text_string_to_metric_families(r.read().decode()))
        with urllib.request.urlopen(base + '/') as r: assert r.status == 200 and r.read() == b''
    finally: svc.stop()


LABELLED_HIST = '''
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args):
        self.family = pb_utils.MetricFamily("lat_hist", "labelled histogram", pb_utils.MetricFamily.HISTOGRAM)
        labels = {"model": args["model_name"], "version": args["model_version"], "zone": "eu", "a": "x"}
        self.hist = self.family.Metric(labels=labels, buckets=[0.1, 1.0, 10.0])
    def execute(self, requests):
        for _ in requests: self.hist.observe(0.5)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", np.array([1.0], np.float32))]) for _ in requests]
'''


@pytest.mark.oracle
def test_histogram_le_label_is_last_like_real_triton(tmp_path, real_triton, mini_process):
    "prometheus-cpp writes a bucket's labels sorted, then `le`: `{a=..,model=..,version=..,zone=..,le=..}`."
    from triton_servers import http, start_together
    (tmp_path / 'hist' / '1').mkdir(parents=True)
    (tmp_path / 'hist' / 'config.pbtxt').write_text('backend: "python"\nmax_batch_size: 0\n'
        'input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n')
    (tmp_path / 'hist' / '1' / 'model.py').write_text(LABELLED_HIST)
    servers = start_together(lambda: real_triton(tmp_path), lambda: mini_process(tmp_path))
    body = {'inputs': [{'name': 'X', 'datatype': 'FP32', 'shape': [1], 'data': [1]}]}
    texts = []
    for srv in servers:
        assert http(srv.http_port, 'POST', '/v2/models/hist/infer', body)[0] == 200
        texts.append([l for l in http(srv.metrics_port, 'GET', '/metrics')[2].splitlines() if 'lat_hist' in l])
    assert texts[0] == texts[1]
    assert 'lat_hist_bucket{a="x",model="hist",version="1",zone="eu",le="1"} 1' in texts[1]
