"""The test suite's shared machinery, each piece written once: free ports, the real Triton (the oracle), the three
ways to run a server, the tree of test models, and small HTTP helpers.

- `free_port()`: a port nobody listens on. Another process can take it before our server binds it, so every
  process launcher retries with fresh ports when its server reports an address in use.
- `ORACLE` / `oracle_missing()` / `oracle_or_skip()` / `oracle_available()`: the real Triton 2.51 (`$TRITON_ORACLE`,
  else the project's launcher `tools/real_triton.py`, which installs PyPI's nvidia-pytriton into a cached venv on first
  use) and the one reason a test skips without it. Every way to the oracle checks that the running test carries the
  `oracle` marker (`oracle_marked()`; conftest sets `CURRENT_TEST`).
- `skip_or_fail(judge, reason)`: the one place a test skips for want of a judge (the oracle, Triton's examples, its
  QA corpus, a browser); it fails instead when `$TRITON_MINI_REQUIRE` names the judge (conftest's docstring).
- `MiniTriton`: triton_mini in this process, its front ends on sockets bound to port 0 (no race; the fastest start).
- `MiniProcess`: the `triton-mini` command (`python -m triton_mini`) in a subprocess, as a user runs it.
- `RealTriton`: the real tritonserver in a subprocess. Its working directory is outside the checkout (else its
  Python backend imports our `triton_python_backend_utils.py` shim) and it is stopped by process group (its Python
  stub processes otherwise outlive it).
  Both process launchers write the server's output to a log file in a work folder of their own; `conftest.py`
  adds the tail of every server log to the report of a test that fails while the server runs.
- No orphans (Linux): a server process runs in a session of its own (a stop reaches its whole process group, stubs
  included), so it would outlive a test process that dies without stopping it (Ctrl-C twice, SIGKILL, a crashed xdist
  worker). `guard(sid)` hands its session to this process's reaper, a small watcher started on first use whose
  stdin is a pipe only this process writes to: at EOF (we are gone, however we died) it SIGKILLs every process of
  every session still handed to it. `popen()` is `subprocess.Popen` so guarded, for servers a test starts itself. `strangers_on_default_ports()`
  names a process outside this run that holds 8000-8002 while no run holds their lock (conftest fails the session).
- `model_path(name)` / `copy_models(dest, *names)`: the model folders under `tests/models/`, by name
  (`'conformance'` is a whole repository, `'conformance/add_sub'` one model in it).

`conftest.py` turns the launchers into fixtures (`real_triton`, `mini_process`, `mini`, and `launch` / `launch_module`
for module-scoped servers); scripts (`bench/`, `python tests/triton_qa.py`) import this module directly.
"""
from __future__ import annotations
import atexit, collections, contextlib, errno, fcntl, functools, http.client as httplib, json, os, re, shutil, signal, socket, subprocess, sys, tempfile, threading, time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / 'tests'
MODELS = TESTS / 'models'
ORACLE = os.environ.get('TRITON_ORACLE') or str(ROOT / 'tools' / 'real_triton.py')
ADDRESS_IN_USE = re.compile(r'already in use|Address in use', re.I)   # triton_mini's and tritonserver's words for a taken port
SKIP_ORACLE = 'real Triton 2.51 unavailable'   # every oracle skip reason starts so (conftest counts them)


@functools.cache
def oracle_missing() -> str | None:
    """None when the real Triton can start, else the one reason every oracle test skips with.

    The project's launcher (tools/real_triton.py) installs PyPI's nvidia-pytriton wheel into a cached venv on first
    use: that happens here, once per machine (a lock serialises parallel workers), not at import, so a run that
    selects no oracle test never pays for it."""
    if not os.access(ORACLE, os.X_OK): return f'{SKIP_ORACLE}: {ORACLE} is not an executable (set TRITON_ORACLE)'
    if Path(ORACLE).resolve() != (ROOT / 'tools' / 'real_triton.py').resolve(): return None
    try: r = subprocess.run([sys.executable, ORACLE, '--install'], capture_output=True, text=True, timeout=1800)
    except subprocess.TimeoutExpired: return f'{SKIP_ORACLE}: installing nvidia-pytriton took over 30 minutes'
    return None if r.returncode == 0 else f'{SKIP_ORACLE}: {(r.stderr.strip().splitlines() or ["install failed"])[-1]}'


