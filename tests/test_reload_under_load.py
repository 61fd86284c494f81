"""Reloading a model under traffic never fails a request; unloading it answers Triton's error; nothing leaks
(issue 18 item 4: 5 of ~78k requests got 404 "no available versions" during pure reloads).

A reload publishes the new version before the old one's scheduler stops taking requests, yet a request that
looked the old version up a moment earlier can reach it after it stopped. `TritonServer.submit` then hands it to
the version serving now. The window is microseconds wide and depends on thread scheduling, so the first tests
open it deterministically (a lookup that returns stale versions), one case each: several reloads raced, a
version asked for by number, a reload that changed the inputs' config, and an unload. The load tests then run
the issue's scenario: 8 client threads while a model is reloaded 100 times (in process, for a Python model and
an ONNX model with the dynamic batcher, and once over HTTP): zero failed requests, Triton's error text for
every request after the unload, no thread left behind and no memory growth beyond a generous ceiling
(tracemalloc; before the fix each reload kept its model module alive, about 20 kB a reload).
"""
import gc, http.client, json, shutil, threading, time, tracemalloc
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from triton_mini.cli import example_repository
from triton_mini.server import TritonServer
from triton_mini.tensors import TritonError

from triton_servers import MiniTriton

GONE = "Request for unknown model: '{}' has no available versions"
X = np.ones((1, 4), np.float32)


def repo_with(tmp_path, *models) -> Path:
    root = tmp_path / 'models'
    for m in models: shutil.copytree(example_repository() / m, root / m, ignore=shutil.ignore_patterns('__pycache__'))
    return root


def inputs(model):
    return {'INPUT0': X, 'INPUT1': X} if model == 'add_sub' else {'INPUT0': X}


def reload(server, model, cycle, **changes):
    "A real reload: a config override that differs from the serving one (a parameter with the cycle number)."
    cfg = json.loads(server.model_config(model).to_json())
    cfg['parameters'] = {**cfg.get('parameters', {}), 'cycle': {'string_value': str(cycle)}}
    server.load_model(model, config=json.dumps({**cfg, **changes}))


@pytest.fixture
def server(tmp_path):
    s = TritonServer(repo_with(tmp_path, 'add_sub', 'linear_onnx'), model_control_mode='explicit', load_models=['add_sub', 'linear_onnx'])
    assert s.start() == {}
    yield s
    s.stop()


def stale_versions(server, model, n, **changes) -> list:
    "`n` retired (stopped) versions of `model`, oldest first, each replaced by a reload."
    out = []
    for i in range(n):
        out.append(server.repository.get(model))
        reload(server, model, i, **changes)
    server.repository.wait_for_unloads()
    assert all(m.scheduler._stopping for m in out)
    return out


def lookups_return(server, stale):
    "Make the next lookups see the stale versions first (as a request that lost the race would), then the real map."
    real_get, queue = server.repository.get, list(stale)
    server.repository.get = lambda name, version=-1, namespace=None: queue.pop(0) if queue else real_get(name, version, namespace)


# ------------------------------------------------------------------------------- the race, opened on purpose

def test_a_request_that_raced_several_reloads_is_served(server):
    lookups_return(server, stale_versions(server, 'add_sub', 3))
    assert server.infer('add_sub', inputs('add_sub'))['OUTPUT0'].tolist() == [[2, 2, 2, 2]]


def test_a_request_for_a_version_by_number_that_raced_a_reload_is_served(server):
    lookups_return(server, stale_versions(server, 'add_sub', 1))
    resp = server.infer('add_sub', inputs('add_sub'), model_version=1)
    assert (resp['OUTPUT0'].tolist(), resp.model_version) == ([[2, 2, 2, 2]], 1)


