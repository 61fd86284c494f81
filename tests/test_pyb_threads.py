"""Issue 42, Python backend: what a model may do from the threads it starts, and when BLS is allowed.

Triton's stub serves every thread of the model: a decoupled model's response thread calls BLS, logs and counts
custom metrics as `execute` does. BLS is refused until `initialize` returned and once `finalize` began, with
`BLS is only supported during the 'execute' function.`: the load fails with it (initialize), the unload logs it at
INFO (finalize). Each case runs in both modes, in process; the `oracle` test serves the same folder with real
Triton 2.51 and triton-mini and compares.
"""
import json, queue, re, textwrap, threading, time
from pathlib import Path

import numpy as np
import pytest

from triton_mini.backend import InferenceRequest
from triton_mini.server import TritonServer

from triton_servers import http, wait_until

IO = 'input [{name: "IN" data_type: TYPE_INT32 dims: [1]}] output [{name: "OUT" data_type: TYPE_INT32 dims: [1]}]'
HEAD = 'import threading\nimport numpy as np\nimport triton_python_backend_utils as pb_utils\n'
BLS = ('pb_utils.InferenceRequest(model_name="callee", requested_output_names=["OUT"], '
       'inputs=[pb_utils.Tensor("IN", np.array([1], np.int32))]).exec()')
BLS_MESSAGE = "TritonModelException: BLS is only supported during the 'execute' function."

MODELS = {
    'callee': (IO, '''
        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() + 1)])
                        for r in requests]
        '''),
    # a decoupled model that answers on a thread of its own, as Triton's decoupled QA models do
    'threaded': (IO + ' model_transaction_policy {decoupled: true}', '''
        class TritonPythonModel:
            def initialize(self, args):
                self.family = pb_utils.MetricFamily(name="threaded_answers", description="answers", kind=pb_utils.MetricFamily.COUNTER)
            def execute(self, requests):
                for r in requests: threading.Thread(target=self.answer, args=(r,)).start()
            def answer(self, r):
                sender = r.get_response_sender()
                try:
                    x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
                    pb_utils.Logger.log_info("answering %d from a thread of the model" % x[0])
                    self.family.Metric(labels={"value": str(x[0])}).increment(1)
                    got = pb_utils.InferenceRequest(model_name="callee", requested_output_names=["OUT"],
                                                    inputs=[pb_utils.Tensor("IN", x)]).exec()
                    if got.has_error(): raise Exception(got.error().message())
                    assert not sender.is_cancelled() and not r.is_cancelled()
                    out = pb_utils.get_output_tensor_by_name(got, "OUT").as_numpy()
                    sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", out * 10)]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                except Exception as e:
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError("%s: %s" % (type(e).__name__, e))),
                                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        '''),
    'init_bls': (IO, f'''
        class TritonPythonModel:
            def initialize(self, args):
                {BLS}
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], np.int32))]) for r in requests]
        '''),
    'fin_bls': (IO, f'''
        class TritonPythonModel:
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([0], np.int32))]) for r in requests]
            def finalize(self):
                {BLS}
        '''),
}

# a model that is not decoupled, answering through its senders: after `execute` returned (from a thread), and for
# every request of a batch of three (Triton 2.51: 200 with [20]; 200 with [3] for each of the three)
SENDERS = {
    'nd_after': (IO, '''
        import time
        class TritonPythonModel:
            def execute(self, requests):
                for r in requests:
                    s, x = r.get_response_sender(), pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
                    def later(s=s, x=x):
                        time.sleep(0.2)
                        s.send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 10)]), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    threading.Thread(target=later).start()
                return None
        '''),
    'nd_multi': ('max_batch_size: 8 dynamic_batching { max_queue_delay_microseconds: 300000 } ' + IO, '''
        class TritonPythonModel:
            def execute(self, requests):
                for r in requests:
                    x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
                    r.get_response_sender().send(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 0 + len(requests))]),
                                                 flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                return None
        '''),
}


def write_repo(root:Path, models:dict=MODELS) -> Path:
    for name, (cfg, src) in models.items():
        (root / name / '1').mkdir(parents=True)
        (root / name / 'config.pbtxt').write_text(f'backend: "python" {cfg}')
        (root / name / '1' / 'model.py').write_text(HEAD + textwrap.dedent(src))
    return root


@pytest.fixture(params=['thread', 'process'])
def server(request, tmp_path):
    s = TritonServer(write_repo(tmp_path), python_backend_mode=request.param, model_control_mode='explicit')
    s.root = tmp_path
    s.start()
    yield s
    s.stop()


def stream(server, model, values, timeout=10) -> dict:
    "Submit one request per value: {value: OUT list or error message} once each has its final response."
    got, done = {}, threading.Event()
    def callback(req, resp, final):
        if resp is not None: got[int(req.id)] = resp.outputs['OUT'].tolist() if resp.error is None else resp.error.message
        if final and len(got) == len(values): done.set()
    for v in values:
        server.submit(InferenceRequest(model, {'IN': np.array([v], np.int32)}, id=str(v), response_callback=callback))
    assert done.wait(timeout), f'{model}: only {got} within {timeout} s'
    return got


def test_a_thread_of_the_model_uses_bls_logger_metrics(server, caplog):
    caplog.set_level('INFO')
    server.load_model('callee'); server.load_model('threaded')
    assert stream(server, 'threaded', [1, 2, 3]) == {1: [20], 2: [30], 3: [40]}
    wait_until(lambda: sum('from a thread of the model' in r.getMessage() for r in caplog.records) == 3, 5, 'the three log lines')
    fam = next(f for f in server.metric_families if f.name == 'threaded_answers')
    wait_until(lambda: sorted((m.labels['value'], m._value) for m in fam.metrics) == [('1', 1), ('2', 1), ('3', 1)], 5,
               'a counter per request, counted in the server')


