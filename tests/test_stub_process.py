"""Python models in stub processes (`--python-backend-mode=process`, nbs/04c_stub_process.ipynb): isolation, the
answers Triton 2.51 gives for a dead stub, decoupled streaming and logs across the boundary, no process left behind.

The crash behaviour compared here was observed on real Triton 2.51 (and is compared live in the oracle test): a stub
that exits fails that request and every later one of its instance with HTTP 500
`{"error":"Stub process '<instance>' is not healthy."}`; the model stays READY; the other models serve on."""
import json, os, signal, textwrap, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psutil
import pytest

from triton_servers import http, wait_until

MODEL = '''
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args):
        pb_utils.Logger.log_info(f"initialize {args['model_instance_name']} pid={os.getpid()}")
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            if x[0] < 0: os._exit(1)
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 2),
                                                   pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))]))
        return out
'''
CONFIG = '''backend: "python"
max_batch_size: 0
input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }, { name: "PID" data_type: TYPE_INT64 dims: [1] }]
'''
STREAM = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        for r in requests:
            n = int(pb_utils.get_input_tensor_by_name(r, "N").as_numpy()[0])
            sender = r.get_response_sender()
            for i in range(n):
                sender.send(pb_utils.InferenceResponse([pb_utils.Tensor("I", np.array([i], np.int32))]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
'''
STREAM_CONFIG = '''backend: "python"
model_transaction_policy { decoupled: true }
input [{ name: "N" data_type: TYPE_INT32 dims: [1] }]
output [{ name: "I" data_type: TYPE_INT32 dims: [1] }]
'''


def write(repo:Path, name:str, model:str, config:str):
    (repo / name / '1').mkdir(parents=True)
    (repo / name / '1' / 'model.py').write_text(model)
    (repo / name / 'config.pbtxt').write_text(config)


@pytest.fixture
def repo(tmp_path):
    r = tmp_path / 'models'
    write(r, 'crash', MODEL, CONFIG)
    write(r, 'healthy', MODEL, CONFIG + 'instance_group [{ count: 2 kind: KIND_CPU }]\n')
    write(r, 'stream', STREAM, STREAM_CONFIG)
    write(r, 'threaded', MODEL, CONFIG + 'parameters { key: "python_backend_mode" value { string_value: "thread" } }\n')
    return r


def infer(port, model, x):
    body = {'inputs': [{'name': 'IN', 'shape': [1], 'datatype': 'FP32', 'data': [x]}]}
    status, _, text = http(port, 'POST', f'/v2/models/{model}/infer', body)
    return status, json.loads(text)


def stubs(pid:int) -> list:
    "The stub processes below `pid`: started with stub_main, or forked by the fork server (whose command line they share)."
    def is_stub(p):
        try: cmd = ' '.join(p.cmdline())
        except psutil.NoSuchProcess: return False
        return (cmd.startswith('triton_mini stub ') or 'stub_main' in cmd   # named (set_title), or not yet initialized
                or ('fork_server_main' in cmd and 'fork_server_main' in ' '.join(p.parent().cmdline())))
    return [p for p in psutil.Process(pid).children(recursive=True) if is_stub(p)]


def test_a_dying_stub_answers_as_triton_and_the_others_serve(mini_process, repo):
    s = mini_process(repo, '--python-backend-mode=process')
    status, body = infer(s.http_port, 'healthy', 3)
    assert status == 200 and body['outputs'][0]['data'] == [6.0]
    assert body['outputs'][1]['data'][0] != s.ps.pid                  # it ran in another process
    assert len(stubs(s.ps.pid)) == 4                                  # crash, healthy x2, stream; 'threaded' has none

    failures = []
    def load():
        for _ in range(100):
            st, b = infer(s.http_port, 'healthy', 1)
            if st != 200 or b['outputs'][0]['data'] != [2.0]: failures.append((st, b))
    with ThreadPoolExecutor(4) as pool:
        running = [pool.submit(load) for _ in range(4)]
        assert infer(s.http_port, 'crash', -1) == (500, {'error': "Stub process 'crash_0' is not healthy."})
        for f in running: f.result()
    assert failures == []
    assert infer(s.http_port, 'crash', 1) == (500, {'error': "Stub process 'crash_0' is not healthy."})
    assert http(s.http_port, 'GET', '/v2/models/crash/ready')[0] == 200          # as Triton 2.51: still READY
    assert infer(s.http_port, 'threaded', 2)[1]['outputs'][1]['data'] == [s.ps.pid]
    assert 'initialize healthy_0_1 pid=' in s.log()                         # the stub's log, in the server's


# How a model can break its process, and what real Triton 2.51 answers for it (observed, and compared live below): a
# stub that exits or segfaults fails that request and every later one of its instance; a SystemExit is an error of
# that batch like any other exception (its stub serves on). Everything else serves on in both cases.
BREAKS = {'exits': 'os._exit(3)', 'segfaults': 'ctypes.string_at(0)', 'raises_system_exit': 'raise SystemExit(3)'}
BREAKING = """
import ctypes, os
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        out = []
        for r in requests:
            x = pb_utils.get_input_tensor_by_name(r, "IN").as_numpy()
            if x[0] < 0: BREAK
            out.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 2), pb_utils.Tensor("PID", np.array([os.getpid()], np.int64))]))
        return out
"""


@pytest.fixture
def breaking_repo(tmp_path):
    r = tmp_path / 'models'
    for name, how in BREAKS.items(): write(r, name, BREAKING.replace('BREAK', how), CONFIG)
    write(r, 'healthy', MODEL, CONFIG)
    return r


def break_each(port) -> dict:
    "Per breaking model: its answers to a good request, a breaking one and a good one again; then whether every model is ready and 'healthy' answers."
    out = {}
    for name in BREAKS:
        out[name] = [infer(port, name, 1), infer(port, name, -1), infer(port, name, 1)]
        out[name].append([http(port, 'GET', f'/v2/models/{m}/ready')[0] for m in [*BREAKS, 'healthy']] + [infer(port, 'healthy', 2)[0]])
    for answers in out.values():
        for status, body in answers[:3]:
            if status == 200: body['outputs'] = [o for o in body['outputs'] if o['name'] != 'PID']   # a pid differs from run to run
    return out


def test_the_command_runs_each_instance_in_a_stub_by_default(mini_process, breaking_repo):
    "`triton-mini` with no flags (issue 42): os._exit, a segfault and SystemExit in a model leave the server and every other model serving."
    s = mini_process(breaking_repo, env={'TRITON_MINI_PYTHON_BACKEND_MODE': ''})   # the environment of this run must not choose
    assert len(stubs(s.ps.pid)) == 4
    assert infer(s.http_port, 'healthy', 1)[1]['outputs'][1]['data'][0] != s.ps.pid
    got = break_each(s.http_port)
    ok = (200, {'model_name': 'exits', 'model_version': '1', 'outputs': [{'name': 'OUT', 'datatype': 'FP32', 'shape': [1], 'data': [2.0]}]})
    for name in ('exits', 'segfaults'):
        dead = (500, {'error': f"Stub process '{name}_0' is not healthy."})
        assert got[name] == [(200, {**ok[1], 'model_name': name}), dead, dead, [200, 200, 200, 200, 200]]
    name = 'raises_system_exit'
    failed = (500, {'error': f"Failed to process the request(s) for model '{name}_0', message: SystemExit: 3\n\nAt:\n"
                             f"  {breaking_repo / name / '1' / 'model.py'}(11): execute\n"})
    assert got[name] == [(200, {**ok[1], 'model_name': name}), failed, (200, {**ok[1], 'model_name': name}), [200] * 5]
    assert http(s.http_port, 'GET', '/v2/health/live')[0] == 200 and s.proc.poll() is None
    assert len(stubs(s.ps.pid)) == 2                                     # the two dead stubs stay dead, as in Triton 2.51
    modes = [l for l in s.log().splitlines() if 'Python backend mode' in l]
    assert len(modes) == 1 and 'Python backend mode: process' in modes[0], modes


@pytest.mark.oracle
def test_a_breaking_model_answers_like_real_triton(real_triton, mini_process, breaking_repo):
    "The same repository on real Triton 2.51 and on `triton-mini` with no flags: the same answers, texts included."
    triton = break_each(real_triton(breaking_repo).http_port)
    mini = break_each(mini_process(breaking_repo, env={'TRITON_MINI_PYTHON_BACKEND_MODE': ''}).http_port)
    assert mini == triton


def test_thread_mode_is_chosen_explicitly_and_says_so(mini_process, repo):
    "`--python-backend-mode=thread`: no stubs (but for a model whose parameter asks for one), and the startup log says thread."
    (repo / 'threaded' / 'config.pbtxt').write_text(CONFIG + 'parameters { key: "python_backend_mode" value { string_value: "process" } }\n')
    s = mini_process(repo, '--python-backend-mode=thread')
    assert len(stubs(s.ps.pid)) == 1                                    # 'threaded' asks for a process here
    assert infer(s.http_port, 'healthy', 1)[1]['outputs'][1]['data'] == [s.ps.pid]
    assert infer(s.http_port, 'threaded', 1)[1]['outputs'][1]['data'] != [s.ps.pid]
    modes = [l for l in s.log().splitlines() if 'Python backend mode' in l]
    assert len(modes) == 1 and 'Python backend mode: thread' in modes[0], modes


def test_decoupled_responses_stream_from_the_stub(mini, repo):
    from triton_mini.backend import InferenceRequest
    import numpy as np
    m = mini(repo, http=False, metrics=False, python_backend_mode='process')
    got, done = [], threading.Event()
    def collect(req, resp, final):
        if resp is not None: got.append(int(resp.outputs['I'][0]) if resp.error is None else resp.error)
        if final: done.set()
    m.server.submit(InferenceRequest('stream', {'N': np.array([5], np.int32)}, response_callback=collect))
    assert done.wait(30)
    assert got == [0, 1, 2, 3, 4]


def test_unload_and_stop_leave_no_stub(mini, repo):
    m = mini(repo, http=False, metrics=False, python_backend_mode='process', model_control_mode='explicit', load_models=['*'])
    me = os.getpid()
    assert len(stubs(me)) == 4
    m.server.unload_model("healthy"); m.server.repository.wait_for_unloads()   # unloads finish in the background
    assert len(stubs(me)) == 2
    m.stop()
    wait_until(lambda: stubs(me) == [], 10, 'the stubs to exit')


def test_a_model_parameter_picks_the_mode(mini, repo):
    (repo / 'crash' / 'config.pbtxt').write_text(CONFIG + 'parameters { key: "python_backend_mode" value { string_value: "process" } }\n')
    for name in ('healthy', 'stream', 'threaded'): (repo / name / 'config.pbtxt').unlink(); (repo / name / '1' / 'model.py').unlink()
    m = mini(repo, metrics=False)            # the server's default: thread
    assert len(stubs(os.getpid())) == 1
    assert infer(m.http_port, 'crash', -1) == (500, {'error': "Stub process 'crash_0' is not healthy."})


def test_an_initialize_that_exits_fails_the_load_not_the_server(mini_process, tmp_path):
    repo = tmp_path / 'models'
    write(repo, 'exits', 'import os\nclass TritonPythonModel:\n    def initialize(self, args): os._exit(3)\n', CONFIG)
    write(repo, 'healthy', MODEL, CONFIG)
    s = mini_process(repo, '--python-backend-mode=process', '--exit-on-error=false', wait='live')
    assert infer(s.http_port, 'healthy', 1)[0] == 200
    index = json.loads(http(s.http_port, 'POST', '/v2/repository/index')[2])
    assert {'name': 'exits', 'version': '1', 'state': 'UNAVAILABLE',
            'reason': "Internal: Stub process 'exits_0' is not healthy."} in index   # Triton 2.51's words, observed


@pytest.mark.oracle
def test_dead_stub_answers_like_real_triton(real_triton, mini_process, repo):
    for name in ('stream', 'threaded'):
        import shutil; shutil.rmtree(repo / name)
    answers = {}
    for label, s in (('triton', real_triton(repo)), ('mini', mini_process(repo, '--python-backend-mode=process'))):
        answers[label] = [infer(s.http_port, 'crash', 1)[0], infer(s.http_port, 'crash', -1), infer(s.http_port, 'crash', 1),
                          http(s.http_port, 'GET', '/v2/models/crash/ready')[0], infer(s.http_port, 'healthy', 1)[0]]
    assert answers['mini'] == answers['triton']


@pytest.mark.oracle
def test_triton_hangs_on_a_model_that_exits_at_import(real_triton, tmp_path):
    "The claim below, live: real Triton 2.51 loading a model.py that calls os._exit(3) at import never gets to serve (30 s)."
    repo = tmp_path / 'models'
    write(repo, 'exits_at_import', 'import os\nos._exit(3)\n', CONFIG)
    t = real_triton(repo, wait=None)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        assert t.proc.poll() is None, f'tritonserver exited with {t.proc.returncode}'
        try: assert http(t.http_port, 'GET', '/v2/health/live', timeout=1)[0] != 200, 'Triton came up'
        except OSError: pass   # not listening: still loading
        time.sleep(0.5)


def test_auto_complete_runs_in_a_stub(mini_process, tmp_path):
    "A model.py that exits the process at import: in process mode only its load fails (Triton 2.51 hangs there)."
    repo = tmp_path / 'models'
    write(repo, 'exits_at_import', 'import os\nos._exit(3)\n', CONFIG)
    write(repo, 'healthy', MODEL, CONFIG)
    (repo / 'auto' / '1').mkdir(parents=True)
    (repo / 'auto' / '1' / 'model.py').write_text(textwrap.dedent('''
        import triton_python_backend_utils as pb_utils
        class TritonPythonModel:
            @staticmethod
            def auto_complete_config(config):
                config.add_input({"name": "IN", "data_type": "TYPE_FP32", "dims": [1]})
                config.add_output({"name": "OUT", "data_type": "TYPE_FP32", "dims": [1]})
                return config
            def execute(self, requests):
                return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", pb_utils.get_input_tensor_by_name(r, "IN").as_numpy())])
                        for r in requests]
        '''))
    (repo / 'auto' / 'config.pbtxt').write_text('backend: "python"\n')
    s = mini_process(repo, '--python-backend-mode=process', '--exit-on-error=false', wait='live')
    assert infer(s.http_port, 'healthy', 1)[0] == 200
    cfg = json.loads(http(s.http_port, 'GET', '/v2/models/auto/config')[2])
    assert [i['name'] for i in cfg['input']] == ['IN']
    index = {e['name']: e for e in json.loads(http(s.http_port, 'POST', '/v2/repository/index')[2])}
    assert index['exits_at_import']['state'] == 'UNAVAILABLE' and 'exit code 3' in index['exits_at_import']['reason']


ENV_MODEL = '''
import os, sys
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        where = np.array([sys.prefix.encode(), os.environ.get("SEED_VAR", "").encode()], dtype=object)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("WHERE", where)]) for _ in requests]
'''


@pytest.mark.slow
def test_a_packed_environment_runs_the_stub(mini_process, tmp_path):
    "EXECUTION_ENV_PATH (a venv packed as seed 003 packs qwen_env) and EXECUTION_ENV's variables reach the stub."
    import subprocess, sys, tarfile
    repo = tmp_path / 'models'
    env_dir = tmp_path / 'build' / 'my_env'
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(env_dir)], check=True)
    config = ('backend: "python"\ninput [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\n'
              'output [{ name: "WHERE" data_type: TYPE_STRING dims: [2] }]\n'
              'parameters [{ key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/my_env.tar.gz" } },\n'
              '  { key: "EXECUTION_ENV" value { string_value: "{\\"SEED_VAR\\": \\"from seed 003\\"}" } }]\n')
    write(repo, 'packed', ENV_MODEL, config)
    with tarfile.open(repo / 'packed' / 'my_env.tar.gz', 'w:gz') as tar: tar.add(env_dir, arcname='my_env')
    write(repo, 'missing', ENV_MODEL, config.replace('my_env.tar.gz', 'nope.tar.gz'))
    s = mini_process(repo, '--exit-on-error=false', wait='live', env={'TRITON_MINI_ENV_CACHE': str(tmp_path / 'cache')})
    status, body = infer(s.http_port, 'packed', 1)
    assert status == 200, body
    prefix, var = body['outputs'][0]['data']
    assert prefix.startswith(str(tmp_path / 'cache')) and prefix.endswith('my_env') and var == 'from seed 003'
    index = {e['name']: e for e in json.loads(http(s.http_port, 'POST', '/v2/repository/index')[2])}
    assert index['missing'].get('state') == 'UNAVAILABLE', (index, s.log())
    assert index['missing'].get('reason') == f"Internal: Failed to get the canonical path for {repo / 'missing' / 'nope.tar.gz'}."
    assert f"Using Python execution env {repo / 'packed' / 'my_env.tar.gz'}" in s.log()



@pytest.mark.slow
def test_an_unpacked_environment_runs_the_stub(mini_process, tmp_path):
    "EXECUTION_ENV_PATH naming a folder (the README's unpacked environment) runs the stub from it, unpacking nothing."
    import subprocess, sys
    repo = tmp_path / 'models'
    config = ('backend: "python"\ninput [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\n'
              'output [{ name: "WHERE" data_type: TYPE_STRING dims: [2] }]\n'
              'parameters [{ key: "EXECUTION_ENV_PATH" value { string_value: "$$TRITON_MODEL_DIRECTORY/my_env" } }]\n')
    write(repo, 'unpacked', ENV_MODEL, config)
    subprocess.run([sys.executable, '-m', 'venv', '--without-pip', str(repo / 'unpacked' / 'my_env')], check=True)
    s = mini_process(repo, '--exit-on-error=false', wait='live', env={'TRITON_MINI_ENV_CACHE': str(tmp_path / 'cache')})
    status, body = infer(s.http_port, 'unpacked', 1)
    assert status == 200, (body, s.log())
    assert body['outputs'][0]['data'][0] == str(repo / 'unpacked' / 'my_env')
    assert not (tmp_path / 'cache').exists() or not any((tmp_path / 'cache').iterdir())


ARGV_MODEL = '''
import sys
import numpy as np
import triton_python_backend_utils as pb_utils
AT_IMPORT = list(sys.argv)