def oracle_or_skip():
    """Skip the calling test (or fixture) when the real Triton is absent: the one reason every oracle test gives (a
    failure instead when $TRITON_MINI_REQUIRE names the oracle). The test must carry the `oracle` marker."""
    oracle_marked()
    if reason := oracle_missing(): skip_or_fail('oracle', reason)


def oracle_available() -> bool:
    """For a test that compares with the real Triton when it is there and checks triton_mini alone otherwise: whether
    it is. Such a test starts the real Triton, so it must carry the `oracle` marker too; and where
    $TRITON_MINI_REQUIRE names the oracle, its absence fails the test instead of quietly leaving out the comparison."""
    oracle_marked()
    reason = oracle_missing()
    if reason and required('oracle'): pytest.fail(f'{reason} ({REQUIRE} names oracle)', pytrace=False)
    return reason is None


CURRENT_TEST = None   # the pytest item running now (conftest sets it around each test's setup, call and teardown); None in scripts


def oracle_marked():
    """Fail the running test when it lacks the `oracle` marker: `-m 'not oracle'` is the run without the real Triton,
    and a test that starts it unmarked (through a fixture, say) would still start it there."""
    item = CURRENT_TEST
    if item is not None and item.get_closest_marker('oracle') is None:
        pytest.fail(f'{item.nodeid} starts the real Triton but has no `oracle` marker: add @pytest.mark.oracle '
                    "(`pytest -m 'not oracle'` must start no real Triton)", pytrace=False)


# ------------------------------------------------------------------------------------------------- required judges

REQUIRE = 'TRITON_MINI_REQUIRE'
JUDGES = ('oracle', 'examples', 'qa', 'python_qa', 'openvino_qa', 'libtorch_qa', 'fil_qa', 'browser', 'cells')   # what a test (or a notebook cell: 'cells') can be skipped for want of, and CI can insist on


def required_judges() -> set:
    "The judges $TRITON_MINI_REQUIRE names (comma-separated; 'all' for every one); a name not in JUDGES is an error."
    names = {n.strip() for n in os.environ.get(REQUIRE, '').split(',') if n.strip()}
    if 'all' in names: names = (names - {'all'}) | set(JUDGES)
    if unknown := names - set(JUDGES): raise ValueError(f'{REQUIRE}: unknown judge(s) {sorted(unknown)}; known: {", ".join(JUDGES)}')
    return names


def required(judge:str) -> bool: return judge in required_judges()


def skip_or_fail(judge:str, reason:str):
    """Skip the calling test for want of `judge`, with `reason`; or fail it with the same reason when
    $TRITON_MINI_REQUIRE names that judge (CI, which provides it: its absence there is a broken run, not a skip)."""
    assert judge in JUDGES, judge
    if required(judge): pytest.fail(f'{reason} ({REQUIRE} names {judge})', pytrace=False)
    pytest.skip(reason)


# ------------------------------------------------------------------------------------------------- ports

_handed_out = collections.deque(maxlen=256)   # recent answers: the kernel may offer a just-released port again


def free_port(host:str='127.0.0.1') -> int:
    "A TCP port nobody listens on right now, not handed out recently by this process."
    while True:
        with socket.socket() as s:
            s.bind((host, 0))
            port = s.getsockname()[1]
        if port not in _handed_out:
            _handed_out.append(port)
            return port


def ports_taken(*ports:int, host:str='0.0.0.0') -> list:
    "Those of `ports` a server could not bind now (on all interfaces, as `triton-mini` binds by default)."
    taken = []
    for port in ports:
        with socket.socket() as s:
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try: s.bind((host, port))
            except OSError as e:
                if e.errno != errno.EADDRINUSE: raise
                taken.append(port)
    return taken


# ------------------------------------------------------------------------------------------------- HTTP helpers

