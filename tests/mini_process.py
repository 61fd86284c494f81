"""`python -m triton_mini` as a subprocess on free ports, for tests that need a real process: its memory,
file descriptors and threads (psutil), its signals and exit code, its log.

Used by tests/test_http_security.py, tests/test_shutdown.py, tests/test_http_fuzz.py and bench/soak.py.
"""
import http.client, json, os, shutil, signal, socket, subprocess, sys, threading, time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parents[1]
CONFORMANCE_MODELS = ROOT / 'tests' / 'conformance' / 'models'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def copy_models(dest, *names, source=CONFORMANCE_MODELS) -> Path:
    "A model repository at `dest` with copies of the named models (from tests/conformance/models by default)."
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    for n in names: shutil.copytree(Path(source) / n, dest / n, ignore=shutil.ignore_patterns('__pycache__'))
    return dest


def request(port:int, method:str, path:str, body=b'', headers=None, timeout:float=60) -> tuple:
    "One HTTP request on a fresh connection: (status, headers dict, body bytes)."
    conn = http.client.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        if isinstance(body, (dict, list)): body = json.dumps(body).encode()
        conn.request(method, path, body=body, headers=headers or {})
        r = conn.getresponse()
        return r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
    finally: conn.close()


class MiniProcess:
    "triton-mini in a subprocess (its own session) with `flags`; `.stop()` signals it and returns its exit code."
    def __init__(self, repo, *flags, grpc:bool=False, ready_timeout:float=120):
        self.http_port, self.metrics_port, self.grpc_port = free_port(), free_port(), free_port()
        args = [sys.executable, '-m', 'triton_mini', f'--model-repository={repo}', f'--http-port={self.http_port}',
                f'--metrics-port={self.metrics_port}', f'--grpc-port={self.grpc_port}' if grpc else '--allow-grpc=false', *flags]
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT,
                                     start_new_session=True)
        self.ps = psutil.Process(self.proc.pid)
        self.lines, self._reader = [], threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        try: self._wait_ready(ready_timeout)
        except BaseException: self.kill(); raise

    def _read(self):
        for line in self.proc.stdout: self.lines.append(line.rstrip('\n'))

    def _wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None: raise RuntimeError(f'triton-mini exited with {self.proc.returncode}:\n{self.output[-3000:]}')
            try:
                if request(self.http_port, 'GET', '/v2/health/live', timeout=2)[0] in (200, 403): return
            except OSError: pass
            time.sleep(0.05)   # waiting for another process to come up
        raise RuntimeError(f'triton-mini did not start:\n{self.output[-3000:]}')

    @property
    def output(self) -> str: return '\n'.join(self.lines)

    def rss(self) -> int: return self.ps.memory_info().rss
    def fds(self) -> int: return self.ps.num_fds()
    def threads(self) -> int: return self.ps.num_threads()

    def request(self, method, path, body=b'', headers=None, timeout=60): return request(self.http_port, method, path, body, headers, timeout)

    def send_signal(self, sig=signal.SIGTERM): self.proc.send_signal(sig)

    def stop(self, sig=signal.SIGTERM, timeout:float=60) -> int:
        if self.proc.poll() is None: self.proc.send_signal(sig)
        try: code = self.proc.wait(timeout)
        finally: self.kill()
        return code

    def kill(self):
        "End the process group (model stubs included) if anything is left."
        try: os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError: pass
        self.proc.wait()
        self._reader.join(5)
