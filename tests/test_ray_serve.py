"""triton_mini.ray_serve on a local Ray cluster (2 CPUs): tritonclient.http against Serve's proxy with 2 replicas,
models set on every replica through user_config, and a replica killed under a bounded load (issue 16)."""
import os, shutil, socket, tempfile, threading, time
from pathlib import Path

import numpy as np
import pytest

ray = pytest.importorskip('ray', reason='the ray extra is not installed (pip install "triton-mini[ray]")')
serve = pytest.importorskip('ray.serve')
httpclient = pytest.importorskip('tritonclient.http')

from triton_mini.ray_serve import RayTriton, cpu_bound_model
from triton_servers import popen

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

def _free_port():
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

@pytest.fixture(scope='module')
def cluster(tmp_path_factory):
    repo = tmp_path_factory.mktemp('ray_repo')
    shutil.copytree(ROOT / 'model_repository' / 'add_sub', repo / 'add_sub')
    cpu_bound_model(repo, iterations=20_000)
    # A cluster of our own, never one found on the machine (ray.init() with no address joins the last cluster `ray
    # start` made, e.g. another test run's or the user's), started by `_start_cluster`: guarded, it dies with this
    # process however that ends. ray.init(address='local') would start it as this process's children, and SIGKILLed,
    # its DashboardAgent and RuntimeEnvAgent outlived it by minutes (seen with Ray 2.60; GCS and raylet did end).
    gcs, temp_dir = _free_port(), tempfile.mkdtemp(prefix='ray', dir='/tmp')   # short: Ray's socket paths live in it
    auth = os.environ.get('RAY_AUTH_MODE')
    os.environ['RAY_AUTH_MODE'] = 'disabled'   # one local cluster: no token to share between `ray start` and this driver
    try:
        _start_cluster(temp_dir, gcs, {**os.environ, 'PYTHONPATH': str(ROOT)})
        ray.init(address=f'127.0.0.1:{gcs}', log_to_driver=False, runtime_env={'env_vars': {'PYTHONPATH': str(ROOT)}})
        rt = RayTriton.run(repo, port=_free_port(), num_replicas=2, models=['add_sub', 'cpu_bound'])
        yield rt
    finally:
        try: serve.shutdown(); ray.shutdown()
        finally:
            _stop_cluster(temp_dir, gcs)
            if auth is None: os.environ.pop('RAY_AUTH_MODE', None)
            else: os.environ['RAY_AUTH_MODE'] = auth

def _client(rt): return httpclient.InferenceServerClient(rt.url.removeprefix('http://'), network_timeout=30)

def _add_sub(c):
    a, b = np.arange(4, dtype=np.float32)[None], np.ones((1, 4), np.float32)
    inputs = [httpclient.InferInput('INPUT0', [1, 4], 'FP32'), httpclient.InferInput('INPUT1', [1, 4], 'FP32')]
    inputs[0].set_data_from_numpy(a); inputs[1].set_data_from_numpy(b)
    r = c.infer('add_sub', inputs)
    return r.as_numpy('OUTPUT0'), r.as_numpy('OUTPUT1')

def test_two_replica_processes(cluster):
    "Two replicas answer (their class is imported from this checkout: runtime_env's PYTHONPATH)."
    pids = {cluster.handle().pid.remote().result() for _ in range(20)}
    assert len(pids) == 2, pids

def test_tritonclient_against_the_serve_port(cluster):
    c = _client(cluster)
    assert c.is_server_live() and c.is_server_ready() and c.is_model_ready('add_sub')
    s, d = _add_sub(c)
    np.testing.assert_array_equal(s, [[1, 2, 3, 4]]); np.testing.assert_array_equal(d, [[-1, 0, 1, 2]])
    assert c.get_model_metadata('add_sub')['name'] == 'add_sub'
    x = httpclient.InferInput('INPUT0', [4], 'FP32'); x.set_data_from_numpy(np.zeros(4, np.float32))
    np.testing.assert_array_equal(c.infer('cpu_bound', [x]).as_numpy('OUTPUT0'), np.ones(4))

def test_repository_load_is_refused_with_the_way_to_do_it(cluster):
    import requests
    r = requests.post(f'{cluster.url}/v2/repository/models/add_sub/unload')
    assert r.status_code == 400 and 'user_config' in r.json()['error']

