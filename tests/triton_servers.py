"""Start triton_mini and the real Triton 2.51 (the oracle) side by side, for tests that compare them.

Both speak HTTP on free ports; tests send the same requests to both and compare what comes back. The
oracle is found via $TRITON_ORACLE, else <repo>/../shared/oracle/real-triton; `oracle_or_skip()` skips
the calling test with that reason when it is absent. The oracle always runs with its working directory
outside the checkout (the checkout's triton_python_backend_utils.py would shadow Triton's own).
"""
import http.client as httplib, json, os, signal, socket, subprocess, time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
ORACLE = os.environ.get('TRITON_ORACLE') or str(ROOT.parent / 'shared' / 'oracle' / 'real-triton')


def oracle_or_skip():
    if not os.access(ORACLE, os.X_OK): pytest.skip(f'real Triton oracle not found at {ORACLE} (set TRITON_ORACLE)')


def free_port() -> int:
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def http(port:int, method:str, path:str, body=None, timeout:float=60) -> tuple:
    "One HTTP request: (status, content type, body text). `body` may be a dict (sent as JSON) or bytes."
    conn = httplib.HTTPConnection('127.0.0.1', port, timeout=timeout)
    try:
        data = json.dumps(body).encode() if isinstance(body, (dict, list)) else body
        conn.request(method, path, body=data)
        r = conn.getresponse()
        return r.status, r.getheader('Content-Type'), r.read().decode('utf-8', 'replace')
    finally: conn.close()


def wait_until(check, timeout:float, what:str):
    "Poll `check()` until it is true: for state changes in an external server, which has nothing to wait on."
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline: raise AssertionError(f'timed out after {timeout} s waiting for {what}')
        time.sleep(0.1)


class RealTriton:
    "The real tritonserver on free ports (`http_port`, `metrics_port`); `stop()` ends it and its stubs."
    def __init__(self, repo, *flags, env=None, ready:bool=True, log_name:str='triton.log'):
        oracle_or_skip()
        self.repo, self.http_port, self.grpc_port, self.metrics_port = Path(repo), free_port(), free_port(), free_port()
        self.log_path = self.repo.parent / log_name
        self._log = open(self.log_path, 'w')
        args = [ORACLE, f'--model-repository={self.repo}', '--http-port', str(self.http_port), '--grpc-port', str(self.grpc_port),
                '--metrics-port', str(self.metrics_port), '--exit-timeout-secs=3', *flags]
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, start_new_session=True,
                                     cwd=self.repo.parent, env={**os.environ, **(env or {})})
        try: self._wait(ready)
        except BaseException: self.stop(); raise

    def _wait(self, ready:bool):
        path = '/v2/health/ready' if ready else '/v2/health/live'
        deadline = time.monotonic() + 300   # the first start may build the oracle's venv
        while True:
            try:
                if http(self.http_port, 'GET', path, timeout=5)[0] == 200: return
            except OSError: pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f'real Triton did not start:\n{self.log()[-3000:]}')
            time.sleep(0.2)   # waiting for an external process to come up

    def log(self) -> str: return self.log_path.read_text(errors='replace')

    def stop(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try: self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL); self.proc.wait()
        self._log.close()


class MiniTriton:
    "triton_mini in this process, over HTTP (and metrics), with the same interface as RealTriton."
    def __init__(self, repo, **server_kw):
        from triton_mini.server import TritonServer
        from triton_mini.http_server import HTTPFrontend, HTTPService, bind_socket
        from triton_mini.metrics import MetricsCollector
        self.repo = Path(repo)
        self.server = TritonServer(self.repo, **server_kw)
        self.failures = self.server.start()
        self.service = HTTPService({HTTPFrontend(self.server): bind_socket('127.0.0.1', 0),
                                    MetricsCollector(self.server): bind_socket('127.0.0.1', 0)}, exit_timeout_secs=3).start()
        self.http_port, self.metrics_port = self.service.ports

    def stop(self):
        self.service.stop()
        self.server.stop()
