"""`triton-mini` / `python -m triton_mini` as a user runs it: flags, exit codes, the startup table,
tritonserver's log format, exit-on-error, poll mode and graceful shutdown on SIGTERM."""
import json, re, shutil, subprocess, sys, textwrap, threading, time, urllib.error, urllib.request
from pathlib import Path

import pytest

from triton_mini.cli import example_repository, wait_for_http
from triton_servers import MiniProcess, free_port, http, popen, settled, wait_until

LOG_LINE = re.compile(r'^[IWE]\d{4} \d\d:\d\d:\d\d\.\d{6} \d+ [\w.]+:\d+\] ')


def write_model(root, name, config, model_py=None):
    d = Path(root) / name
    (d / '1').mkdir(parents=True, exist_ok=True)
    (d / 'config.pbtxt').write_text(textwrap.dedent(config))
    if model_py is not None: (d / '1' / 'model.py').write_text(textwrap.dedent(model_py))
    return d


SLEEPY = '''
import time, numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        pb_utils.Logger.log_info("sleepy executing")
        time.sleep(1.0)
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy())]) for r in requests]
    def finalize(self):
        pb_utils.Logger.log_info("sleepy finalized")
'''
SLEEPY_CFG = '''name: "sleepy"
backend: "python"
input [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]
output [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]
'''


class Server(MiniProcess):
    "A `python -m triton_mini` subprocess on free ports (gRPC off unless asked for), with the client calls these tests make."
    def __init__(self, *flags, repo=None, grpc=False, wait='ready'):
        super().__init__(repo, *flags, grpc=grpc, wait=wait)

    @property
    def url(self): return f'http://127.0.0.1:{self.http_port}'

    def get(self, path):
        try:
            with urllib.request.urlopen(self.url + path, timeout=10) as r: return r.status, r.read()
        except urllib.error.HTTPError as e: return e.code, e.read()

    def post(self, path, doc):
        req = urllib.request.Request(self.url + path, data=json.dumps(doc).encode(), method='POST')
        try:
            with urllib.request.urlopen(req, timeout=30) as r: return r.status, json.loads(r.read() or b'null')
        except urllib.error.HTTPError as e: return e.code, json.loads(e.read() or b'null')


def run(*flags, timeout=60):
    return subprocess.run([sys.executable, '-m', 'triton_mini', *flags], capture_output=True, text=True, timeout=timeout)


def test_help_and_bad_flags():
    assert run('--help').returncode == 0
    bad = run('--no-such-flag')
    assert bad.returncode == 2 and 'unrecognized arguments: --no-such-flag' in bad.stderr
    assert run('--exit-on-error=maybe').returncode == 2


def test_flag_consistency_errors(tmp_path):
    r = run('--load-model=add_sub', f'--model-repository={tmp_path}')
    assert r.returncode == 1 and "Use of '--load-model' requires setting '--model-control-mode=explicit' as well." in r.stderr
    r = run('--model-control-mode=explicit', '--load-model=*', '--load-model=x', f'--model-repository={tmp_path}')
    assert r.returncode == 1 and "Wildcard model name '*' must be the ONLY startup model" in r.stderr
    r = run('--model-repository=/no/such/dir')
    assert r.returncode == 1 and 'failed to stat file /no/such/dir' in r.stderr


def test_bundled_repository_by_default():
    "No --model-repository: the bundled example repository (README's first command), over HTTP and gRPC."
    s = Server(grpc=True)
    try:
        assert wait_for_http(s.url + '/v2/health/ready', 120)
        assert s.get('/v2/health/ready')[0] == 200, s.output
        index = s.post('/v2/repository/index', {})[1]
        names = {e['name'] for e in index if e.get('state') == 'READY'}
        assert {'add_sub', 'identity_bytes', 'add_sub_ensemble', 'linear_onnx'} <= names
        status, out = s.post('/v2/models/add_sub/infer', {'inputs': [
            {'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]},
            {'name': 'INPUT1', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 1, 1, 1]}]})
        assert status == 200 and out['outputs'][0]['data'] == [2.0, 3.0, 4.0, 5.0]
        import numpy as np, tritonclient.grpc as grpcclient
        client = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}')
        assert client.is_server_ready() and client.is_model_ready('add_sub')
        ins = [grpcclient.InferInput('INPUT0', [1, 4], 'FP32'), grpcclient.InferInput('INPUT1', [1, 4], 'FP32')]
        for i in ins: i.set_data_from_numpy(np.ones((1, 4), np.float32))
        assert client.infer('add_sub', ins).as_numpy('OUTPUT0').tolist() == [[2, 2, 2, 2]]
    finally: assert s.stop() == 0
    assert '| add_sub ' in s.output and 'READY' in s.output
    assert f'Started GRPCInferenceService at 0.0.0.0:{s.grpc_port}' in s.output
    assert f'Started HTTPService at 0.0.0.0:{s.http_port}' in s.output and f'Started Metrics Service at 0.0.0.0:{s.metrics_port}' in s.output
    ours = [l for l in s.lines if 'successfully loaded' in l or 'Started' in l or 'Signal (15)' in l]
    assert len(ours) >= 6 and all(LOG_LINE.match(l) for l in ours), s.output   # model prints pass through as they are