def test_set_models_reaches_every_replica(cluster):
    import requests
    cluster.set_models(['add_sub'])
    try:
        # 20 requests over 2 replicas (power of two choices): each replica answers some of them
        answers = {requests.post(f'{cluster.url}/v2/repository/index', json={'ready': True}).text for _ in range(20)}
        assert all('cpu_bound' not in a and 'add_sub' in a for a in answers), answers
    finally:
        cluster.set_models(['add_sub', 'cpu_bound'])
    assert _client(cluster).is_model_ready('cpu_bound')

def _success_by_replica(url) -> dict:
    "nv_inference_request_success of add_sub on the Ray endpoint's /metrics, by replica label."
    import requests
    from prometheus_client.parser import text_string_to_metric_families
    r = requests.get(f'{url}/metrics', timeout=30)
    assert r.status_code == 200 and r.headers['content-type'].startswith('text/plain')
    fams = {f.name: f for f in text_string_to_metric_families(r.text)}
    return {s.labels['replica']: s.value for s in fams['nv_inference_request_success'].samples
            if s.labels['model'] == 'add_sub'}

def test_metrics_of_every_replica(cluster):
    "GET /metrics through Serve's proxy: Triton's families with a sample per replica; 10 more requests show in the sum."
    c = _client(cluster)
    _add_sub(c)
    previous, before = None, _success_by_replica(cluster.url)
    for _ in range(6):                    # settle: both replicas published what they counted so far
        if before == previous and len(before) == 2: break
        time.sleep(2.5); previous, before = before, _success_by_replica(cluster.url)
    before = sum(before.values())
    for _ in range(10): _add_sub(c)
    deadline = time.monotonic() + 15      # the other replica's part is published every health check (2 s)
    while True:
        by_replica = _success_by_replica(cluster.url)
        if (len(by_replica) == 2 and sum(by_replica.values()) == before + 10) or time.monotonic() > deadline: break
        time.sleep(0.5)
    assert len(by_replica) == 2 and sum(by_replica.values()) == before + 10, (before, by_replica)

