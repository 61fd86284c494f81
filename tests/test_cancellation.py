"""Request cancellation end to end (issue 13): a gRPC client that cancels its call or its stream reaches the model as
`request.is_cancelled()` / `response_sender.is_cancelled()`, in the thread mode and across a stub process; a queued
request is dropped; an ensemble starts no further step."""
import os, threading, time
from pathlib import Path

import numpy as np
import pytest

TOKENS = '''
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

def note(folder, text):
    "Write stopped_after whole (a file renamed into place): the test reads it while the model runs."
    path = os.path.join(folder, "stopped_after")
    with open(path + ".tmp", "w") as f: f.write(text)
    os.replace(path + ".tmp", path)

class TritonPythonModel:
    def initialize(self, args): self.dir = args["model_repository"]
    def execute(self, requests):
        open(os.path.join(self.dir, "started"), "w").close()
        for r in requests:
            sender, n = r.get_response_sender(), 0
            while n < 2000 and not (sender.is_cancelled() or r.is_cancelled()):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("TOKEN", np.array([n], np.int32))]))
                n += 1
                time.sleep(0.005)
            note(self.dir, str(n))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
'''
SLOW = '''
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

def note(folder, text):
    "Write stopped_after whole (a file renamed into place): the test reads it while the model runs."
    path = os.path.join(folder, "stopped_after")
    with open(path + ".tmp", "w") as f: f.write(text)
    os.replace(path + ".tmp", path)

class TritonPythonModel:
    def initialize(self, args): self.dir = args["model_repository"]
    def execute(self, requests):
        out = []
        open(os.path.join(self.dir, "started"), "w").close()
        for r in requests:
            start = time.monotonic()
            while time.monotonic() - start < 20 and not r.is_cancelled(): time.sleep(0.005)
            note(self.dir, f"{time.monotonic() - start:.3f}")
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([1], np.int32))]))
        return out
'''
CONFIG = '''backend: "python"
{policy}
input [{{ name: "IN" data_type: TYPE_INT32 dims: [1] }}]
output [{{ name: "{out}" data_type: TYPE_INT32 dims: [1] }}]
parameters {{ key: "python_backend_mode" value {{ string_value: "{mode}" }} }}'''


def model(repo:Path, name:str, code:str, out:str, mode:str, decoupled:bool):
    (repo / name / '1').mkdir(parents=True)
    (repo / name / '1' / 'model.py').write_text(code)
    policy = 'model_transaction_policy { decoupled: true }' if decoupled else ''
    (repo / name / 'config.pbtxt').write_text(CONFIG.format(policy=policy, out=out, mode=mode))


def stopped_after(repo:Path, name:str, timeout:float=10) -> str:
    f, end = repo / name / 'stopped_after', time.monotonic() + timeout
    while not f.exists() and time.monotonic() < end: time.sleep(0.01)
    assert f.exists(), f'{name} never noticed the cancellation'
    return f.read_text()


def running(repo:Path, name:str, timeout:float=10):
    "Wait until the model's execute has started (it writes `started`): the request is running, not queued."
    f, end = repo / name / 'started', time.monotonic() + timeout
    while not f.exists() and time.monotonic() < end: time.sleep(0.005)
    assert f.exists(), f'{name} never started executing'


@pytest.fixture(params=['thread', 'process'])
def served(request, tmp_path, mini):
    model(tmp_path, 'tokens', TOKENS, 'TOKEN', request.param, True)
    model(tmp_path, 'slow', SLOW, 'OUT', request.param, False)
    return tmp_path, mini(tmp_path, http=False, metrics=False, grpc=True)


def _input():
    import tritonclient.grpc as grpcclient
    i = grpcclient.InferInput('IN', [1], 'INT32'); i.set_data_from_numpy(np.array([1], np.int32))
    return [i]


def test_a_cancelled_stream_stops_a_decoupled_model(served):
    import tritonclient.grpc as grpcclient
    repo, s = served
    client, got, three = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}'), [], threading.Event()
    def on_response(result, error):
        got.append(error or result)
        if len(got) >= 3: three.set()
    client.start_stream(on_response)
    client.async_stream_infer('tokens', _input())
    assert three.wait(10)
    client.stop_stream(cancel_requests=True)
    assert int(stopped_after(repo, 'tokens')) < 200      # of 2000 tokens, 5 ms apart: it stopped within a few tokens