def test_exit_on_error(tmp_path):
    write_model(tmp_path, 'good', SLEEPY_CFG.replace('sleepy', 'good'), SLEEPY)
    write_model(tmp_path, 'bad', 'name: "bad" backend: "python" input [ { name: "X" data_type: TYPE_FP32 } ]', SLEEPY)
    r = run(f'--model-repository={tmp_path}', '--allow-grpc=false', f'--http-port={free_port()}', f'--metrics-port={free_port()}')
    assert r.returncode == 1
    assert "| bad   | 1       | UNAVAILABLE: Invalid argument: model input 'X' must specify 'dims' for bad |" in r.stderr
    assert 'error: creating server: Internal - failed to load all models' in r.stderr
    s = Server('--exit-on-error=false', repo=tmp_path, wait='live')   # not every model is READY
    try:
        assert wait_for_http(s.url + '/v2/health/live', 60)
        assert s.get('/v2/health/ready') == (400, b'')          # not every model is READY
        assert s.get('/v2/models/good/ready')[0] == 200
        assert s.post('/v2/models/bad/infer', {'inputs': []}) == (404, {'error': "Request for unknown model: 'bad' has no available versions"})
    finally: assert s.stop() == 0


def test_graceful_shutdown_finishes_in_flight_requests(tmp_path):
    write_model(tmp_path, 'sleepy', SLEEPY_CFG, SLEEPY)
    s = Server('--exit-timeout-secs=10', repo=tmp_path)
    assert wait_for_http(s.url + '/v2/health/ready', 60)
    result = {}
    t = threading.Thread(target=lambda: result.update(r=s.post('/v2/models/sleepy/infer', {
        'inputs': [{'name': 'X', 'shape': [1], 'datatype': 'FP32', 'data': [7]}]})))
    t.start()
    for _ in range(500):                       # until the model logs that it is executing the request
        if 'sleepy executing' in s.output: break
        time.sleep(0.01)
    assert s.stop() == 0
    t.join(10)
    assert result['r'][0] == 200 and result['r'][1]['outputs'][0]['data'] == [7.0]
    assert 'Signal (15) received.' in s.output and 'sleepy finalized' in s.output


def test_poll_mode_picks_up_a_new_model(tmp_path):
    s = Server('--model-control-mode=poll', '--repository-poll-secs=0.5', repo=tmp_path)
    try:
        assert wait_for_http(s.url + '/v2/health/ready', 60)
        assert s.get('/v2/models/sleepy/ready')[0] == 400
        staging = tmp_path.parent / 'staging'
        write_model(staging, 'sleepy', SLEEPY_CFG, SLEEPY)
        shutil.move(str(staging / 'sleepy'), str(tmp_path / 'sleepy'))   # appear atomically
        for _ in range(100):
            if s.get('/v2/models/sleepy/ready')[0] == 200: break
            time.sleep(0.1)
        assert s.get('/v2/models/sleepy/ready')[0] == 200
        assert s.post('/v2/repository/models/sleepy/unload', {})[1] == {'error': 'explicit model load / unload is not allowed if polling is enabled'}
    finally: assert s.stop() == 0