def http(port:int, method:str, path:str, body=None, timeout:float=60, headers=None) -> tuple:
    "One HTTP request: (status, content type, body text). `body` may be a dict or list (sent as JSON) or bytes."
    conn = httplib.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        conn.request(method, path, body=data, headers=headers or {})
        r = conn.getresponse()
        return r.status, r.getheader('Content-Type'), r.read().decode('utf-8', 'replace')
    finally: conn.close()


def request(port:int, method:str, path:str, body=b'', headers=None, timeout:float=60) -> tuple:
    "One HTTP request on a fresh connection: (status, headers dict with lower-case names, body bytes)."
    conn = httplib.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)): body = json.dumps(body).encode()
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally: conn.close()


def wait_until(check, timeout:float, what:str):
    "Poll `check()` until it is true: for state changes in an external server, which has nothing to wait on."
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline: raise AssertionError(f'timed out after {timeout} s waiting for {what}')
        time.sleep(0.1)


def reached(read, want, timeout:float=20):
    """`read()`'s value once it equals `want`, else its last value after `timeout` s (the caller's assert shows the
    difference). For statistics whose final value is known: a server counts a request when it releases it, which can
    come well after the response on a loaded machine, so two reads that agree (`settled`) may still be early."""
    deadline = time.monotonic() + timeout
    while (value := read()) != want and time.monotonic() < deadline: time.sleep(0.1)
    return value


def settled(read, interval=0.1, tries=20):
    """A value that two reads `interval` apart agree on. Triton counts a request's statistics when the request is
    released, which can come after its response reached the client (an ended iterative sequence's CANCELED failure, a
    request that failed or succeeded just before): statistics read at once sometimes miss the last one."""
    value = read()
    for _ in range(tries):
        time.sleep(interval)
        if (again := read()) == value: return value
        value = again
    return value


# ------------------------------------------------------------------------------------------------- test models

def model_path(name:str) -> Path:
    "tests/models/<name>: a repository (`'conformance'`) or one model of it (`'conformance/add_sub'`)."
    path = MODELS / name
    if not path.is_dir(): raise FileNotFoundError(f'no test model or repository {name!r} under {MODELS}')
    return path


def copy_models(dest, *names:str) -> Path:
    "A model repository at `dest` with copies of the named repositories (all their models) and models."
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    skip = shutil.ignore_patterns('__pycache__', 'README.md')
    for name in names:
        src = model_path(name)
        if '/' in name: shutil.copytree(src, dest / src.name, ignore=skip)
        else: shutil.copytree(src, dest, ignore=skip, dirs_exist_ok=True)
    return dest


# ------------------------------------------------------------------------------------------------- server processes

WORK_ROOT: Path | None = None   # conftest.py points this into pytest's temporary folder (kept for the last runs)
LIVE: list = []                 # process servers started in this process, for conftest's failure reports


class PortsTaken(RuntimeError):
    "A server was asked for fixed ports (its defaults) and another process holds one of them."


