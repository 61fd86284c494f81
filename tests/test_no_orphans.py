"""A test process that dies without stopping its servers (Ctrl-C twice, SIGKILL, a crashed xdist worker) must not
leave them running: the harness's servers run in sessions of their own, and an orphaned real Triton once held
8000-8002 so that the next run's Python-backend QA failed by the dozen. Each test here starts a server through the
harness in a child process that stands in for pytest, SIGKILLs that process, and waits for the server's processes
to be gone (`triton_servers.guard`: the reaper). The session guard (`strangers_on_default_ports`) is checked on a
port of its own, with a lock file of its own."""
import contextlib, fcntl, json, os, shutil, signal, subprocess, sys

import psutil
import pytest

import triton_servers as ts

pytestmark = pytest.mark.skipif(sys.platform != 'linux', reason='servers die with their test process on Linux only')

# Stands in for pytest: starts one server through the harness (on an ended thread, or on the main thread), prints the
# pids of the server and of its descendants (stubs), then waits to be killed.
HARNESS_USER = """
import json, sys, threading, time
sys.path.insert(0, {tests!r})
import psutil, triton_servers as ts
ts.WORK_ROOT = {work!r}
servers = []
def start(): servers.append(getattr(ts, {kind!r})({repo!r}, grpc=False, metrics=False))
if {thread}:
    t = threading.Thread(target=start); t.start(); t.join()
else: start()
pid = servers[0].proc.pid
print(json.dumps([pid, *(c.pid for c in psutil.Process(pid).children(recursive=True))]), flush=True)
time.sleep(600)
"""


def gone(pid:int) -> bool:
    "Whether `pid` has ended (a zombie has: nothing reaps orphans in some containers)."
    try: return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess: return True


def kill_the_starter(code:str, what:str) -> list:
    "Run `code` in a child process until it prints its server's pids, SIGKILL it; those pids (all gone, or it fails)."
    starter = subprocess.Popen([sys.executable, '-c', code], stdout=subprocess.PIPE, text=True)
    pids = []
    try:
        line = starter.stdout.readline()
        assert line, f'the starter exited with {starter.wait()} before its server was up'
        pids = json.loads(line)
        assert not any(gone(p) for p in pids)
        starter.send_signal(signal.SIGKILL); starter.wait()
        ts.wait_until(lambda: all(gone(p) for p in pids), 20, f'the {what} processes {pids} to end with their starter')
    finally:
        if starter.poll() is None: starter.kill(); starter.wait()
        for pid in pids:   # leave no orphan of our own when it fails
            if not gone(pid):
                with contextlib.suppress(ProcessLookupError): os.kill(pid, signal.SIGKILL)
    return pids


def harness_user(tmp_path, kind:str, thread:bool) -> str:
    repo = ts.copy_models(tmp_path / 'models', 'conformance/add_sub')
    return HARNESS_USER.format(tests=str(ts.TESTS), work=str(tmp_path), kind=kind, repo=str(repo), thread=thread)


@pytest.mark.slow
@pytest.mark.parametrize('thread', [False, True], ids=['main-thread', 'ended-thread'])
def test_mini_process_dies_with_its_starter(tmp_path, thread):
    "The starter's main thread, or a thread that has ended (start_together's): PDEATHSIG alone would miss the second."
    kill_the_starter(harness_user(tmp_path, 'MiniProcess', thread), 'triton-mini')


@pytest.mark.oracle
def test_real_triton_and_its_stubs_die_with_their_starter(tmp_path):
    "The oracle launcher execs tritonserver, which forks a stub per Python model instance: the whole session ends."
    ts.oracle_or_skip()
    pids = kill_the_starter(harness_user(tmp_path, 'RealTriton', thread=True), 'real Triton')
    assert len(pids) >= 2, f'expected tritonserver and its add_sub stub, saw {pids}'


RAY_USER = """
import json, sys, time, psutil
sys.path.insert(0, {tests!r})
import triton_servers as ts
port = ts.free_port()
p = ts.popen([sys.executable, '-m', 'triton_mini', '--ray', '--replicas', '1', '--model-repository={repo}', f'--http-port={{port}}',
              '--http-address=127.0.0.1', '--allow-grpc=false', '--allow-metrics=false'], stdout=ts.subprocess.DEVNULL, stderr=ts.subprocess.DEVNULL)
def ready():
    try: return ts.http(port, 'GET', '/v2/health/ready', timeout=2)[0] == 200
    except OSError: return p.poll() is not None
ts.wait_until(ready, 180, 'triton-mini --ray to be ready')
print(json.dumps([p.pid, *(c.pid for c in psutil.Process(p.pid).children(recursive=True))]), flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_ray_workers_die_with_their_starter(tmp_path):
    """`triton-mini --ray` through `popen`: Ray's workers put themselves in process groups of their own (one outlived
    its driver's group by 20 s when this was written), so the reaper kills by session."""
    pytest.importorskip('ray', reason='the ray extra is not installed')
    repo = ts.copy_models(tmp_path / 'models', 'conformance/add_sub')
    pids = kill_the_starter(RAY_USER.format(tests=str(ts.TESTS), repo=str(repo)), 'Ray')
    assert len(pids) >= 5, f'expected the driver, GCS, raylet and workers, saw {pids}'