def test_metrics_port_and_flags(tmp_path):
    write_model(tmp_path, 'sleepy', SLEEPY_CFG, SLEEPY)
    s = Server('--allow-metrics=false', '--log-verbose=1', repo=tmp_path)
    try:
        assert wait_for_http(s.url + '/v2/health/ready', 60)
        with pytest.raises(OSError): urllib.request.urlopen(f'http://127.0.0.1:{s.metrics_port}/metrics', timeout=2)
    finally: assert s.stop() == 0


# tritonserver 2.51's options, from its --help (tools/real_triton.py --help); test_every_flag_matches_live_help re-reads them
TRITONSERVER_FLAGS = '''	--allow-metrics 	--grpc-use-ssl 	--host-policy 	--load-model 	--model-config-name 	--rate-limit-resource 	--trace-log-frequency --allow-cpu-metrics --allow-gpu-metrics --allow-grpc --allow-http --allow-metrics --allow-sagemaker --allow-vertex-ai --backend-config --backend-directory --buffer-manager-thread-count --cache-config --cache-directory --cuda-memory-pool-byte-size --cuda-virtual-address-size --disable-auto-complete-config --enable-peer-access --exit-on-error --exit-timeout-secs --grpc-address --grpc-header-forward-pattern --grpc-http2-max-ping-strikes --grpc-http2-max-pings-without-data --grpc-http2-min-recv-ping-interval-without-data --grpc-infer-allocation-pool-size --grpc-infer-response-compression-level --grpc-keepalive-permit-without-calls --grpc-keepalive-time --grpc-keepalive-timeout --grpc-max-connection-age --grpc-max-connection-age-grace --grpc-port --grpc-restricted-protocol --grpc-root-cert --grpc-server-cert --grpc-server-key --grpc-use-ssl --grpc-use-ssl-mutual --help --host-policy --http-address --http-header-forward-pattern --http-port --http-restricted-api --http-thread-count --id --load-model --log-error --log-file --log-format --log-info --log-verbose --log-warning --metrics-address --metrics-config --metrics-interval-ms --metrics-port --min-supported-compute-capability --model-config-name --model-control-mode --model-load-gpu-limit --model-load-retry-count --model-load-thread-count --model-namespacing --model-repository --model-store --pinned-memory-pool-byte-size --rate-limit --rate-limit-resource --repoagent-directory --repository-poll-secs --response-cache-byte-size --reuse-grpc-port --reuse-http-port --sagemaker-port --sagemaker-safe-port-range --sagemaker-thread-count --strict-model-config --strict-readiness --trace-config --trace-count --trace-file --trace-level --trace-log-frequency --trace-rate --vertex-ai-default-model --vertex-ai-port --vertex-ai-thread-count '''.split()


def test_every_tritonserver_flag_is_accepted():
    "A launch script written for tritonserver 2.51 parses: every option is implemented or accepted and named as ignored."
    from triton_mini.cli import build_parser, ignored_flags
    ours = {o for a in build_parser()._actions for o in a.option_strings}
    assert [f for f in TRITONSERVER_FLAGS if f not in ours] == []
    args = build_parser().parse_args(['--trace-level=TIMESTAMPS', '--allow-sagemaker=false', '--model-namespacing', '--cache-directory', '/opt'])
    assert ignored_flags(args) == ['--cache-directory', '--allow-sagemaker'] and args.model_namespacing is True   # tracing and the cache are implemented


@pytest.mark.oracle
def test_every_flag_matches_live_help(oracle):
    import re, subprocess
    r = subprocess.run([oracle, '--help'], capture_output=True, text=True, timeout=300)
    out = r.stdout + r.stderr
    assert sorted(set(re.findall(r'^\s+(--[a-z0-9-]+)', out, re.M))) == sorted(set(TRITONSERVER_FLAGS))


IDENTITY_CFG = '''backend: "identity"
max_batch_size: {mbs}
input [ {{ name: "X" data_type: TYPE_FP32 dims: [ 1 ] }} ]
output [ {{ name: "Y" data_type: TYPE_FP32 dims: [ 1 ] }} ]
'''