class ServerProcess:
    """One server process in its own session, on free ports, its output in `<workdir>/server.log`.

    `wait` is what "started" means: `'ready'` (GET /v2/health/ready answers 200), `'live'`, another path that must
    answer 200, or None (return at once). With `check=False` a start that fails sets `up` to False and `note` to why
    instead of raising. A server that reports a taken port is started again on fresh ports (twice at most), except
    on `fixed_ports` (True: the server's defaults 8000/8001/8002; or an (http, grpc, metrics) tuple): then it raises
    `PortsTaken`, so that a test which must use those ports can skip.
    """
    label = 'server'

    def __init__(self, repo=None, *flags, grpc:bool=True, metrics:bool=True, fixed_ports:bool|tuple=False, env=None,
                 wait:str|None='ready', timeout:float=120, check:bool=True, health_headers=None, cwd=None):
        self.repo, self.flags, self.env = (Path(repo) if repo is not None else None), flags, env
        self.serve_grpc, self.serve_metrics, self.fixed_ports, self.health_headers = grpc, metrics, fixed_ports, health_headers
        self.workdir = work_folder(self.label)
        self.cwd = Path(cwd) if cwd is not None else self.workdir
        self.log_path, self.proc, self.up, self.note, self.code = self.workdir / 'server.log', None, None, '', None
        self.started_at = self.stopped_at = None
        for attempt in range(3):
            self._launch()
            if wait is None: return
            self.up, self.note = self.wait_for(wait, timeout)
            if self.up or not self.port_clash() or attempt == 2: break
            self.kill()
            if self.fixed_ports: raise PortsTaken(f'{self.label}: a port it needs is taken:\n{self.log_tail()}')
        if not self.up and check:
            self.stop()
            raise RuntimeError(f'{self.label} did not start ({self.note}):\n{self.log_tail(60)}')

    def argv(self) -> list: raise NotImplementedError

    def port_flags(self) -> list:
        "Fresh free ports for each service; `fixed_ports`: True for the server's defaults (no flags), or (http, grpc, metrics)."
        if self.fixed_ports is True:
            self.http_port, self.grpc_port, self.metrics_port = 8000, 8001, 8002
            return []
        if self.fixed_ports: self.http_port, self.grpc_port, self.metrics_port = self.fixed_ports
        else: self.http_port, self.grpc_port, self.metrics_port = free_port(), free_port(), free_port()
        ports = (('--http-port', self.http_port), ('--grpc-port', self.grpc_port), ('--metrics-port', self.metrics_port))
        return [f'{flag}={port}' for flag, port in ports if port is not None]

    def _launch(self):
        argv = self.argv()
        with open(self.log_path, 'w') as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=self.cwd, start_new_session=True,
                                         env={**os.environ, 'PYTHONUNBUFFERED': '1', **(self.env or {})})
        guard(self.proc.pid)
        self.started_at, self.stopped_at, self.code = time.monotonic(), None, None
        if self not in LIVE: LIVE.append(self)

    def wait_for(self, what:str='ready', timeout:float=120) -> tuple:
        "(True, '') once `what` (ready, live or a path) answers 200; (False, why) once the process exits or time is up."
        path = {'ready': '/v2/health/ready', 'live': '/v2/health/live'}.get(what, what)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None: return False, f'exited with {self.proc.returncode}'
            try:
                if http(self.http_port, 'GET', path, timeout=5, headers=self.health_headers)[0] == 200: return True, ''
            except OSError: pass
            time.sleep(0.1)   # an external process has nothing to wait on
        return False, f'{path} did not answer 200 within {timeout:.0f} s'

    def port_clash(self) -> bool: return bool(ADDRESS_IN_USE.search(self.log()))

    def log(self) -> str: return self.log_path.read_text(errors='replace') if self.log_path.exists() else ''

    @property
    def lines(self) -> list: return self.log().splitlines()

    @property
    def output(self) -> str: return '\n'.join(self.lines)

    def log_tail(self, n:int=30) -> str: return '\n'.join(self.lines[-n:])

    def request(self, method, path, body=b'', headers=None, timeout=60):
        "One HTTP request to this server: (status, headers, body bytes)."
        return request(self.http_port, method, path, body, headers, timeout)

    def send_signal(self, sig=signal.SIGTERM): self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout:float=60) -> int:
        "Signal the whole session (the server and any stubs), wait, then SIGKILL what is left; the exit code."
        if self.proc is None: return None
        if self.stopped_at is None and self.proc.poll() is None:
            _killpg(self.proc.pid, sig)
            try: self.proc.wait(timeout)
            except subprocess.TimeoutExpired: pass
        return self.kill()

    def kill(self) -> int:
        "End the process group now (stray stubs of an exited server too); the exit code."
        if self.stopped_at is None:   # once only: after that the group id may belong to someone else
            _killpg(self.proc.pid, signal.SIGKILL)
            self.code = self.proc.wait()
            self.stopped_at = time.monotonic()
            unguard(self.proc.pid)
        return self.code

    def __enter__(self): return self
    def __exit__(self, *exc): self.stop()


def _killpg(pid, sig):
    try: os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError): pass


# ------------------------------------------------------------------------------------------------- no orphans