class TritonPythonModel:
    def initialize(self, args):
        self.seen = AT_IMPORT + list(sys.argv)
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("WHERE", np.array([repr(self.seen).encode(), b""], dtype=object))])
                for _ in requests]
'''


@pytest.mark.parametrize('mode', ['thread', 'process'])
def test_a_model_sees_tritons_argv(mini, tmp_path, mode):
    "Triton 2.51's stub has sys.argv == [''] (observed) at import and in initialize: never the server's command line."
    repo = tmp_path / 'models'
    write(repo, 'argv', ARGV_MODEL, 'backend: "python"\ninput [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\n'
                                     'output [{ name: "WHERE" data_type: TYPE_STRING dims: [2] }]\n')
    m = mini(repo, metrics=False, python_backend_mode=mode)
    assert infer(m.http_port, 'argv', 1)[1]['outputs'][0]['data'][0] == "['', '']"


@pytest.mark.oracle
def test_tritons_stub_argv_is_what_the_test_above_expects(real_triton, tmp_path):
    repo = tmp_path / 'models'
    write(repo, 'argv', ARGV_MODEL, 'backend: "python"\ninput [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\n'
                                     'output [{ name: "WHERE" data_type: TYPE_STRING dims: [2] }]\n')
    t = real_triton(repo)
    assert infer(t.http_port, 'argv', 1)[1]['outputs'][0]['data'][0] == "['', '']"


@pytest.mark.slow
def test_100_load_unload_cycles_leave_nothing_behind(tmp_path):
    "Issue 13's hygiene bar: after 100 load/unload cycles in process mode, no stub, no open socket, no env folder, flat RSS."
    import gc
    from triton_mini.server import TritonServer
    repo = tmp_path / 'models'
    write(repo, 'healthy', MODEL, CONFIG)
    me = psutil.Process()
    with TritonServer(repo, model_control_mode='explicit', python_backend_mode='process') as server:
        def cycle():
            server.load_model('healthy')
            out = server.infer('healthy', {'IN': __import__('numpy').array([2.0], 'float32')})
            assert out.outputs['OUT'].tolist() == [4.0]
            server.unload_model('healthy'); server.repository.wait_for_unloads()
        for _ in range(10): cycle()                       # warm up: imports, first allocations
        gc.collect(); fds, rss = me.num_fds(), me.memory_info().rss
        for _ in range(100): cycle()
        gc.collect()
        wait_until(lambda: stubs(me.pid) == [], 10, 'the stubs to exit')
        assert me.num_fds() <= fds + 2, (fds, me.num_fds())
        assert me.memory_info().rss - rss < 30 * 2**20, (rss, me.memory_info().rss)


LEAVES = '''
import os, time
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        if HOW == "fork":                  # a plain fork: the child has every fd of the stub, close-on-exec or not
            pid = os.fork()
            if pid == 0: time.sleep(100); os._exit(0)
            open(PIDFILE, "w").write(str(pid))
        else: os.system(f"sleep 100 & echo $! > {PIDFILE}")   # a shell and its background child: exec'd
        os._exit(1)