@pytest.mark.oracle
@pytest.mark.parametrize('name', ['small', 'absent'])
def test_model_config_name_matches_triton(tmp_path, launch, name):
    "--model-config-name=small reads configs/small.pbtxt where a model has it, config.pbtxt elsewhere or when it is absent."
    repo = tmp_path / 'models'
    for model, custom in (('with_custom', True), ('plain', False)):
        write_model(repo, model, IDENTITY_CFG.format(mbs=8), SLEEPY)
        (repo / model / 'config.pbtxt').write_text('backend: "python"\n' + IDENTITY_CFG.format(mbs=8).split('\n', 1)[1])
        if custom:
            (repo / model / 'configs').mkdir()
            (repo / model / 'configs' / 'small.pbtxt').write_text('backend: "python"\n' + IDENTITY_CFG.format(mbs=2).split('\n', 1)[1])
    seen = {}
    for kind, start in (('triton', launch.real_triton), ('mini', launch.mini_process)):
        s = start(repo, f'--model-config-name={name}')
        seen[kind] = {m: json.loads(urllib.request.urlopen(f'http://127.0.0.1:{s.http_port}/v2/models/{m}/config').read())['max_batch_size']
                      for m in ('with_custom', 'plain')}
    assert seen['mini'] == seen['triton'] == {'with_custom': 2 if name == 'small' else 8, 'plain': 8}


@pytest.mark.slow
def test_ray_flag_serves_replicas(tmp_path):
    "`triton-mini --ray --replicas 2`: the repository behind Ray Serve on --http-port, tritonclient unchanged, SIGTERM stops it."
    pytest.importorskip('ray', reason='the ray extra is not installed')
    import signal, tritonclient.http as httpclient
    import numpy as np
    repo = tmp_path / 'models'
    shutil.copytree(example_repository() / 'add_sub', repo / 'add_sub')
    port = free_port()
    proc = popen([sys.executable, '-m', 'triton_mini', '--ray', '--replicas', '2', f'--model-repository={repo}',
                  f'--http-port={port}', '--http-address=127.0.0.1', '--allow-grpc=false', '--allow-metrics=false'],
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)   # its group dies with pytest: Ray's processes too
    try:
        end = time.monotonic() + 120
        while time.monotonic() < end:
            try:
                if urllib.request.urlopen(f'http://127.0.0.1:{port}/v2/health/ready', timeout=2).status == 200: break
            except OSError: time.sleep(0.5)
            assert proc.poll() is None, proc.stdout.read()
        client = httpclient.InferenceServerClient(f'127.0.0.1:{port}')
        inputs = [httpclient.InferInput(n, [1, 4], 'FP32') for n in ('INPUT0', 'INPUT1')]
        for i in inputs: i.set_data_from_numpy(np.ones((1, 4), np.float32))
        assert client.infer('add_sub', inputs).as_numpy('OUTPUT0').tolist() == [[2, 2, 2, 2]]
    finally:
        proc.send_signal(signal.SIGTERM)
        try: code = proc.wait(90)
        except subprocess.TimeoutExpired: proc.kill(); raise
    assert code == 0, proc.stdout.read()[-2000:]


def test_ray_flag_without_ray_says_what_to_install(tmp_path):
    code = "import sys; sys.modules['ray'] = None; from triton_mini.cli import main; sys.exit(main(['--ray']))"
    r = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=60)
    assert r.returncode == 1 and 'pip install "triton-mini[ray]"' in r.stderr


@pytest.mark.oracle
def test_load_log_lines_as_triton(tmp_path, real_triton, mini_process):
    "Each model's load is logged as Triton 2.51 logs it, as it starts ('loading: m:1') and when it is done."
    for name in ('first', 'second'): write_model(tmp_path, name, SLEEPY_CFG.replace('sleepy', name), SLEEPY)
    def load_lines(s):
        return sorted(l.split('] ', 1)[1] for l in s.lines if '] "loading: ' in l or '] "successfully loaded' in l)
    theirs, ours = load_lines(real_triton(tmp_path)), load_lines(mini_process(tmp_path))
    assert ours == theirs == ['"loading: first:1"', '"loading: second:1"', '"successfully loaded \'first\'"', '"successfully loaded \'second\'"']


SLOW_LOAD = '''
import time
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def initialize(self, args): time.sleep(30)
    def execute(self, requests): return []
'''