def test_a_request_that_raced_a_config_change_is_validated_against_the_new_config(server):
    "The reload changed the inputs (dims [4] -> [-1]); the request is valid for both and is served by the new one."
    old = stale_versions(server, 'add_sub', 1)
    cfg = json.loads(server.model_config('add_sub').to_json())
    for i in cfg['input'] + cfg['output']: i['dims'] = [-1]
    server.load_model('add_sub', config=json.dumps(cfg))
    server.repository.wait_for_unloads()
    lookups_return(server, old)
    assert server.infer('add_sub', inputs('add_sub'))['OUTPUT0'].tolist() == [[2, 2, 2, 2]]


def test_a_request_that_raced_an_unload_gets_tritons_error(server):
    old = server.repository.get('add_sub')
    server.unload_model('add_sub')
    server.repository.wait_for_unloads()
    lookups_return(server, [old])
    with pytest.raises(TritonError, match=GONE.format('add_sub')) as e: server.infer('add_sub', inputs('add_sub'))
    assert e.value.code == 'NOT_FOUND'


# -------------------------------------------------------------------------------------------- under traffic

def model_threads() -> Counter:
    "The server's own threads (instance workers, unloads), by name prefix."
    return Counter(t.name.split(':')[0] + ':' + t.name.split(':')[1] if ':' in t.name else t.name
                   for t in threading.enumerate() if t.name.startswith(('triton_mini:', 'unload:')))


class Clients:
    "8 threads sending requests back to back, counting answers (ok | error) by the phase in which each was sent."
    def __init__(self, send, n=8):
        self.send, self.stop, self.results, self.lock = send, threading.Event(), Counter(), threading.Lock()
        self.phase, self.last, self.go, self.busy = 'reloading', [None] * n, threading.Event(), [False] * n
        self.go.set()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(n)]
    def _run(self, i):
        while not self.stop.is_set():
            self.busy[i] = True                # before looking at `go`: `paused` then sees this request through
            if not self.go.is_set():
                self.busy[i] = False; self.go.wait(); continue
            phase = self.phase
            r = self.send()
            with self.lock: self.results[phase, r] += 1; self.last[i] = phase
            self.busy[i] = False
    def __enter__(self):
        for t in self.threads: t.start()
        return self
    def __exit__(self, *exc):
        self.stop.set()
        for t in self.threads: t.join(60)
    def paused(self):
        "Hold the clients between two requests (none in flight), e.g. to measure memory in a quiet moment; `resume()` after."
        self.go.clear()
        deadline = time.monotonic() + 60
        while any(self.busy):
            assert time.monotonic() < deadline, 'clients did not come to rest'
            time.sleep(0.01)   # polling: the client threads have nothing to wait on
    def resume(self): self.go.set()
    def sent_in(self, phase) -> Counter:
        with self.lock: return Counter({r: n for (p, r), n in self.results.items() if p == phase})
    def enter(self, phase, timeout=60):
        "Start `phase` once every client has an answer to a request sent in it: all earlier requests are done."
        self.phase, deadline = phase, time.monotonic() + timeout
        while True:
            with self.lock:
                if all(p == phase for p in self.last): return
            assert time.monotonic() < deadline, f'clients did not answer in phase {phase}'
            time.sleep(0.01)   # polling: the client threads have nothing to wait on


def in_process(server, model):
    def send():
        try: server.infer(model, inputs(model), timeout=60); return 'ok'
        except TritonError as e: return e.message
    return send


def reload_cycles(server, model, clients) -> int:
    "20 reloads to warm up, then 100 under the clients: bytes the process holds more after them (tracemalloc, clients at rest)."
    tracemalloc.start()
    try:
        for cycle in range(20): reload(server, model, cycle)             # warm up: caches, first allocations
        server.repository.wait_for_unloads(); clients.paused(); gc.collect()
        before = tracemalloc.get_traced_memory()[0]                     # measured with no request in flight
        clients.resume()
        for cycle in range(20, 120): reload(server, model, cycle)
        server.repository.wait_for_unloads(); clients.paused(); gc.collect()
        growth = tracemalloc.get_traced_memory()[0] - before
        clients.resume()
        return growth
    finally: tracemalloc.stop()