'''


def alive(pid:int) -> bool:
    try: return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess: return False


START = {'forked': {}, 'exec': {'TRITON_MINI_FORK_STUBS': '0'}}   # stubs forked by the fork server, or each a new Python


@pytest.mark.parametrize('start', START)
@pytest.mark.parametrize('how', ['system', 'fork'])
def test_a_stub_that_dies_leaving_a_grandchild_answers_as_triton(mini_process, tmp_path, how, start):
    """Issue 40, M1: the grandchild keeps the stub's end of its channels open (a fork) or would, were they inheritable
    across exec (os.system): the stub's exit itself says it died. Triton 2.51 answers within about a second."""
    repo, pidfile = tmp_path / 'models', tmp_path / 'grandchild.pid'
    write(repo, 'leaves', LEAVES.replace('HOW', repr(how)).replace('PIDFILE', repr(str(pidfile))), CONFIG)
    write(repo, 'healthy', MODEL, CONFIG)
    s = mini_process(repo, '--python-backend-mode=process', env=START[start])
    dead = (500, {'error': "Stub process 'leaves_0' is not healthy."})
    try:
        t0 = time.monotonic()
        status, _, text = http(s.http_port, 'POST', '/v2/models/leaves/infer', timeout=10,
                               body={'inputs': [{'name': 'IN', 'shape': [1], 'datatype': 'FP32', 'data': [1]}]})
        took = time.monotonic() - t0
        assert (status, json.loads(text)) == dead and took < 3, took
        assert alive(int(pidfile.read_text()))                       # the grandchild outlives its stub
        assert infer(s.http_port, 'leaves', 1) == dead                # every later request too
        assert infer(s.http_port, 'healthy', 2)[1]['outputs'][0]['data'] == [4.0]
        assert http(s.http_port, 'GET', '/v2/models/leaves/ready')[0] == 200   # as Triton 2.51 and the test above
    finally:
        if pidfile.exists(): psutil.Process(int(pidfile.read_text())).kill()


HOG = '''
import numpy as np
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def execute(self, requests):
        open(STARTED, "w").close()
        sum(range(10**15))              # C code holding the GIL: the stub cannot read the end of its channels
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.zeros(1, np.float32))]) for _ in requests]
'''


@pytest.mark.parametrize('start', START)
def test_kill_9_leaves_no_process_behind(mini_process, tmp_path, start):
    """Issue 40, M2: after `kill -9` of the server, its fork server and stubs (one of them busy holding the GIL), the
    JSON decoding worker, multiprocessing's fork server and resource tracker are all gone within 2 s."""
    from triton_mini.http_server import HTTPFrontend
    import inspect
    repo, started = tmp_path / 'models', tmp_path / 'hog.started'
    write(repo, 'healthy', MODEL, CONFIG)
    write(repo, 'hog', HOG.replace('STARTED', repr(str(started))), CONFIG)
    s = mini_process(repo, '--python-backend-mode=process', grpc=False, metrics=False, env=START[start])
    threshold = inspect.signature(HTTPFrontend).parameters['worker_json_bytes'].default
    body = {'inputs': [{'name': 'IN', 'shape': [1], 'datatype': 'FP32', 'data': [2]}], 'parameters': {'pad': 'x' * threshold}}
    status, _, text = http(s.http_port, 'POST', '/v2/models/healthy/infer', body)
    assert status == 200 and json.loads(text)['outputs'][0]['data'] == [4.0]
    def never_answered():
        try: infer(s.http_port, 'hog', 1)
        except OSError: pass                                         # the server is killed under it
    threading.Thread(target=never_answered, daemon=True).start()
    deadline = time.monotonic() + 30
    while not started.exists() and time.monotonic() < deadline: time.sleep(0.02)
    assert started.exists()
    family = psutil.Process(s.proc.pid).children(recursive=True)
    commands = [' '.join(p.cmdline()) for p in family]
    assert sum('multiprocessing.forkserver' in c for c in commands) == 2, commands   # its fork server and the worker
    assert sum('multiprocessing.resource_tracker' in c for c in commands) == 1, commands
    assert len(stubs(s.proc.pid)) == 2, commands
    s.send_signal(signal.SIGKILL); s.proc.wait()
    deadline = time.monotonic() + 2
    while any(alive(p.pid) for p in family) and time.monotonic() < deadline: time.sleep(0.02)
    assert [c for p, c in zip(family, commands) if alive(p.pid)] == []


def stub_titles(pid:int) -> list:
    "(cmdline, name) of each stub below `pid`: Triton's `triton_python_backend_stub`s, or ours."
    out = []
    for p in psutil.Process(pid).children(recursive=True):
        try: cmd, name = p.cmdline(), p.name()
        except psutil.NoSuchProcess: continue
        if cmd and ('triton_python_backend_stub' in cmd[0] or cmd[0] == 'triton_mini'): out.append((cmd, name))
    return sorted(out)


NAMED = [('crash', 'crash_0'), ('healthy', 'healthy_0_0'), ('healthy', 'healthy_0_1'), ('stream', 'stream_0')]   # not `threaded`: in the server


@pytest.mark.parametrize('start', START)
def test_ps_says_which_model_and_instance_a_stub_serves(mini_process, repo, start):
    "Forked and exec'd stubs alike: `ps -o args` shows `triton_mini stub <model> <instance>`, `ps -e` the instance."
    m = mini_process(repo, env=START[start])
    got = stub_titles(m.proc.pid)
    assert got == [(['triton_mini', 'stub', model, inst], inst) for model, inst in NAMED], got
    pid = infer(m.http_port, 'crash', 1)[1]['outputs'][1]['data'][0]
    assert psutil.Process(pid).cmdline() == ['triton_mini', 'stub', 'crash', 'crash_0']


@pytest.mark.oracle
def test_tritons_stubs_name_their_model_in_ps(real_triton, repo):
    """What the test above stands for: each stub of Triton 2.51 carries its model's path (argv[1]) and its instance's
    name (argv[8]) in its arguments, the same instance names as ours; `threaded` is a stub too (Triton has no thread mode)."""
    t = real_triton(repo)
    got = sorted((Path(cmd[1]).parts[-3], cmd[8]) for cmd, name in stub_titles(t.proc.pid)
                 if Path(cmd[1]).name == 'model.py' and name == 'triton_python_backend_stub')   # comm: its first 15 bytes
    assert got == sorted(NAMED + [('threaded', 'threaded_0')]), got


LOCALE_MODEL = '''
import locale
import numpy as np
import triton_python_backend_utils as pb_utils
AT_IMPORT = locale.getlocale()

