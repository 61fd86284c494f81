"""A model cannot take its instance, its unload or the server's shutdown down with it (issue 18, item 5).

- `sys.exit()`, `KeyboardInterrupt`, `GeneratorExit` or any other BaseException in `execute` fails that batch with
  Triton 2.51's text (compared with the oracle, call by call, over HTTP and gRPC), is counted and logged, and the
  same instance serves the next request.
- A hung `execute` next to a healthy model: the healthy one answers throughout; an unload of the hung one reaches
  UNAVAILABLE within its timeout and answers the hung and the queued requests; the model can be loaded again; a
  client's `timeout` under a queue policy holds at its deadline.
- SIGTERM with a hung model: `python -m triton_mini` exits within `--exit-timeout-secs` (plus a margin) with Triton's
  log lines and exit code 1 (compared with the oracle's).

The hung model waits for a file to appear (so a test can release it, in process or not), for at most 60 s.
"""
import json, os, signal, struct, subprocess, sys, textwrap, threading, time
from pathlib import Path

import numpy as np
import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from triton_servers import MiniProcess, RealTriton, copy_models, http, oracle_or_skip, settled, wait_until  # noqa: E402

EXITS = '''
import sys, time, os
import numpy as np
import triton_python_backend_utils as pb_utils
class Boom(BaseException): pass
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            v = int(x.flat[0])
            if v == 1: sys.exit(3)
            if v == 2: raise KeyboardInterrupt("ki")
            if v == 3: raise Boom("boom")
            if v == 4: sys.exit()
            if v == 5: raise GeneratorExit("ge")
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return out
'''
HANG = '''
import os, time
import triton_python_backend_utils as pb_utils
RELEASE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__)))), "release")   # <repo>/../release
class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "X").as_numpy()
            if int(x.flat[0]) == 1:                  # 1: hang until the test creates <repo>/../release (60 s at most)
                open(os.path.join(os.path.dirname(RELEASE), "executing"), "w").close()   # the test waits for this
                end = time.time() + 60
                while not os.path.exists(RELEASE) and time.time() < end: time.sleep(0.01)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("Y", x)]))
        return out
'''
IO = 'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
CONFIGS = {'exits': ('max_batch_size: 0\n', EXITS), 'exits_db': ('max_batch_size: 4\ndynamic_batching { }\n', EXITS),
           'hang': ('max_batch_size: 0\n', HANG),
           'hang_q': ('max_batch_size: 4\ndynamic_batching { default_queue_policy { default_timeout_microseconds: 30000000 '
                      'allow_timeout_override: true } }\n', HANG)}


def make_repo(root: Path, names) -> Path:
    repo = root / 'models'
    for name in names:
        cfg, py = CONFIGS[name]
        (repo / name / '1').mkdir(parents=True)
        (repo / name / 'config.pbtxt').write_text(f'name: "{name}"\nbackend: "python"\n{cfg}{IO}')
        (repo / name / '1' / 'model.py').write_text(py)
    copy_models(repo, 'conformance/add_sub')
    return repo


def body(v, batched=False): return {'inputs': [{'name': 'X', 'datatype': 'INT32', 'shape': [1, 1] if batched else [1], 'data': [v]}]}
ADD_SUB = {'inputs': [{'name': n, 'datatype': 'FP32', 'shape': [1, 4], 'data': [1, 2, 3, 4]} for n in ('INPUT0', 'INPUT1')]}


class Mini(MiniProcess):
    "`python -m triton_mini` in a subprocess, HTTP and gRPC; `stop()` kills it (these tests judge its answers, not its exit)."
    def __init__(self, repo, *flags): super().__init__(repo, *flags, metrics=False)
    def stop(self, *args, **kw): return self.kill()


def grpc_infer(port, model, v, batched=False):
    grpc = pytest.importorskip('grpc')
    from tritonclient.grpc import service_pb2 as pb
    r = pb.ModelInferRequest(model_name=model, inputs=[pb.ModelInferRequest.InferInputTensor(name='X', datatype='INT32', shape=[1, 1] if batched else [1])],
                             raw_input_contents=[struct.pack('<i', v)])
    with grpc.insecure_channel(f'127.0.0.1:{port}') as ch:
        call = ch.unary_unary('/inference.GRPCInferenceService/ModelInfer', request_serializer=pb.ModelInferRequest.SerializeToString,
                              response_deserializer=pb.ModelInferResponse.FromString)
        try: call(r, timeout=60); return ('OK', '')
        except grpc.RpcError as e: return (e.code().name, e.details())


