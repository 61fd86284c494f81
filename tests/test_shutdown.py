"""SIGTERM with work in flight (issue 18): requests and generate_stream streams that are running when the
signal comes finish (within --exit-timeout-secs), then the process exits 0; a second signal ends it at once.

tritonserver 2.51, for comparison (observed): it ignores a second SIGTERM/SIGINT (it logs "Signal (15)
received." again and keeps waiting), and after the exit timeout it exits with code 1.
"""
import http.client, json, signal, threading, time
from pathlib import Path
import pytest

from triton_servers import MiniProcess, copy_models

SLEEPY = '''import time
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args):
        import json
        self.sleep = float(json.loads(args["model_config"])["parameters"]["sleep_s"]["string_value"])
    def execute(self, requests):
        pb_utils.Logger.log_info("sleepy executing %d" % len(requests))
        time.sleep(self.sleep)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
'''

def sleepy_repo(root:Path, sleep_s:float, instances:int=4) -> Path:
    d = root / 'sleepy'
    (d / '1').mkdir(parents=True)
    (d / '1' / 'model.py').write_text(SLEEPY)
    (d / 'config.pbtxt').write_text(f'''name: "sleepy"
backend: "python"
max_batch_size: 0
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
instance_group [ {{ kind: KIND_CPU count: {instances} }} ]
parameters {{ key: "sleep_s" value: {{ string_value: "{sleep_s}" }} }}
''')
    s = copy_models(root, 'python_backend/streamer') / 'streamer'
    cfg = (s / 'config.pbtxt').read_text()
    (s / 'config.pbtxt').write_text(cfg + '\ninstance_group [ { kind: KIND_CPU count: 2 } ]\n')
    return root


def infer(port, x, out:dict, key):
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
        c.request('POST', '/v2/models/sleepy/infer', json.dumps({'inputs': [{'name': 'X', 'shape': [1], 'datatype': 'FP32', 'data': [x]}]}))
        r = c.getresponse()
        out[key] = (r.status, json.loads(r.read()))
    except Exception as e: out[key] = ('failed', repr(e))

def stream(port, n, out:dict, key, first:threading.Event):
    "generate_stream of `n` tokens 300 ms apart; `first` is set when the first event has arrived."
    try:
        c = http.client.HTTPConnection('127.0.0.1', port, timeout=120)
        c.request('POST', '/v2/models/streamer/generate_stream', json.dumps({'TEXT': key, 'N': n, 'DELAY_MS': 300}))
        r = c.getresponse()
        events = []
        for line in r:
            if line.startswith(b'data: '):
                events.append(json.loads(line[6:]))
                first.set()
        out[key] = (r.status, events)
    except Exception as e: out[key] = ('failed', repr(e)); first.set()


def wait_for(check, timeout, what):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f'timed out waiting for {what}'
        time.sleep(0.02)    # watching another process's log


@pytest.mark.slow
def test_sigterm_finishes_requests_and_streams_in_flight(tmp_path):
    s = MiniProcess(sleepy_repo(tmp_path, sleep_s=2.0), '--exit-timeout-secs=20', grpc=False)
    out, threads, firsts = {}, [], []
    try:
        for i in range(4):
            threads.append(threading.Thread(target=infer, args=(s.http_port, float(i), out, f'infer{i}')))
        for i in range(2):
            firsts.append(threading.Event())
            threads.append(threading.Thread(target=stream, args=(s.http_port, 8, out, f'stream{i}', firsts[-1])))
        for t in threads: t.start()
        wait_for(lambda: s.output.count('sleepy executing') >= 4, 60, 'four executions')
        for f in firsts: assert f.wait(60)
        signalled = time.monotonic()
        s.send_signal(signal.SIGTERM)
        code = s.proc.wait(20 + 30)        # exit timeout, plus a margin for the unload
        took = time.monotonic() - signalled
        for t in threads: t.join(30)
        assert code == 0, s.output[-2000:]
        for i in range(4): assert out[f'infer{i}'] == (200, {'model_name': 'sleepy', 'model_version': '1', 'outputs': [
            {'name': 'Y', 'datatype': 'FP32', 'shape': [1], 'data': [float(i)]}]}), out[f'infer{i}']
        for i in range(2):
            status, events = out[f'stream{i}']
            assert status == 200 and [e['TOKEN'] for e in events] == [f'stream{i} #{k}' for k in range(8)], out[f'stream{i}']
        assert took < 20, f'exit took {took:.1f} s, more than --exit-timeout-secs'
        assert 'Signal (15) received.' in s.output
    finally: s.kill()


def test_second_signal_exits_at_once(tmp_path):
    s = MiniProcess(sleepy_repo(tmp_path, sleep_s=60.0, instances=1), '--exit-timeout-secs=60', grpc=False)
    out = {}
    try:
        t = threading.Thread(target=infer, args=(s.http_port, 1.0, out, 'r'))
        t.start()
        wait_for(lambda: 'sleepy executing' in s.output, 60, 'the execution')
        s.send_signal(signal.SIGTERM)
        wait_for(lambda: 'Signal (15) received.' in s.output, 30, 'the first signal')
        assert s.proc.poll() is None          # still draining: the request has 60 s to go
        s.send_signal(signal.SIGINT)
        assert s.proc.wait(15) == 128 + signal.SIGINT
        t.join(30)
        assert out['r'][0] == 'failed'        # the connection went with the process
        assert 'Signal (2) received again: exiting now' in s.output
    finally: s.kill()
