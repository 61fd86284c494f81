"""Windows and macOS, simulated on Linux (issue 45): a server whose interpreter lacks what those systems lack starts,
serves a request in thread mode and in process mode, and stops cleanly. What each system lacks is answered in one
module, triton_mini.portability (nbs/01b_portability); these tests take the pieces away and run the command.

- Windows: no `resource`, `fcntl`, `os.fork`, `os.register_at_fork`, `uvloop`, `socket.sendmsg`, no `pass_fds` in
  subprocess, and an event loop whose `add_signal_handler` raises NotImplementedError. Taken away by a sitecustomize
  on PYTHONPATH, so the stub processes the server starts are just as Windows-like.
- macOS: no /dev/shm; the shared-memory code's folder is pointed at a missing one, and a client's key (created with
  shm_open, through multiprocessing.shared_memory) still registers and feeds a request."""
import json, os, signal, socket, subprocess, sys, textwrap, time, urllib.request
from multiprocessing import shared_memory
from pathlib import Path
import numpy as np
import pytest

from triton_servers import popen

ROOT = Path(__file__).resolve().parents[1]

WINDOWS = textwrap.dedent('''
    # What Windows lacks, taken away from this interpreter (tests/test_platforms.py)
    import asyncio, os, socket, subprocess, sys
    import psutil   # it has a Windows backend of its own; its Linux one (which this is) imports resource: first
    sys.modules['resource'] = sys.modules['fcntl'] = sys.modules['uvloop'] = None
    for name in ('fork', 'register_at_fork', 'forkpty'):
        if hasattr(os, name): delattr(os, name)
    def _no_signal_handlers(self, *a, **kw): raise NotImplementedError
    asyncio.unix_events._UnixSelectorEventLoop.add_signal_handler = _no_signal_handlers
    def _no_sendmsg(self): raise AttributeError('sendmsg')
    socket.socket.sendmsg = property(_no_sendmsg)
    _popen_init = subprocess.Popen.__init__
    def _popen(self, *a, pass_fds=(), **kw):
        if pass_fds: raise AssertionError('pass_fds not supported on Windows.')   # subprocess's own words there
        _popen_init(self, *a, **kw)
    subprocess.Popen.__init__ = _popen
''')

MACOS = "import triton_mini.shared_memory as shm; shm.SHM_DIR = '/no/dev/shm/on/macos'\n"

def free_port() -> int:
    with socket.socket() as s: s.bind(('127.0.0.1', 0)); return s.getsockname()[1]

def _env(tmp_path, sitecustomize:str|None) -> dict:
    paths = [str(ROOT)]
    if sitecustomize is not None:
        (tmp_path / 'site').mkdir(exist_ok=True); (tmp_path / 'site' / 'sitecustomize.py').write_text(sitecustomize)
        paths.insert(0, str(tmp_path / 'site'))
    return {**os.environ, 'PYTHONPATH': os.pathsep.join(paths), 'TRITON_MINI_ENV_CACHE': str(tmp_path / 'envs')}