# The reaper's program (`python -I -S -c REAPER`): stdin carries `<sid>\n` (guard) and `-<sid>\n` (unguard); EOF
# means the one process that held the write end is gone, so every process of every session still guarded is
# SIGKILLed: by session, not process group, since Ray's workers make groups of their own (and one outlived its
# driver's group by 20 s when measured). Sessions with no process left are forgotten within a second, so an id the
# kernel hands out again later is not hit.
REAPER = r"""
import os, select, signal, time
sessions, pending, prune_at = set(), b'', time.monotonic() + 1
def members(sid):
    pids = []
    for name in os.listdir('/proc'):
        try:
            with open(f'/proc/{name}/stat', 'rb') as f: stat = f.read()
        except (OSError, ValueError): continue
        if int(stat.rsplit(b')', 1)[1].split()[3]) == sid: pids.append(int(name))   # state ppid pgrp session
    return pids
def alive(sid):
    try: os.killpg(sid, 0)
    except ProcessLookupError: return bool(members(sid))
    except PermissionError: pass
    return True
while True:
    if time.monotonic() >= prune_at: sessions, prune_at = {s for s in sessions if alive(s)}, time.monotonic() + 1
    if not select.select([0], [], [], 1)[0]: continue
    data = os.read(0, 4096)
    if not data: break
    *lines, pending = (pending + data).split(b'\n')
    for line in lines:
        sid = int(line)
        if sid > 0: sessions.add(sid)
        else: sessions.discard(-sid)
for _ in range(5):   # again while a dying process still forks
    left = [pid for sid in sessions for pid in members(sid)]
    if not left: break
    for pid in left:
        try: os.kill(pid, signal.SIGKILL)
        except OSError: pass
    time.sleep(0.05)
"""
_reaper, _reaper_owner, _guarded, _reaper_lock = None, None, set(), threading.Lock()


def guard(sid:int):
    """Kill every process of session `sid` (a server started with start_new_session: its pid) when this process dies
    before `unguard(sid)`. Off Linux, nothing (the harness's tests of it skip there)."""
    _tell_reaper(sid)


def unguard(sid:int): _tell_reaper(-sid)


def _tell_reaper(n:int):
    global _reaper, _reaper_owner
    if sys.platform != 'linux': return
    with _reaper_lock:
        if n > 0: _guarded.add(n)
        else: _guarded.discard(-n)
        if _reaper is not None and _reaper_owner == os.getpid() and _reaper.poll() is None:
            try:
                os.write(_reaper.stdin.fileno(), f'{n}\n'.encode())
                return
            except BrokenPipeError: pass   # someone killed it: a new one gets every session still guarded
        if not _guarded: return
        # its own session: Ctrl-C at the terminal reaches pytest, not the reaper that must outlive it
        _reaper = subprocess.Popen([sys.executable, '-I', '-S', '-c', REAPER], stdin=subprocess.PIPE,
                                   stdout=subprocess.DEVNULL, start_new_session=True, bufsize=0)
        _reaper_owner = os.getpid()
        os.write(_reaper.stdin.fileno(), ''.join(f'{g}\n' for g in _guarded).encode())


@atexit.register
def _reaper_done():
    "A normal exit: the reaper kills what a test left running and ends (no 'subprocess still running' warning)."
    if _reaper is not None and _reaper_owner == os.getpid():
        _reaper.stdin.close()
        try: _reaper.wait(10)
        except subprocess.TimeoutExpired: pass


def popen(argv, **kw) -> subprocess.Popen:
    """`subprocess.Popen(argv, **kw)` for a server a test starts itself: in a session of its own (a terminal's Ctrl-C
    goes to pytest, which stops it), guarded so that it dies with this process. Stop it with `os.killpg(proc.pid, ...)`."""
    proc = subprocess.Popen(argv, start_new_session=True, **kw)
    guard(proc.pid)
    return proc


DEFAULT_PORTS = (8000, 8001, 8002)   # Triton's defaults, which the QA clients hard-code
DEFAULT_PORTS_LOCK = Path(tempfile.gettempdir()) / 'triton-mini-default-ports.lock'   # held by a test while it uses them