@pytest.mark.slow
@pytest.mark.parametrize('model', ['add_sub', 'linear_onnx'])
def test_100_reloads_under_8_clients_fail_no_request(server, model):
    baseline = model_threads()
    with Clients(in_process(server, model)) as clients:
        reload_cycles(server, model, clients)
        clients.enter('settled')                        # every request sent while reloading is answered
        server.unload_model(model)
        server.repository.wait_for_unloads()
        clients.enter('gone')
        during, after = clients.sent_in('reloading'), clients.sent_in('gone')   # those sent while it unloads may go either way
    assert set(during) == {'ok'} and during['ok'] > 100, during         # zero failed requests while reloading
    assert set(after) == {GONE.format(model)}, after                     # Triton's text once it is gone
    server.load_model(model)
    assert model_threads() == baseline                                   # the same threads as before the cycles


# The memory check runs in a fresh interpreter: in a test worker that has run other modules, their leftover threads
# allocate during the measurement too (561 KiB of "growth" twice in CI runs, 17 KiB measured alone).
LEAK_CHECK = r"""
import json, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import test_reload_under_load as t
from triton_mini.server import TritonServer
model = sys.argv[2]
server = TritonServer(t.repo_with(Path(tempfile.mkdtemp()), model), model_control_mode='explicit', load_models=[model])
server.start()
with t.Clients(t.in_process(server, model)) as clients: growth = t.reload_cycles(server, model, clients)
server.stop()
print(json.dumps(growth))
"""


@pytest.mark.slow
@pytest.mark.parametrize('model', ['add_sub', 'linear_onnx'])
def test_100_reloads_under_8_clients_leave_no_memory_behind(model):
    "Before the fix each reload kept its model module alive (about 20 kB a reload): 2 MB over 100."
    import subprocess, sys
    r = subprocess.run([sys.executable, '-c', LEAK_CHECK, str(Path(__file__).parent), model], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    growth = json.loads(r.stdout.strip().splitlines()[-1])
    assert growth < 512 * 1024, f'{growth / 1024:.0f} KiB more after 100 reloads'


@pytest.mark.slow
def test_100_reloads_over_http_fail_no_request(tmp_path):
    mini = MiniTriton(repo_with(tmp_path, 'add_sub'), model_control_mode='explicit', load_models=['add_sub'])
    body = json.dumps({'inputs': [{'name': n, 'datatype': 'FP32', 'shape': [1, 4], 'data': [1, 2, 3, 4]} for n in ('INPUT0', 'INPUT1')]})
    local = threading.local()
    def send():
        if not hasattr(local, 'conn'): local.conn = http.client.HTTPConnection('127.0.0.1', mini.http_port, timeout=60)
        local.conn.request('POST', '/v2/models/add_sub/infer', body)
        r = local.conn.getresponse()
        data = r.read()
        return 'ok' if r.status == 200 else (r.status, json.loads(data)['error'])
    control = http.client.HTTPConnection('127.0.0.1', mini.http_port, timeout=60)
    cfg = json.loads(mini.server.model_config('add_sub').to_json())
    try:
        with Clients(send) as clients:
            for cycle in range(100):
                c = {**cfg, 'parameters': {'cycle': {'string_value': str(cycle)}}}
                control.request('POST', '/v2/repository/models/add_sub/load', json.dumps({'parameters': {'config': json.dumps(c)}}))
                r = control.getresponse()
                assert (r.status, r.read()) == (200, b'')
            clients.enter('settled')
            control.request('POST', '/v2/repository/models/add_sub/unload', b'')
            assert control.getresponse().read() == b''
            mini.server.repository.wait_for_unloads()
            clients.enter('gone')
            during, after = clients.sent_in('reloading'), clients.sent_in('gone')   # those sent while it unloads may go either way
    finally: mini.stop()
    assert set(during) == {'ok'} and during['ok'] > 100, during
    assert set(after) == {(404, GONE.format('add_sub'))}, after