def _run(tmp_path, sitecustomize, prelude, args) -> subprocess.Popen:
    code = f"import sys\n{prelude}from triton_mini.cli import main\nsys.argv = ['triton-mini', *sys.argv[1:]]\nsys.exit(main())"
    # popen: a session of its own, guarded, so the server and its stubs die with this process however it ends (issue 41)
    return popen([sys.executable, '-c', code, *args], env=_env(tmp_path, sitecustomize), cwd=tmp_path,
                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

def _call(port, path, body=None):
    req = urllib.request.Request(f'http://127.0.0.1:{port}{path}', data=None if body is None else json.dumps(body).encode(),
                                 method='GET' if body is None else 'POST')
    with urllib.request.urlopen(req, timeout=30) as r: return json.loads(r.read() or b'null')

def _serve_one(tmp_path, sitecustomize, prelude, mode, request) -> str:
    "Start the server in `mode`, wait until ready, `request(port)`, stop it with SIGINT; its output."
    port = free_port()
    proc = _run(tmp_path, sitecustomize, prelude, ['--model-control-mode=explicit', '--load-model=add_sub', f'--http-port={port}',
                '--allow-grpc=false', '--allow-metrics=false', f'--python-backend-mode={mode}'])
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, proc.stdout.read()
            try:
                if urllib.request.urlopen(f'http://127.0.0.1:{port}/v2/health/ready', timeout=2).status == 200: break
            except OSError: pass
            assert time.monotonic() < deadline, 'the server did not get ready'
            time.sleep(0.1)
        request(port)
        import psutil
        stubs = [c for c in psutil.Process(proc.pid).children(recursive=True) if 'triton_mini stub add_sub' in ' '.join(c.cmdline())]
        assert len(stubs) == (mode == 'process'), stubs   # process mode: add_sub runs in a stub (on Windows: connected back)
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None: os.killpg(proc.pid, signal.SIGKILL); proc.communicate()   # its stubs too
    assert proc.returncode == 0, out
    assert 'Signal (2) received.' in out, out
    assert not [p for p in stubs if p.is_running() and p.status() != psutil.STATUS_ZOMBIE], stubs   # the stubs went with it
    return out

def _add_sub(port):
    a, b = [1, 2, 3, 4], [1, 1, 1, 1]
    got = _call(port, '/v2/models/add_sub/infer', {'inputs': [
        {'name': 'INPUT0', 'datatype': 'FP32', 'shape': [1, 4], 'data': a},
        {'name': 'INPUT1', 'datatype': 'FP32', 'shape': [1, 4], 'data': b}]})
    assert {o['name']: o['data'] for o in got['outputs']} == {'OUTPUT0': [2, 3, 4, 5], 'OUTPUT1': [0, 1, 2, 3]}

def test_windows_help(tmp_path):
    "`triton-mini --help` (`python -m triton_mini --help`) without resource, fcntl and fork."
    r = subprocess.run([sys.executable, '-m', 'triton_mini', '--help'], env=_env(tmp_path, WINDOWS), capture_output=True,
                       text=True, timeout=60, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert '--http-port' in r.stdout and '--python-backend-mode' in r.stdout

def test_the_simulation_takes_the_pieces_away(tmp_path):
    "The sitecustomize reaches the server and its stubs (inherited PYTHONPATH): what it takes away is gone."
    code = ("import os, socket, subprocess\nfrom triton_mini import portability\n"
            "try: import resource\nexcept ImportError: print('no resource')\n"
            "print(hasattr(os, 'fork'), portability.CAN_FORK, portability.PASS_FDS, hasattr(socket.socket(), 'sendmsg'))")
    out = subprocess.run([sys.executable, '-c', code], env=_env(tmp_path, WINDOWS), capture_output=True, text=True, check=True).stdout
    assert out.split('\n')[:2] == ['no resource', 'False False False False'], out

@pytest.mark.parametrize('mode', ['thread', 'process'])
def test_windows_serves(tmp_path, mode):
    _serve_one(tmp_path, WINDOWS, '', mode, _add_sub)

def _shm_request(port):
    "add_sub with both inputs read from a client's system shared-memory region (created with shm_open)."
    client = shared_memory.SharedMemory(create=True, size=4096)
    try:
        client.buf[:32] = np.array([1, 2, 3, 4, 1, 1, 1, 1], np.float32).tobytes()
        _call(port, '/v2/systemsharedmemory/region/in/register', {'key': '/' + client.name.lstrip('/'), 'offset': 0, 'byte_size': 32})
        got = _call(port, '/v2/models/add_sub/infer', {'inputs': [
            {'name': n, 'datatype': 'FP32', 'shape': [1, 4], 'parameters': {'shared_memory_region': 'in', 'shared_memory_byte_size': 16,
                                                                          'shared_memory_offset': off}}
            for n, off in (('INPUT0', 0), ('INPUT1', 16))]})
        assert {o['name']: o['data'] for o in got['outputs']} == {'OUTPUT0': [2, 3, 4, 5], 'OUTPUT1': [0, 1, 2, 3]}
        _call(port, '/v2/systemsharedmemory/region/in/unregister', {})
    finally: client.close(); client.unlink()

@pytest.mark.parametrize('mode', ['thread', 'process'])
def test_macos_serves_shared_memory(tmp_path, mode):
    _serve_one(tmp_path, None, MACOS, mode, _shm_request)