class TritonPythonModel:
    def execute(self, requests):
        seen = repr((AT_IMPORT, locale.getlocale(), locale.setlocale(locale.LC_ALL), locale.getpreferredencoding(False)))
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([seen.encode()], dtype=object))]) for _ in requests]
'''
IN_C = "((None, None), (None, None), 'C', 'ANSI_X3.4-1968')"   # Triton 2.51's stub, whatever the server's LANG (observed)


def locale_repo(tmp_path) -> Path:
    repo = tmp_path / 'models'
    write(repo, 'where', LOCALE_MODEL, 'backend: "python"\ninput [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]\n'
                                       'output [{ name: "OUT" data_type: TYPE_STRING dims: [1] }]\n')
    return repo


def seen_locale(port) -> str:
    status, _, text = http(port, 'POST', '/v2/models/where/infer', {'inputs': [{'name': 'IN', 'shape': [1], 'datatype': 'FP32', 'data': [1]}]})
    return json.loads(text)['outputs'][0]['data'][0]


@pytest.mark.parametrize('start', START)
def test_a_stub_runs_in_the_c_locale(mini_process, tmp_path, start):
    "Not the server's LANG=C.UTF-8: a stub (forked or exec'd) sets the C locale before the model is imported."
    m = mini_process(locale_repo(tmp_path), env={**START[start], 'LANG': 'C.UTF-8', 'LC_ALL': 'C.UTF-8'})
    assert seen_locale(m.http_port) == IN_C


def test_the_thread_mode_shares_the_servers_locale(mini_process, tmp_path):
    "The documented difference: in the thread mode the model runs in the server's process, in its locale."
    m = mini_process(locale_repo(tmp_path), '--python-backend-mode=thread', env={'LANG': 'C.UTF-8', 'LC_ALL': 'C.UTF-8'})
    assert seen_locale(m.http_port).startswith("(('en_US', 'UTF-8'), ('en_US', 'UTF-8'), 'LC_CTYPE=C.UTF-8;")


@pytest.mark.oracle
def test_tritons_stub_runs_in_the_c_locale(real_triton, tmp_path):
    t = real_triton(locale_repo(tmp_path), env={'LANG': 'C.UTF-8', 'LC_ALL': 'C.UTF-8'})
    assert seen_locale(t.http_port) == IN_C


POOL = '''
import multiprocessing
import numpy as np
import triton_python_backend_utils as pb_utils