@pytest.mark.parametrize('service', ['http', 'grpc', 'metrics'])
def test_a_busy_port_ends_the_start_before_loading(tmp_path, service):
    "A model that takes 30 s to load, and a port already taken: exit 1 at once (not after the load), naming the port."
    import socket, time as _time
    write_model(tmp_path, 'slow', SLEEPY_CFG.replace('sleepy', 'slow'), SLOW_LOAD)
    busy = socket.socket(); busy.bind(('0.0.0.0', 0)); busy.listen()
    port = busy.getsockname()[1]
    ports = {k: (port if k == service else free_port()) for k in ('http', 'grpc', 'metrics')}
    t0 = _time.monotonic()
    r = run(f'--model-repository={tmp_path}', *(f'--{k}-port={v}' for k, v in ports.items()))
    took = _time.monotonic() - t0
    busy.close()
    word = {'http': 'HTTP', 'grpc': 'GRPC', 'metrics': 'Metrics'}[service]
    assert r.returncode == 1 and f"failed to start {word} service: Unavailable - Socket '0.0.0.0:{port}' already in use " in r.stderr, r.stderr[-2000:]
    assert 'loading: slow:1' not in r.stderr and took < 15, took   # nothing loaded (the load alone takes 30 s)


@pytest.mark.oracle
@pytest.mark.parametrize('service', ['http', 'grpc', 'metrics'])
def test_a_busy_port_is_reported_in_tritons_words(tmp_path, service):
    "The same words from real Triton 2.51 (which reports it after loading: here the repository is empty)."
    import socket, subprocess
    from triton_servers import ORACLE, oracle_or_skip
    oracle_or_skip()
    busy = socket.socket(); busy.bind(('0.0.0.0', 0)); busy.listen()
    port = busy.getsockname()[1]
    ports = {k: (port if k == service else free_port()) for k in ('http', 'grpc', 'metrics')}
    r = subprocess.run([ORACLE, f'--model-repository={tmp_path}', *(f'--{k}-port={v}' for k, v in ports.items()), '--exit-timeout-secs=1'],
                       capture_output=True, text=True, timeout=120)
    busy.close()
    word = {'http': 'HTTP', 'grpc': 'GRPC', 'metrics': 'Metrics'}[service]
    assert r.returncode == 1 and f"failed to start {word} service: Unavailable - Socket '0.0.0.0:{port}' already in use " in r.stdout + r.stderr


MEETING = '''
import os, time
class TritonPythonModel:
    def initialize(self, args):
        "Load only while three other models load too (a file each in a shared folder), as --model-load-thread-count=4 allows."
        meet = {meet!r}
        open(os.path.join(meet, args['model_name']), 'w').close()
        deadline = time.monotonic() + 60
        while len(os.listdir(meet)) < 4:
            if time.monotonic() > deadline: raise RuntimeError('loaded alone: no other model loaded meanwhile')
            time.sleep(0.05)
    def execute(self, requests): return []
'''


def _meeting_repo(root, meet, n=4):
    meet.mkdir()
    for i in range(n): write_model(root, f'm{i}', SLEEPY_CFG.replace('sleepy', f'm{i}'), MEETING.format(meet=str(meet)))


@pytest.mark.oracle
@pytest.mark.parametrize('server', ['triton_mini', 'real Triton'])
def test_models_load_four_at_a_time(tmp_path, real_triton, mini_process, server):
    "Four models that each load only while the three others are loading: both servers load them (Triton's default of 4 at once)."
    _meeting_repo(tmp_path / 'repo', tmp_path / 'meet')
    s = (mini_process if server == 'triton_mini' else real_triton)(tmp_path / 'repo', timeout=120)
    loaded = sorted(l.split('] ', 1)[1] for l in s.lines if '] "successfully loaded' in l)
    assert loaded == [f'"successfully loaded \'m{i}\'"' for i in range(4)], s.log_tail()


def test_model_load_thread_count_below_one_is_refused():
    "tritonserver 2.51 aborts (std::bad_alloc) on a negative count: here any count below 1 is a usage error."
    bad = run('--model-load-thread-count=0')
    assert bad.returncode == 2 and "invalid count '0': expected an integer of at least 1" in bad.stderr


def two_repositories(tmp_path):
    "Two repositories that both hold a model 'dup', and one other model each ('a', 'b')."
    repos = tmp_path / 'r1', tmp_path / 'r2'
    for repo, other in zip(repos, ('a', 'b')):
        for name in ('dup', other): write_model(repo, name, SLEEPY_CFG.replace('sleepy', name), SLEEPY)
    return repos