def test_bls_in_initialize_fails_the_load(server):
    server.load_model('callee')
    with pytest.raises(Exception) as e: server.load_model('init_bls')
    assert f"{BLS_MESSAGE}\n\nAt:\n  {server.root}/init_bls/1/model.py(7): initialize\n" in str(e.value), str(e.value)


def test_bls_in_finalize_is_logged(server, caplog):
    caplog.set_level('INFO')
    server.load_model('callee'); server.load_model('fin_bls')
    server.unload_model('fin_bls')
    want = f"{BLS_MESSAGE}\n\nAt:\n  {server.root}/fin_bls/1/model.py(9): finalize\n"
    wait_until(lambda: any(r.getMessage() == want and r.levelname == 'INFO' for r in caplog.records), 10, 'the finalize error, logged')


# ----------------------------------------------------------------------------------------------------------- oracle

def triton_lines(server, text:str) -> list:
    "The log lines that contain `text`, from the message on, the repository's path as <repo>."
    return [l.split('] ', 1)[1].replace(str(server.repo), '<repo>') for l in server.lines if text in l and '] ' in l]


def grpc_stream(port, model, values, wait=10) -> dict:
    import tritonclient.grpc as grpcclient
    c, q = grpcclient.InferenceServerClient(f'127.0.0.1:{port}'), queue.Queue()
    c.start_stream(callback=lambda result, error: q.put((result, error)))
    for v in values:
        i = grpcclient.InferInput('IN', [1], 'INT32'); i.set_data_from_numpy(np.array([v], np.int32))
        c.async_stream_infer(model, [i], request_id=str(v))
    got = {}
    while len(got) < len(values):
        r, e = q.get(timeout=wait)
        if r is not None: got[int(r.get_response().id)] = r.as_numpy('OUT').tolist()
        else: got[len(got)] = str(e)
    threading.Thread(target=c.close, daemon=True).start()
    return got


@pytest.mark.oracle
@pytest.mark.parametrize('mode', ['thread', 'process'])
def test_threads_and_bls_phases_like_triton(tmp_path, real_triton, mini_process, mode):
    results = []
    for i, start in enumerate((real_triton, lambda repo, *f: mini_process(repo, *f, f'--python-backend-mode={mode}'))):
        s = start(write_repo(tmp_path / str(i)), '--model-control-mode=explicit')
        load = {m: http(s.http_port, 'POST', f'/v2/repository/models/{m}/load', timeout=60) for m in MODELS}
        answers = grpc_stream(s.grpc_port, 'threaded', [1, 2])
        assert http(s.http_port, 'POST', '/v2/repository/models/fin_bls/unload')[0] == 200
        wait_until(lambda: triton_lines(s, 'model.py(9): finalize'), 10, 'the finalize error in the log')
        error = json.loads(load['init_bls'][2])['error'].replace(str(s.repo), '<repo>')
        results.append(({m: r[0] for m, r in load.items()}, error, answers, triton_lines(s, 'model.py(9): finalize'),
                        len(triton_lines(s, 'from a thread of the model'))))
    real, mini = results
    assert real[0] == {'callee': 200, 'threaded': 200, 'init_bls': 400, 'fin_bls': 200}, real
    assert BLS_MESSAGE in real[1] and real[2] == {1: [20], 2: [30]} and real[4] == 2, real
    assert mini == real


def senders_answers(port) -> dict:
    "nd_after for 2, and three concurrent nd_multi requests (one batch): {case: (status, data)}."
    def one(model, v, shape):
        status, _, body = http(port, 'POST', f'/v2/models/{model}/infer', {'inputs': [{'name': 'IN', 'datatype': 'INT32', 'shape': shape, 'data': [v]}]})
        body = json.loads(body)
        return status, body['outputs'][0]['data'] if 'outputs' in body else body['error']
    got = {'after': one('nd_after', 2, [1])}
    threads = [threading.Thread(target=lambda v=v: got.__setitem__(v, one('nd_multi', v, [1, 1]))) for v in range(3)]
    for t in threads: t.start()
    for t in threads: t.join()
    return got


@pytest.mark.parametrize('mode', ['thread', 'process'])
def test_not_decoupled_answers_through_senders(tmp_path, mode):
    s = TritonServer(write_repo(tmp_path, SENDERS), python_backend_mode=mode)
    s.start()
    try:
        after = s.infer('nd_after', {'IN': np.array([2], np.int32)}).outputs['OUT'].tolist()
        assert after == [20]
        got, threads = {}, []
        for v in range(3):
            threads.append(threading.Thread(target=lambda v=v: got.__setitem__(v, s.infer('nd_multi', {'IN': np.array([[v]], np.int32)}).outputs['OUT'].tolist())))
        for t in threads: t.start()
        for t in threads: t.join()
        assert got == {0: [[3]], 1: [[3]], 2: [[3]]}
    finally: s.stop()


@pytest.mark.oracle
@pytest.mark.parametrize('mode', ['thread', 'process'])
def test_not_decoupled_senders_like_triton(tmp_path, real_triton, mini_process, mode):
    real = senders_answers(real_triton(write_repo(tmp_path / 'r', SENDERS)).http_port)
    assert real == {'after': (200, [20]), 0: (200, [3]), 1: (200, [3]), 2: (200, [3])}, real
    assert senders_answers(mini_process(write_repo(tmp_path / 'm', SENDERS), f'--python-backend-mode={mode}').http_port) == real