def bls_add_sub(x):
    x = np.full(1, x, np.float32)
    resp = pb_utils.InferenceRequest(model_name="healthy", requested_output_names=["OUT"],
                                     inputs=[pb_utils.Tensor("IN", x)]).exec()
    if resp.has_error(): return resp.error().message()
    return float(pb_utils.get_output_tensor_by_name(resp, "OUT").as_numpy()[0])

class TritonPythonModel:
    def execute(self, requests):
        pool = multiprocessing.get_context("fork").Pool(4)   # as Triton's QA bls model: a Pool inside execute
        got = pool.map(bls_add_sub, range(10))
        pool.close(); pool.join()
        ok = got == [2.0 * x for x in range(10)]   # healthy doubles
        if not ok: pb_utils.Logger.log_error(f"pool BLS: {got}")
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", np.array([ok], np.float32)),
                                            pb_utils.Tensor("PID", np.array([0], np.int64))]) for _ in requests]
'''


def test_a_models_forked_processes_make_bls_calls(mini, repo):
    """Triton's QA bls model (test_multiprocess) maps a BLS call over a fork Pool in execute: each worker's call is
    answered (the workers share no channel with the stub: it relays theirs), and the stub serves on after."""
    write(repo, 'pool', POOL, CONFIG)
    m = mini(repo, metrics=False, python_backend_mode='process')
    for _ in range(2):
        status, body = infer(m.http_port, 'pool', 0)
        assert status == 200 and body['outputs'][0]['data'] == [1.0], body
    assert infer(m.http_port, 'healthy', 3)[1]['outputs'][0]['data'] == [6.0]


GATED = '''
import os, time
import triton_python_backend_utils as pb_utils