def exit_answers(server) -> list:
    "What every BaseException case answers over HTTP and gRPC, and whether the instance serves on."
    out = []
    for model in ('exits', 'exits_db'):
        batched = model == 'exits_db'
        for v in (1, 2, 3, 4, 5):
            status, _, text = http(server.http_port, 'POST', f'/v2/models/{model}/infer', body(v, batched), timeout=60)
            out.append((model, v, 'http', status, json.loads(text)))
            out.append((model, v, 'grpc', *grpc_infer(server.grpc_port, model, v, batched)))
            status, _, text = http(server.http_port, 'POST', f'/v2/models/{model}/infer', body(7, batched), timeout=60)
            out.append((model, v, 'next', status, json.loads(text)['outputs'][0]['data']))
        def counts(model=model):
            stats = json.loads(http(server.http_port, 'GET', f'/v2/models/{model}/stats')[2])['model_stats'][0]['inference_stats']
            return stats['success']['count'], stats['fail']['count']
        out.append((model, 'stats', *settled(counts)))   # Triton counts the last success when it releases the request
    out.append(('ready', http(server.http_port, 'GET', '/v2/health/ready')[0]))
    return out


@pytest.fixture(scope='module')
def exits_repo(tmp_path_factory): return make_repo(tmp_path_factory.mktemp('exits'), ['exits', 'exits_db'])


@pytest.fixture(scope='module')
def mini_exit_answers(exits_repo):
    s = Mini(exits_repo)
    try: yield exit_answers(s), s.log()
    finally: s.stop()


def test_a_base_exception_fails_the_batch_and_the_instance_serves_on(mini_exit_answers, exits_repo):
    answers, log = mini_exit_answers
    first = answers[0]
    assert first[:4] == ('exits', 1, 'http', 500)
    assert first[4]['error'] == (f"Failed to process the request(s) for model 'exits_0', message: SystemExit: 3\n\nAt:\n"
                                 f"  {exits_repo}/exits/1/model.py(12): execute\n")
    (empty,) = [a for a in answers if a[:3] == ('exits', 4, 'grpc')]
    assert empty[3] == 'INTERNAL' and 'SystemExit: <EMPTY MESSAGE>' in empty[4]
    assert all(a[3:] == (200, [7]) for a in answers if a[2:3] == ('next',))                 # served on, every time
    assert ('exits', 'stats', 5, 10) in answers and ('exits_db', 'stats', 5, 10) in answers  # counted
    assert answers[-1] == ('ready', 200)
    assert log.count("E") and "Failed to process the request(s) for model 'exits_db_0', message: GeneratorExit: ge" in log   # logged


@pytest.mark.oracle
def test_base_exceptions_answer_as_triton(mini_exit_answers, exits_repo):
    oracle_or_skip()
    triton = RealTriton(exits_repo)
    try: expected = exit_answers(RealTritonPorts(triton))
    finally: triton.stop()
    assert mini_exit_answers[0] == expected


class RealTritonPorts:
    def __init__(self, t): self.http_port, self.grpc_port = t.http_port, t.grpc_port


# ------------------------------------------------------------------------------------------------- a hung execute, in process

@pytest.fixture
def hung(tmp_path):
    from triton_mini.server import TritonServer
    repo = make_repo(tmp_path, ['hang', 'hang_q'])
    server = TritonServer(repo, model_control_mode='explicit', load_models=['*'])
    assert server.start() == {}
    yield server, tmp_path / 'release'
    (tmp_path / 'release').touch()
    server.stop(10)


def submit(server, model, v, batched=False, **kw):
    "Submit from a thread; returns a dict that gets 'response' or 'error'."
    out, done = {}, threading.Event()
    def run():
        try: out['response'] = server.infer(model, {'X': np.array([[v]] if batched else [v], np.int32)}, timeout=120, **kw)
        except Exception as e: out['error'] = e
        finally: done.set()
    threading.Thread(target=run, daemon=True).start()
    out['done'] = done
    return out


def wait_executing(server, model):
    sched = server.repository.get(model).scheduler
    wait_until(lambda: sched._running, 30, f'{model} to start executing')


def test_a_hung_model_unloads_within_its_timeout_and_the_healthy_one_serves_throughout(hung):
    server, release = hung
    stuck = submit(server, 'hang', 1)
    wait_executing(server, 'hang')
    queued = submit(server, 'hang', 0)
    for _ in range(20):                                                         # the healthy model is not affected
        assert server.infer('add_sub', {'INPUT0': np.ones((1, 4), np.float32), 'INPUT1': np.ones((1, 4), np.float32)}).outputs['OUTPUT0'].tolist() == [[2] * 4]
    old = server.repository.get('hang')
    old.unload_timeout = 1.0
    threads = threading.active_count()
    t0 = time.monotonic()
    server.unload_model('hang')
    state = lambda: {(e['name'], e.get('state')) for e in server.repository_index()}
    wait_until(lambda: ('hang', 'UNAVAILABLE') in state(), 30, 'the hung version to reach UNAVAILABLE')
    assert time.monotonic() - t0 < 15                                           # 1 s timeout, a generous margin
    assert stuck['done'].wait(10) and queued['done'].wait(10)
    assert (stuck['error'].code, queued['error'].message) == ('UNAVAILABLE', "Request for unknown model: 'hang' has no available versions")
    assert "did not return within 1 s" in stuck['error'].message
    server.load_model('hang')                                                   # a fresh version serves while the old thread hangs
    assert server.infer('hang', {'X': np.array([0], np.int32)}).outputs['Y'].tolist() == [0]
    release.touch()                                                             # the abandoned thread ends by itself
    wait_until(lambda: not any(t.is_alive() for t in old.scheduler._threads), 30, 'the abandoned worker to end')
    assert threading.active_count() <= threads + 2
    assert server.infer('add_sub', {'INPUT0': np.ones((1, 4), np.float32), 'INPUT1': np.ones((1, 4), np.float32)}).outputs['OUTPUT1'].tolist() == [[0] * 4]