def _error_lines(server, name):
    return [l.split('] ', 1)[1] for l in server.lines if l.startswith('E') and f"'{name}'" in l]


@pytest.mark.oracle
def test_a_name_in_two_repositories_is_unavailable_as_in_triton(tmp_path, real_triton, mini_process):
    "A model folder name in two repositories: neither loads, the index says why, the log names it, the others serve."
    r1, r2 = two_repositories(tmp_path)
    def seen(s):
        index = json.loads(s.request('POST', '/v2/repository/index')[2])
        meta = s.request('GET', '/v2/models/dup')
        return (index, s.request('GET', '/v2/health/ready')[0], (meta[0], json.loads(meta[2])),
                s.request('GET', '/v2/models/a/ready')[0], _error_lines(s, 'dup'))
    flags = (f'--model-repository={r2}', '--exit-on-error=false')
    theirs, ours = seen(real_triton(r1, *flags)), seen(mini_process(r1, *flags))
    assert ours == theirs
    assert theirs[0][2] == {'name': 'dup', 'state': 'UNAVAILABLE', 'reason': 'model appears in two or more repositories'}
    assert theirs[4] == ['"failed to poll model \'dup\': not unique across all model repositories"']


@pytest.mark.oracle
def test_a_name_in_two_repositories_fails_the_start_as_in_triton(tmp_path, real_triton, mini_process):
    "With --exit-on-error (the default) the duplicate is a failed load: both servers exit 1 after loading the others."
    r1, r2 = two_repositories(tmp_path)
    servers = [launch(r1, f'--model-repository={r2}', wait=None) for launch in (real_triton, mini_process)]
    for s in servers: s.proc.wait(120)
    assert [s.proc.returncode for s in servers] == [1, 1]
    assert all('error: creating server: Internal - failed to load all models' in s.output for s in servers)


@pytest.mark.oracle
def test_loading_a_name_in_two_repositories_fails_as_in_triton(tmp_path, real_triton, mini_process):
    "Explicit mode: the index lists the name as UNAVAILABLE before any load; a load request for it fails, logging two lines."
    r1, r2 = two_repositories(tmp_path)
    def seen(s):
        before = json.loads(s.request('POST', '/v2/repository/index')[2])
        status, _, body = s.request('POST', '/v2/repository/models/dup/load')
        return before, status, json.loads(body), _error_lines(s, 'dup')
    flags = (f'--model-repository={r2}', '--model-control-mode=explicit')
    theirs, ours = seen(real_triton(r1, *flags)), seen(mini_process(r1, *flags))
    assert ours == theirs
    assert theirs[2] == {'error': "failed to load 'dup', failed to poll from model repository"}


def agent_models(root):
    "'good' (checksum agent, right MD5), 'bad' (checksum agent, wrong MD5), 'unknown' (an agent nobody has), 'plain'."
    import hashlib
    for name in ('good', 'bad', 'unknown', 'plain'): write_model(root, name, SLEEPY_CFG.replace('sleepy', name), SLEEPY)
    md5 = hashlib.md5((root / 'good' / '1' / 'model.py').read_bytes()).hexdigest()
    agents = {'good': f'{{ name: "checksum", parameters {{ key: "MD5:1/model.py" value: "{md5}" }} }}',
              'bad': '{ name: "checksum", parameters { key: "MD5:1/model.py" value: "0123456789abcdef0123456789abcdef" } }',
              'unknown': '{ name: "nosuch" }'}
    for name, agent in agents.items():
        with open(root / name / 'config.pbtxt', 'a') as f: f.write(f'model_repository_agents {{ agents [ {agent} ] }}\n')