class TritonPythonModel:
    def initialize(self, args): self.go = os.path.join(args['model_repository'], 'go')
    def execute(self, requests):
        xs = [pb_utils.get_input_tensor_by_name(r, "IN").as_numpy() for r in requests]
        while xs[0][0, 0] == 0 and not os.path.exists(self.go): time.sleep(0.01)   # request 0 holds the instance
        return [pb_utils.InferenceResponse([pb_utils.Tensor("OUT", x * 2)]) for x in xs]
'''
PAIRS = '''backend: "python"
max_batch_size: 2
input [{ name: "IN" data_type: TYPE_FP32 dims: [1] }]
output [{ name: "OUT" data_type: TYPE_FP32 dims: [1] }]
dynamic_batching { }
'''


def test_queued_full_batches_ride_one_hop_with_the_same_batches(tmp_path):
    "The dynamic batcher hands a busy stub instance its queued full batches in one hop (05_scheduler): same answers, same batch_stats."
    import numpy as np
    from triton_mini.backend import InferenceRequest
    from triton_mini.scheduler import ResponseWaiter
    from triton_mini.server import TritonServer
    repo = tmp_path / 'models'
    write(repo, 'pairs', GATED, PAIRS)
    with TritonServer(repo, python_backend_mode='process') as server:
        m = server.repository.get('pairs')
        m.scheduler.pipeline_wait_ns = 10**12   # the gated first batch took long: the estimate would forbid any ride-along
        inst, hops = m.instances[0], []
        many = inst.execute_many
        inst.execute_many = lambda batches: hops.append([len(b) for b in batches]) or many(batches)
        waiters = [ResponseWaiter() for _ in range(7)]
        reqs = [InferenceRequest('pairs', {'IN': np.array([[float(i)]], np.float32)}, response_callback=w) for i, w in enumerate(waiters)]
        server.submit(reqs[0])
        wait_until(lambda: m.scheduler._running and m.stats.pending == 0, 10, 'request 0 to hold the instance')
        for r in reqs[1:]: server.submit(r)
        (repo / 'pairs' / 'go').touch()
        assert [w.wait(10)[0].outputs['OUT'][0, 0] for w in waiters] == [2.0 * i for i in range(7)]
        assert hops == [[2, 2, 2]]   # [1, 2] by the rule, [3, 4] and [5, 6] along: full, so final
        assert {b: d[1].count for b, d in m.stats.batch_stats.items()} == {1: 1, 2: 3}
        assert (m.stats.execution_count, m.stats.success.count) == (4, 7)