def test_a_queue_policy_timeout_holds_while_the_model_hangs(hung):
    server, release = hung
    stuck = submit(server, 'hang_q', 1, batched=True)
    wait_executing(server, 'hang_q')
    t0 = time.monotonic()
    late = submit(server, 'hang_q', 0, batched=True, timeout_us=200_000)
    assert late['done'].wait(20), 'the timeout was not enforced while the instance hung'
    assert (late['error'].message, late['error'].code) == ('Request timeout expired', 'UNAVAILABLE')
    assert time.monotonic() - t0 < 15
    assert not stuck['done'].is_set()
    release.touch()
    assert stuck['done'].wait(30) and stuck['response'].outputs['Y'].tolist() == [[1]]


def test_server_stop_is_bounded_with_a_hung_model(hung):
    server, release = hung
    stuck = submit(server, 'hang', 1)
    wait_executing(server, 'hang')
    t0 = time.monotonic()
    assert server.stop(1.0) == [('hang', 1, 1)]
    assert time.monotonic() - t0 < 10
    assert stuck['done'].wait(10) and stuck['error'].code == 'UNAVAILABLE'


# ------------------------------------------------------------------------------------------------- SIGTERM with a hung model

def sigterm_with_a_hung_model(server) -> dict:
    "Hang one request (and queue one more) on `hang`, check add_sub still answers, SIGTERM; what happened."
    results = {}
    def send(key, model, v):
        try: results[key] = http(server.http_port, 'POST', f'/v2/models/{model}/infer', body(v), timeout=120)[0]
        except OSError as e: results[key] = type(e).__name__
    executing = Path(server.repo).parent / 'executing'
    threading.Thread(target=send, args=('stuck', 'hang', 1), daemon=True).start()
    wait_until(executing.exists, 60, "the stuck request's execute")
    threading.Thread(target=send, args=('queued', 'hang', 0), daemon=True).start()
    time.sleep(0.3)                                      # let the queued one reach the server (nothing shows it arrived)
    healthy = [http(server.http_port, 'POST', '/v2/models/add_sub/infer', ADD_SUB)[0] for _ in range(5)]
    t0 = time.monotonic()
    os.killpg(server.proc.pid, signal.SIGTERM)
    try: code = server.proc.wait(60)
    except subprocess.TimeoutExpired: code = None
    lines = [line for line in server.log().splitlines() if 'in-flight inferences' in line or 'Exit timeout expired' in line]
    return {'healthy': healthy, 'code': code, 'seconds': time.monotonic() - t0,
            'lines': [line.split('] ', 1)[-1] for line in lines], 'letters': [line[0] for line in lines]}


@pytest.mark.slow
def test_sigterm_with_a_hung_model_exits_within_the_exit_timeout(tmp_path):
    repo = make_repo(tmp_path, ['hang'])
    server = Mini(repo, '--exit-timeout-secs=2')
    try: got = sigterm_with_a_hung_model(server)
    finally: (tmp_path / 'release').touch(); server.stop()
    assert got['healthy'] == [200] * 5
    assert got['code'] == 1 and got['seconds'] < 2 + 8, got          # Triton: 2.1 s; a generous margin for a busy machine
    assert got['lines'] == ['"Timeout 0: Found 1 model versions that have in-flight inferences"',
                            '"Model \'hang\' (version 1) has 1 in-flight inferences"',
                            '"failed to stop server: Internal - Exit timeout expired. Exiting immediately."']
    assert got['letters'] == ['I', 'I', 'E']


@pytest.mark.oracle
def test_sigterm_with_a_hung_model_as_triton(tmp_path):
    oracle_or_skip()
    repo = make_repo(tmp_path, ['hang'])
    triton = RealTriton(repo, '--exit-timeout-secs=2')
    try:
        got = sigterm_with_a_hung_model(triton)
    finally: (tmp_path / 'release').touch(); triton.stop()
    assert (got['healthy'], got['code'], got['letters'][-1]) == ([200] * 5, 1, 'E')
    assert got['lines'][-1] == '"failed to stop server: Internal - Exit timeout expired. Exiting immediately."'
    assert got['lines'][0].startswith('"Timeout 0: Found ')   # Triton counts 0 in-flight versions for a default-scheduler model