@contextlib.contextmanager
def default_ports():
    "Hold the machine-wide lock on ports 8000-8002 (xdist workers and other checkouts' runs wait for one another)."
    with open(DEFAULT_PORTS_LOCK, 'w') as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try: yield
        finally: fcntl.flock(f, fcntl.LOCK_UN)


def port_holders(*ports:int) -> dict:
    "{pid: command line} of the processes listening on any of `ports` (TCP; pid None where /proc hides it)."
    import psutil
    holders = {}
    for c in psutil.net_connections('tcp'):
        if c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port in ports and c.pid not in holders:
            try: holders[c.pid] = ' '.join(' '.join(psutil.Process(c.pid).cmdline()).split()) if c.pid else '?'   # one line
            except psutil.Error: holders[c.pid] = '?'
    return holders


def strangers_on_default_ports(run_pid:int, ports=DEFAULT_PORTS, lock_path=DEFAULT_PORTS_LOCK) -> str | None:
    """One line naming the processes on 8000-8002 that are not run `run_pid`'s (its pytest: not among its descendants)
    while no run holds the default-ports lock (one that does will free them): the orphans of a killed run, most
    likely. None when the ports are free, or held by this run or under the lock."""
    if sys.platform != 'linux' or not (taken := ports_taken(*ports)): return None   # elsewhere psutil needs root to name a socket's process
    import psutil
    with open(lock_path, 'w') as lock:
        try: fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError: return None
        holders = port_holders(*taken)
    def ours(pid):
        try: return pid is not None and any(p.pid == run_pid for p in [psutil.Process(pid), *psutil.Process(pid).parents()])
        except psutil.Error: return False
    strangers = {pid: cmd for pid, cmd in holders.items() if not ours(pid)}
    if holders and not strangers: return None
    def group(pid):
        try: return os.getpgid(pid)
        except (OSError, TypeError): return None
    who = '; '.join(f'pid {pid} ({cmd[:200]}; stop its group: kill -- -{group(pid)})' for pid, cmd in strangers.items())
    return (f'ports {", ".join(map(str, taken))} (the QA\'s defaults) are held by {who or "a process /proc does not show"}, '
            'which is not this run\'s and not under the default-ports lock: an orphan of a killed run? Stop it and start again')


def work_folder(label:str) -> Path:
    "A fresh folder outside the checkout for one server's working directory and log."
    base = WORK_ROOT if WORK_ROOT is not None and ROOT not in Path(WORK_ROOT).resolve().parents else None
    return Path(tempfile.mkdtemp(prefix=f'{label}-', dir=base))


class MiniProcess(ServerProcess):
    """`python -m triton_mini` (the `triton-mini` command) on `repo` with `flags`: a real process, for its memory,
    file descriptors, threads (psutil), signals, exit code and log. No repo: the bundled example repository."""
    label = 'triton-mini'

    def argv(self) -> list:
        ports = self.port_flags()
        if not self.serve_grpc: ports = [p for p in ports if not p.startswith('--grpc-port')] + ['--allow-grpc=false']
        if not self.serve_metrics: ports = [p for p in ports if not p.startswith('--metrics-port')] + ['--allow-metrics=false']
        repo = [f'--model-repository={self.repo}'] if self.repo is not None else []
        return [sys.executable, '-m', 'triton_mini', *repo, *ports, *self.flags]

    @property
    def ps(self):
        import psutil
        return psutil.Process(self.proc.pid)

    def rss(self) -> int: return self.ps.memory_info().rss
    def fds(self) -> int: return self.ps.num_fds()
    def threads(self) -> int: return self.ps.num_threads()


class RealTriton(ServerProcess):
    "The real tritonserver 2.51 on `repo` with `flags` (skips the calling test when it is absent)."
    label = 'real-triton'

    def __init__(self, repo, *flags, timeout:float=300, exit_timeout:int|None=3, **kw):   # the first start may build the oracle's venv
        oracle_or_skip()
        self.exit_timeout = exit_timeout   # tritonserver's default is 30 s; None: pass no --exit-timeout-secs
        super().__init__(repo, *flags, timeout=timeout, **kw)

    def argv(self) -> list:
        exit_timeout = [] if self.exit_timeout is None else [f'--exit-timeout-secs={self.exit_timeout}']
        return [ORACLE, f'--model-repository={self.repo}', *self.port_flags(), *exit_timeout, *self.flags]