def test_a_cancelled_call_reaches_a_running_model(served):
    import tritonclient.grpc as grpcclient
    repo, s = served
    client = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}')
    ctx = client.async_infer('slow', _input(), callback=lambda result, error: None)
    running(repo, 'slow')
    ctx.cancel()
    assert float(stopped_after(repo, 'slow')) < 5          # instead of 20 s
    assert s.server.model_ready('slow')                    # and the model serves on


def test_a_call_past_its_deadline_is_cancelled(served):
    import tritonclient.grpc as grpcclient
    from tritonclient.utils import InferenceServerException
    repo, s = served
    client = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}')
    with pytest.raises(InferenceServerException, match='Deadline'):
        client.infer('slow', _input(), client_timeout=0.5)
    assert float(stopped_after(repo, 'slow')) < 5


def test_a_queued_request_that_was_cancelled_never_runs(tmp_path):
    "One instance busy with a long request; a second one waits in the queue, is cancelled, and is answered CANCELLED."
    from triton_mini.server import TritonServer
    from triton_mini.backend import InferenceRequest
    from triton_mini.scheduler import ResponseWaiter
    model(tmp_path, 'slow', SLOW, 'OUT', 'thread', False)
    with TritonServer(tmp_path) as server:
        server.start()
        first, waiting = ResponseWaiter(), ResponseWaiter()
        r1 = InferenceRequest('slow', {'IN': np.array([1], np.int32)}, response_callback=first)
        r2 = InferenceRequest('slow', {'IN': np.array([2], np.int32)}, response_callback=waiting)
        m = server.submit(r1); server.submit(r2)
        running(tmp_path, 'slow')                           # r1 runs on the one instance: r2 is queued
        assert server.cancel(r2, m) is True                 # it was still queued: dropped
        assert waiting.wait(5)[0].error.code == 'CANCELLED'
        server.cancel(r1, m)                                # running: flagged, and the model stops
        assert first.wait(5)[0].error is None
        assert server.statistics('slow')['model_stats'][0]['inference_stats']['fail']['count'] == 1


def test_a_cancelled_ensemble_starts_no_further_step(tmp_path):
    from triton_mini.server import TritonServer
    from triton_mini.backend import InferenceRequest
    from triton_mini.scheduler import ResponseWaiter
    model(tmp_path, 'slow', SLOW, 'OUT', 'thread', False)
    (tmp_path / 'pipe' / '1').mkdir(parents=True)
    (tmp_path / 'pipe' / 'config.pbtxt').write_text('''platform: "ensemble"
input [{ name: "IN" data_type: TYPE_INT32 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_INT32 dims: [1] }]
ensemble_scheduling { step [
  { model_name: "slow" model_version: -1 input_map { key: "IN" value: "IN" } output_map { key: "OUT" value: "MID" } },
  { model_name: "slow" model_version: -1 input_map { key: "IN" value: "MID" } output_map { key: "OUT" value: "OUT" } } ] }''')
    with TritonServer(tmp_path) as server:
        server.start()
        w = ResponseWaiter()
        req = InferenceRequest('pipe', {'IN': np.array([1], np.int32)}, response_callback=w)
        m = server.submit(req)
        running(tmp_path, 'slow')                           # the first step runs
        t = time.monotonic()
        server.cancel(req, m)
        resp = w.wait(10)[0]
        assert resp.error is not None and resp.error.code == 'CANCELLED' and time.monotonic() - t < 5
        assert server.statistics('slow')['model_stats'][0]['inference_stats']['success']['count'] == 1   # step 2 never ran


@pytest.mark.parametrize('route', ['generate_stream', 'generate'])
def test_an_http_client_that_disconnects_from_generate_cancels(route, tmp_path, mini):
    "triton_mini's own: Triton 2.51 keeps generating for a gone HTTP client; here the model sees is_cancelled()."
    import socket
    model(tmp_path, 'tokens', TOKENS, 'TOKEN', 'thread', True)
    s = mini(tmp_path, metrics=False)
    body = b'{"IN": 1}'
    sock = socket.create_connection(('127.0.0.1', s.http_port))
    sock.sendall(f'POST /v2/models/tokens/{route} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n'.encode() + body)
    if route == 'generate_stream':                                        # read until the stream has started
        seen = b''
        while b'data: ' not in seen: seen += sock.recv(65536)
    else: running(tmp_path, 'tokens')                                     # generate answers at the end: wait for it to run
    sock.close()
    assert int(stopped_after(tmp_path, 'tokens')) < 400