# test_ray_serve's `ray start --head` cluster: prints the session `ray start` ran in, its processes (the guard's view),
# and those naming the cluster's temp dir or GCS port (_stop_cluster's view), then waits to be killed.
RAY_CLUSTER_USER = """
import json, os, sys, tempfile, time
sys.path.insert(0, {tests!r})
import psutil, triton_servers as ts, test_ray_serve as trs
gcs, temp_dir = ts.free_port(), tempfile.mkdtemp(prefix='ray', dir='/tmp')
sid = trs._start_cluster(temp_dir, gcs, {{**os.environ, 'RAY_AUTH_MODE': 'disabled'}})
time.sleep(3)   # the raylet starts its workers
def session(p):
    try: return os.getsid(p.pid)
    except OSError: return None
members = [p.pid for p in psutil.process_iter() if session(p) == sid]
print(json.dumps([members, [p.pid for p in trs._cluster_processes(temp_dir, gcs)], temp_dir]), flush=True)
time.sleep(600)
"""


@pytest.mark.slow
def test_ray_cluster_dies_with_its_starter():
    """test_ray_serve's `ray start --head` (through `popen`): every process of the cluster runs in the session `ray
    start` ran in, which the guard SIGKILLs when its starter dies; `ray start` itself has exited by then."""
    pytest.importorskip('ray', reason='the ray extra is not installed')
    pytest.importorskip('tritonclient.http')   # test_ray_serve's imports
    starter = subprocess.Popen([sys.executable, '-c', RAY_CLUSTER_USER.format(tests=str(ts.TESTS))], stdout=subprocess.PIPE, text=True)
    members, named, temp_dir = [], [], None
    try:
        line = starter.stdout.readline()
        assert line, f'the starter exited with {starter.wait()} before its cluster was up'
        members, named, temp_dir = json.loads(line)
        assert named and set(named) <= set(members), (named, members)   # no process of the cluster outside the session
        assert len(members) >= 3, f'expected GCS, raylet and more, saw {members}'
        starter.send_signal(signal.SIGKILL); starter.wait()
        ts.wait_until(lambda: all(gone(p) for p in members), 30, f'the Ray processes {members} to end with their starter')
    finally:
        if starter.poll() is None: starter.kill(); starter.wait()
        for pid in members:
            if not gone(pid):
                with contextlib.suppress(ProcessLookupError): os.kill(pid, signal.SIGKILL)
        if temp_dir: shutil.rmtree(temp_dir, ignore_errors=True)


POPEN_USER = """
import subprocess, sys, time
sys.path.insert(0, {tests!r})
import triton_servers as ts
child = ts.popen([sys.executable, '-c', 'import subprocess, sys, time; '
                  'subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]); time.sleep(600)'])
print(child.pid, flush=True)
time.sleep(600)
"""


def test_popen_guards_a_server_a_test_starts_itself():
    "`popen`: a process group of its own that dies with its starter (here, a process that made a child of its own)."
    starter = subprocess.Popen([sys.executable, '-c', POPEN_USER.format(tests=str(ts.TESTS))], stdout=subprocess.PIPE, text=True)
    leader = int(starter.stdout.readline())
    group = lambda: [p.pid for p in psutil.process_iter() if _pgid(p.pid) == leader and not gone(p.pid)]
    try:
        ts.wait_until(lambda: len(group()) == 2, 20, 'the child and its grandchild')
        starter.send_signal(signal.SIGKILL); starter.wait()
        ts.wait_until(lambda: not group(), 20, f'process group {leader} to end with its starter')
    finally:
        if starter.poll() is None: starter.kill(); starter.wait()
        ts._killpg(leader, signal.SIGKILL)


# An inner pytest with two xdist workers: each of its two tests (one a worker: xdist deals so few round robin) starts a
# registered sleeper that makes a child of its own, writes {worker, its pid, the sleeper's and the child's} to a file,
# and sleeps. REGISTER is how the sleeper starts: through the harness's guard, or not (to see the test fail).
XDIST_TESTS = """
import json, os, subprocess, sys, time
sys.path.insert(0, {tests!r})
import psutil, triton_servers as ts
REGISTER = {register!r}
SLEEPER = ('import subprocess, sys, time; '
           'subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]); time.sleep(600)')
def start_sleeper(name):
    argv = [sys.executable, '-c', SLEEPER]
    p = ts.popen(argv) if REGISTER else subprocess.Popen(argv, start_new_session=True)
    ts.wait_until(lambda: psutil.Process(p.pid).children(), 20, 'the sleeper child')
    pids = [p.pid, *(c.pid for c in psutil.Process(p.pid).children(recursive=True))]
    done = {out!r} + '/' + name
    with open(done + '.tmp', 'w') as f: json.dump({{'worker': os.environ['PYTEST_XDIST_WORKER'], 'pid': os.getpid(), 'sleepers': pids}}, f)
    os.rename(done + '.tmp', done + '.json')
    time.sleep(600)
def test_one(): start_sleeper('one')
def test_two(): start_sleeper('two')
"""