def start_together(*starts):
    "Call each zero-argument `start` in its own thread (servers come up in parallel); their results, in order."
    with ThreadPoolExecutor(len(starts)) as pool:
        futures = [pool.submit(s) for s in starts]
        results, error = [], None
        for f in futures:
            try: results.append(f.result())
            except BaseException as e: results.append(None); error = error or e
    if error is not None:
        for s in results:
            if s is not None: s.stop()
        raise error
    return results


# ------------------------------------------------------------------------------------------------- triton_mini in process

class MiniTriton:
    """triton_mini in this process: a started TritonServer and the front ends asked for (HTTP and metrics by default,
    gRPC with `grpc=True`), each on a socket bound to port 0. `http_options` go to the HTTP front end."""
    def __init__(self, repo, *, http:bool=True, metrics:bool=True, grpc:bool=False, http_options:dict|None=None,
                 exit_timeout_secs:float=3, **server_kw):
        from triton_mini.server import TritonServer
        from triton_mini.http_server import HTTPFrontend, HTTPService, bind_socket
        from triton_mini.metrics_server import HTTPMetricsServer
        self.repo = Path(repo)
        self.server = TritonServer(self.repo, **server_kw)
        self.failures = self.server.start()
        self.service = self.grpc_service = None
        self.http_port = self.metrics_port = self.grpc_port = None
        try:
            apps = {}
            if http: apps[HTTPFrontend(self.server, **(http_options or {}))] = bind_socket('127.0.0.1', 0)
            if metrics: apps[HTTPMetricsServer(self.server)] = bind_socket('127.0.0.1', 0)
            if apps:
                self.service = HTTPService(apps, exit_timeout_secs=exit_timeout_secs).start()
                ports = iter(self.service.ports)
                if http: self.http_port = next(ports)
                if metrics: self.metrics_port = next(ports)
            if grpc:
                from triton_mini.grpc_server import GRPCService
                self.grpc_service = GRPCService(self.server).start()
                self.grpc_port = self.grpc_service.port
        except BaseException:
            self.stop(); raise

    def request(self, method, path, body=b'', headers=None, timeout=60):
        return request(self.http_port, method, path, body, headers, timeout)

    def stop(self):
        if self.grpc_service is not None: self.grpc_service.stop(); self.grpc_service = None
        if self.service is not None: self.service.stop(); self.service = None
        if self.server is not None: self.server.stop(); self.server = None

    def __enter__(self): return self
    def __exit__(self, *exc): self.stop()


# ------------------------------------------------------------------------------------------------- launchers as factories

class Launcher:
    "Starts servers and stops every one of them (last started, first stopped) when its owner is done: conftest's fixtures."
    def __init__(self): self.started = []

    def _keep(self, server):
        self.started.append(server)
        return server

    def real_triton(self, repo, *flags, **kw) -> RealTriton: return self._keep(RealTriton(repo, *flags, **kw))
    def mini_process(self, repo=None, *flags, **kw) -> MiniProcess: return self._keep(MiniProcess(repo, *flags, **kw))
    def mini(self, repo, **kw) -> MiniTriton: return self._keep(MiniTriton(repo, **kw))

    def close(self):
        "Stop the processes all at once (each waits for its own exit), then the in-process servers, last first."
        started, self.started = self.started[::-1], []
        processes = [s for s in started if isinstance(s, ServerProcess)]
        if processes:
            with ThreadPoolExecutor(len(processes)) as pool: list(pool.map(_stop_quietly, processes))
        for s in started:
            if not isinstance(s, ServerProcess): _stop_quietly(s)


def _stop_quietly(server):
    try: server.stop()
    except Exception as e: print(f'stopping {server!r} failed: {e!r}', file=sys.stderr)