@pytest.mark.oracle
@pytest.mark.parametrize('agent_dir', [None, '/nonexistent/repoagents'])
def test_repository_agents_as_in_triton(tmp_path, real_triton, mini_process, agent_dir):
    """Triton 2.51's wheel ships no repository agent (not even checksum): a model naming one fails to poll, whatever
    its MD5s, naming the library and the directory searched; the other models serve."""
    agent_models(tmp_path)
    def seen(s):
        polls = sorted(l.split('] ', 1)[1] for l in s.lines if l.startswith('E') and 'Poll failed' in l)
        return json.loads(s.request('POST', '/v2/repository/index')[2]), s.request('GET', '/v2/health/ready')[0], polls
    flags = ('--exit-on-error=false', *([f'--repoagent-directory={agent_dir}'] if agent_dir else []))
    theirs, ours = seen(real_triton(tmp_path, *flags)), seen(mini_process(tmp_path, *flags))
    assert ours == theirs
    searched = agent_dir or '/opt/tritonserver/repoagents'
    assert theirs[2][0] == (f'"Poll failed for model directory \'bad\': unable to find \'libtritonrepoagent_checksum.so\' '
                            f'for repo agent \'checksum\', searched: {searched}"')


PLUS = '''import numpy as np, triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("Y", pb_utils.get_input_tensor_by_name(r, "X").as_numpy() + %s)])
                for r in requests]
'''
ONE_IN_OUT = 'max_batch_size: 0\ninput [ { name: "X" data_type: TYPE_FP32 dims: [ 1 ] } ]\noutput [ { name: "Y" data_type: TYPE_FP32 dims: [ 1 ] } ]\n'
ENSEMBLE_OF_M = ('platform: "ensemble"\n' + ONE_IN_OUT + 'ensemble_scheduling { step [ { model_name: "m" model_version: -1 '
                 'input_map { key: "X" value: "X" } output_map { key: "Y" value: "Y" } } ] }\n')


def namespaced_repositories(root) -> tuple:
    "Repositories A and B both hold `m` (A's adds 1, B's 100) and an ensemble `e` of `m`; A also has `ea`, B `eb`, ensembles of `m`."
    repos = root / 'A', root / 'B'
    for repo, add in zip(repos, (1, 100)):
        write_model(repo, 'm', 'backend: "python"\n' + ONE_IN_OUT, PLUS % add)
        for e in ('e', 'e' + repo.name.lower()): write_model(repo, e, ENSEMBLE_OF_M)
    return repos

X_IS_1 = {'inputs': [{'name': 'X', 'datatype': 'FP32', 'shape': [1], 'data': [1]}]}

def answer(s, method, path, body=None) -> tuple:
    "(status, the gist of the body): its error, an inference's outputs, statistics' (name, version)s, or a name."
    status, _, text = http(s.http_port, method, path, body)
    if not text: return status, None
    j = json.loads(text)
    if 'error' in j: return status, j['error']
    if 'model_name' in j: return status, [o['data'] for o in j['outputs']]
    if 'model_stats' in j: return status, [(m['name'], m['version']) for m in j['model_stats']]   # counts may lag (settled)
    return status, j if isinstance(j, list) else j.get('name')

def grpc_answers(s, names) -> list:
    "Readiness, metadata and inference of each of `names` over gRPC: the answer, or the error's code and text."
    import numpy as np, tritonclient.grpc as grpcclient
    c = grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}')
    x = grpcclient.InferInput('X', [1], 'FP32').set_data_from_numpy(np.array([1], np.float32))
    out = []
    for n in names:
        for call in (lambda: c.is_model_ready(n), lambda: c.get_model_metadata(n).name,
                     lambda: c.infer(n, [x]).as_numpy('Y').tolist(), lambda: len(c.get_inference_statistics(n).model_stats)):
            try: out.append(call())
            except Exception as e: out.append((e.status(), e.message()))
    return out

def namespaced_metrics(s) -> list:
    "The success counters, sorted (Triton's order is a hash map's)."
    read = lambda: urllib.request.urlopen(f'http://127.0.0.1:{s.metrics_port}/metrics').read().decode()
    return sorted(l for l in settled(read).splitlines() if l.startswith('nv_inference_request_success{'))