@pytest.mark.slow
@pytest.mark.parametrize('kill', ['controller', 'workers', 'group'])
def test_registered_processes_die_with_an_xdist_run(tmp_path, kill):
    """The guard under pytest-xdist: each worker is a process of its own with a reaper of its own. SIGKILL the run's
    controller (its workers lose their channel and end; their reapers then kill), the workers (the controller lives
    on), or the run's whole process group (`kill -9 -- -PGID`): no registered process survives."""
    pytest.importorskip('xdist')
    out = tmp_path / 'started'; out.mkdir()
    (tmp_path / 'test_sleepers.py').write_text(XDIST_TESTS.format(tests=str(ts.TESTS), out=str(out), register=True))
    (tmp_path / 'pytest.ini').write_text('[pytest]\n')   # this rootdir: none of the project's addopts
    run = subprocess.Popen([sys.executable, '-m', 'pytest', '-n', '2', '-p', 'no:cacheprovider', '-p', 'no:randomly', '-q',
                            'test_sleepers.py'], cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)   # a group of its own, as a run started from a shell is
    started, sleepers = [], []
    try:
        ts.wait_until(lambda: len(list(out.glob('*.json'))) == 2 or run.poll() is not None, 120, 'both tests to start their sleepers')
        started = [json.loads(f.read_text()) for f in sorted(out.glob('*.json'))]
        assert len(started) == 2, f'the inner run ended with {run.poll()} before both tests started'
        assert {s['worker'] for s in started} == {'gw0', 'gw1'}, started   # one test a worker
        workers = [s['pid'] for s in started]
        sleepers = [pid for s in started for pid in s['sleepers']]
        assert len(sleepers) == 4 and not any(gone(p) for p in sleepers), sleepers
        if kill == 'controller': run.send_signal(signal.SIGKILL)
        elif kill == 'workers':
            for pid in workers: os.kill(pid, signal.SIGKILL)
        else: os.killpg(run.pid, signal.SIGKILL)
        ts.wait_until(lambda: all(gone(p) for p in sleepers), 30, f'the registered sleepers {sleepers} to end with the run')
        if kill != 'workers': ts.wait_until(lambda: all(gone(p) for p in workers), 30, f'the workers {workers} to end')
    finally:
        if run.poll() is None: ts._killpg(run.pid, signal.SIGKILL)
        run.wait()
        for pid in sleepers + [s['pid'] for s in started]:   # leave no orphan of our own when it fails
            if not gone(pid):
                with contextlib.suppress(ProcessLookupError): os.kill(pid, signal.SIGKILL)


def _pgid(pid):
    try: return os.getpgid(pid)
    except ProcessLookupError: return None


# --------------------------------------------------------------------------------------- the session guard

# Listens on a port, then leaves its listener to a grandchild that init adopts: a process outside this run.
STRANGER = ("import os, socket, sys, time\ns = socket.socket(); s.bind(('0.0.0.0', int(sys.argv[1]))); s.listen()\n"
            "if os.fork(): os._exit(0)\nprint(os.getpid(), flush=True); time.sleep(600)")


def test_a_stranger_on_the_ports_is_named(tmp_path):
    port, lock = ts.free_port(), tmp_path / 'ports.lock'
    with subprocess.Popen([sys.executable, '-c', STRANGER, str(port)], stdout=subprocess.PIPE, text=True) as parent:
        stranger = int(parent.stdout.readline())
    try:
        said = ts.strangers_on_default_ports(os.getpid(), ports=(port,), lock_path=lock)
        assert said.startswith(f'ports {port} ') and f'pid {stranger} ' in said and STRANGER[:20] in said, said
        assert f'kill -- -{os.getpgid(stranger)})' in said, said
        assert '\n' not in said
        with open(lock, 'w') as held:   # another run holds the lock: it will free the ports, not ours to judge
            fcntl.flock(held, fcntl.LOCK_EX)
            assert ts.strangers_on_default_ports(os.getpid(), ports=(port,), lock_path=lock) is None
    finally: os.kill(stranger, signal.SIGKILL)


def test_our_own_server_on_the_ports_is_not_a_stranger(tmp_path):
    port = ts.free_port()
    ours = subprocess.Popen([sys.executable, '-c', STRANGER.replace('if os.fork(): os._exit(0)\n', ''), str(port)],
                            stdout=subprocess.PIPE, text=True)
    try:
        ours.stdout.readline()
        assert ts.ports_taken(port) == [port]
        assert ts.strangers_on_default_ports(os.getpid(), ports=(port,), lock_path=tmp_path / 'ports.lock') is None
    finally: ours.kill(); ours.wait()
    assert ts.strangers_on_default_ports(os.getpid(), ports=(port,), lock_path=tmp_path / 'ports.lock') is None