def test_a_killed_replica_is_replaced(cluster):
    "ray.kill one replica under load from 4 client threads: count failures, then check Serve starts a new replica."
    handle = cluster.handle()
    before = {handle.pid.remote().result() for _ in range(20)}
    replicas = [a for a in ray.util.list_named_actors(all_namespaces=True) if 'TritonReplica' in a['name']]
    assert len(replicas) == 2, replicas
    victim = ray.get_actor(replicas[0]['name'], namespace=replicas[0]['namespace'])
    ok, failed, stop = [0], [], threading.Event()
    def load():
        c = _client(cluster)
        while not stop.is_set():
            try: _add_sub(c); ok[0] += 1
            except Exception as e: failed.append((time.monotonic(), f'{type(e).__name__}: {e}'[:160]))
    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads: t.start()
    time.sleep(1); killed_at = time.monotonic()
    ray.kill(victim, no_restart=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        pids = {handle.pid.remote().result() for _ in range(20)}
        if len(pids) == 2 and pids != before: break
        time.sleep(0.5)
    recovered_at = time.monotonic(); time.sleep(2)
    stop.set()
    for t in threads: t.join()
    late = [f for f in failed if f[0] > recovered_at]
    print(f'\nkill under load: {ok[0]} ok, {len(failed)} failed ({len(late)} after recovery), '
          f'replaced in {recovered_at - killed_at:.1f} s; failures: {sorted({f[1] for f in failed})[:3]}')
    assert len(pids) == 2 and pids != before, (before, pids)    # a new replica process serves
    assert late == [], late                                     # nothing fails once Serve has recovered
    assert len(failed) <= 8                                     # at most the requests in flight on the victim (4 clients), retried or not

def test_shutdown_removes_the_application_and_its_metrics_board(cluster):
    "Last in this file: RayTriton.shutdown deletes the app and kills the detached MetricsBoard actor."
    ray.get_actor(f'triton_mini_metrics_{cluster.name}', namespace='triton_mini')   # exists while the app runs
    cluster.shutdown()
    with pytest.raises(ValueError): ray.get_actor(f'triton_mini_metrics_{cluster.name}', namespace='triton_mini')


def test_the_command_leaves_no_metrics_board_on_a_cluster_that_outlives_it(tmp_path):
    """`triton-mini --ray` on a cluster it joins (RAY_ADDRESS): after SIGTERM the cluster keeps running, and the
    command's detached MetricsBoard actor must not (issue 45: it stayed)."""
    import signal, subprocess, sys, urllib.request
    gcs, temp_dir = _free_port(), tempfile.mkdtemp(prefix='ray', dir='/tmp')   # short: Ray's socket paths live in it
    env = {**os.environ, 'PYTHONPATH': str(ROOT), 'RAY_AUTH_MODE': 'disabled'}   # one local cluster: no token to share
    try:
        _start_cluster(temp_dir, gcs, env)
        port = _free_port()
        cmd = popen([sys.executable, '-m', 'triton_mini', '--ray', f'--http-port={port}', '--http-address=127.0.0.1',
                     f'--model-repository={ROOT / "model_repository"}', '--model-control-mode=explicit',
                     '--load-model=add_sub'], env={**env, 'RAY_ADDRESS': f'127.0.0.1:{gcs}'},
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 180
            while True:
                try:
                    with urllib.request.urlopen(f'http://127.0.0.1:{port}/v2/models/add_sub/ready', timeout=2) as r:
                        if r.status == 200: break
                except OSError: pass
                assert cmd.poll() is None and time.monotonic() < deadline, cmd.stdout.read().decode()[-3000:] if cmd.poll() is not None else 'not ready in 180 s'
                time.sleep(0.5)
            cmd.send_signal(signal.SIGTERM)
            assert cmd.wait(120) == 0
        finally:
            if cmd.poll() is None: os.killpg(cmd.pid, signal.SIGKILL); cmd.wait()
        out = subprocess.run([sys.executable, '-c', 'import ray; ray.init(address="auto", log_to_driver=False)\n'
                              'try: ray.get_actor("triton_mini_metrics_triton_mini", namespace="triton_mini"); print("MetricsBoard alive")\n'
                              'except ValueError: print("no MetricsBoard")'],
                             capture_output=True, text=True, env={**env, 'RAY_ADDRESS': f'127.0.0.1:{gcs}'}, timeout=120)
        assert out.returncode == 0, out.stderr[-2000:]
        assert out.stdout.strip().endswith('no MetricsBoard'), out.stdout
    finally:
        _stop_cluster(temp_dir, gcs)


def _start_cluster(temp_dir:str, gcs:int, env:dict) -> int:
    """`ray start --head` on GCS port `gcs` with `temp_dir`: a local cluster of 2 CPUs that outlives the command; the id of
    its session. Through
    `popen`: `ray start` runs in a session of its own, and the processes it leaves running (GCS, raylet, their workers)
    stay in that session (Ray makes process groups, not sessions), which the guard SIGKILLs when this process ends
    however it ends (issue 41); `_stop_cluster` stops them otherwise."""
    import subprocess
    for attempt in range(3):
        start = popen(['ray', 'start', '--head', f'--port={gcs}', '--num-cpus=2', '--include-dashboard=false', f'--temp-dir={temp_dir}'],
                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        try: _, err = start.communicate(timeout=120)
        finally:
            if start.poll() is None: start.kill(); start.wait()
        # Ray 2.60 gives its raylet a fixed 30 s to register with GCS (ray/_private/node.py, not configurable): on two
        # cores loaded by other test runs that can run out; what the failed start left is stopped, and it starts again.
        if start.returncode == 0 or 'timed out during startup' not in err: break
        _stop_cluster(temp_dir, gcs)
    assert start.returncode == 0, f'ray start failed ({attempt + 1} attempts):\n{err[-2000:]}'
    return start.pid


def _cluster_processes(temp_dir:str, gcs:int) -> list:
    "The processes of the cluster `_start_cluster` made: those naming its temp dir or its GCS address (psutil.Process)."
    import psutil
    return [p for p in psutil.process_iter(['cmdline'])
            if any(temp_dir in a or a.endswith(f':{gcs}') for a in (p.info['cmdline'] or []))]


def _stop_cluster(temp_dir:str, gcs:int):
    """Kill the processes of the cluster `ray start` made here: those naming its temp dir or its GCS address. Not
    `ray stop --force`, which kills every Ray process on the machine (another test run's, the user's own cluster)."""
    import psutil
    ours = _cluster_processes(temp_dir, gcs)
    for p in ours:
        try: p.kill()
        except psutil.NoSuchProcess: pass
    psutil.wait_procs(ours, timeout=30)
    shutil.rmtree(temp_dir, ignore_errors=True)