@pytest.mark.oracle
def test_model_namespacing_as_in_triton(tmp_path, real_triton, mini_process):
    """`--model-namespacing=true` (02_model_repository's appendix): every model loads as `<repository path>::<name>`; a
    request names a model only, so a name two repositories hold is ambiguous over HTTP and gRPC (`ns::name` is an
    unknown model), a unique name serves, each ensemble finds `m` in its own repository, the metrics gain a
    `namespace` label, and every model's statistics fail naming an identifier. The same requests, the same answers."""
    repos = namespaced_repositories(tmp_path)
    flags = (f'--model-repository={repos[1]}', '--model-namespacing=true')
    requests = [('POST', '/v2/repository/index')] + [('POST', f'/v2/models/{n}/infer', X_IS_1) for n in ('m', 'e', 'ea', 'eb', 'ea', 'nosuch', 'A%3A%3Am')]
    requests += [('GET', f'/v2/models/{n}{what}') for n in ('m', 'ea') for what in ('', '/ready', '/config', '/stats', '/versions/1')]
    requests += [('GET', '/v2/models/stats'), ('POST', '/v2/repository/models/m/load')]
    def seen(s):
        answers = [answer(s, *r) for r in requests]
        loaded = sorted(l.split('] ', 1)[1] for l in s.lines if 'loading: ' in l or 'successfully loaded' in l)
        return answers, grpc_answers(s, ['m', 'ea']), namespaced_metrics(s), loaded
    theirs, ours = seen(real_triton(repos[0], *flags)), seen(mini_process(repos[0], *flags))
    assert ours == theirs
    answers, grpc, metrics, loaded = theirs
    ambiguous = "There are 2 identifiers of model 'm' in global map, model namespace must be provided to resolve ambiguity."
    assert sorted(e['name'] for e in answers[0][1]) == ['e', 'e', 'ea', 'eb', 'm', 'm'] and {e['state'] for e in answers[0][1]} == {'READY'}
    assert answers[1:8] == [(400, ambiguous), (400, ambiguous.replace("'m'", "'e'")), (200, [[2.0]]), (200, [[101.0]]), (200, [[2.0]]),
                            (400, "Request for unknown model: 'nosuch' is not found"), (400, "Request for unknown model: 'A%3A%3Am' is not found")]
    assert answers[8:10] == [(400, ambiguous), (400, 'Model version not ready')] and answers[11] == (400, "requested model 'm' is not available")
    assert answers[-2] == (400, f"Request for unknown model: '{repos[0]}::e' is not found")
    assert grpc[:2] == [False, ('StatusCode.INVALID_ARGUMENT', ambiguous)] and grpc[4:7] == [True, 'ea', [2.0]]
    assert f'nv_inference_request_success{{model="ea",namespace="{repos[0]}",version="1"}} 3' in metrics
    assert f'"loading: {repos[0]}::m:1"' in loaded and f"\"successfully loaded '{repos[0]}::m'\"" in loaded


@pytest.mark.oracle
def test_model_namespacing_in_explicit_mode_as_in_triton(tmp_path, real_triton, mini_process):
    """With namespacing, a load or unload request names every repository's model of that name: loading `ea` loads
    both `m` first, unloading `m` unloads both and the ensembles of them; an unloaded ensemble's error names its
    identifier."""
    repos = namespaced_repositories(tmp_path)
    flags = (f'--model-repository={repos[1]}', '--model-namespacing=true', '--model-control-mode=explicit')
    def index(s):
        still = lambda: not {'LOADING', 'UNLOADING'} & {e.get('state') for e in answer(s, 'POST', '/v2/repository/index')[1]}
        wait_until(still, 60, 'no model loading or unloading')
        return answer(s, 'POST', '/v2/repository/index')
    def seen(s):
        out = [index(s), answer(s, 'POST', '/v2/repository/models/ea/load'), index(s), answer(s, 'POST', '/v2/models/ea/infer', X_IS_1),
               answer(s, 'POST', '/v2/repository/models/eb/load'), answer(s, 'POST', '/v2/models/eb/infer', X_IS_1),
               answer(s, 'POST', '/v2/models/m/infer', X_IS_1)]
        out += [answer(s, 'POST', '/v2/repository/models/m/unload'), index(s), answer(s, 'POST', '/v2/models/ea/infer', X_IS_1)]
        return out
    theirs, ours = seen(real_triton(repos[0], *flags)), seen(mini_process(repos[0], *flags))
    assert ours == theirs
    ready = lambda i: sorted(e['name'] for e in theirs[i][1] if e.get('state') == 'READY')
    assert ready(2) == ['ea', 'm', 'm'] and theirs[3] == (200, [[2.0]]) and theirs[5] == (200, [[101.0]]) and ready(8) == []
    assert theirs[9] == (404, f"Request for unknown model: '{repos[0]}::ea' has no available versions")
