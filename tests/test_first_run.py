"""A newcomer's first run without the `llm` extra: `pip install . && triton-mini` must serve the bundled
repository (the two LLM models left out, in one log line), while a repository the user names still stops
the server when a model cannot load (`--exit-on-error` is not weakened). The binding's absence is simulated
by a `llama_cpp` module first on PYTHONPATH that raises ModuleNotFoundError, so every `import llama_cpp` fails as if
it were not installed: in the server and in the stub processes it starts (which inherit its environment)."""
import json, os, signal, subprocess, sys, tempfile, threading, urllib.error, urllib.request
from pathlib import Path

import pytest

from triton_mini.cli import example_repository, wait_for_http
from triton_servers import free_port, popen

# `triton-mini`, in a Python (and its child processes) where llama_cpp cannot be imported.
NO_LLAMA = "import sys; from triton_mini.cli import main; sys.exit(main(sys.argv[1:]))"
SHADOW = Path(tempfile.mkdtemp(prefix='no_llama_'))
(SHADOW / 'llama_cpp.py').write_text("raise ModuleNotFoundError(\"No module named 'llama_cpp'\", name='llama_cpp')\n")
ENV = {**os.environ, 'PYTHONPATH': os.pathsep.join(filter(None, [str(SHADOW), os.environ.get('PYTHONPATH')]))}


def start(*flags):
    "The command without llama_cpp, on free ports; returns (process, http port, collected output lines)."
    http = free_port()
    proc = popen([sys.executable, '-c', NO_LLAMA, f'--http-port={http}', f'--metrics-port={free_port()}',
                  '--allow-grpc=false', *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=ENV)
    lines = []
    threading.Thread(target=lambda: lines.extend(l.rstrip('\n') for l in proc.stdout), daemon=True).start()
    return proc, http, lines


def wait_live(proc, url, timeout=120):
    "Wait until the server answers, or stop waiting as soon as it has exited."
    for _ in range(int(timeout)):
        if wait_for_http(url, 1): return True
        if proc.poll() is not None: return False
    return False


def get(url):
    try:
        with urllib.request.urlopen(url, timeout=30) as r: return r.status, r.read()
    except urllib.error.HTTPError as e: return e.code, e.read()


def test_default_run_serves_without_llama_cpp():
    proc, http, lines = start()
    try:
        base = f'http://127.0.0.1:{http}'
        assert wait_live(proc, base + '/v2/health/live'), '\n'.join(lines)
        assert get(base + '/v2/health/ready')[0] == 200, '\n'.join(lines)
        body = json.dumps({'inputs': [{'name': 'INPUT0', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 2, 3, 4]},
                                      {'name': 'INPUT1', 'shape': [1, 4], 'datatype': 'FP32', 'data': [1, 1, 1, 1]}]})
        req = urllib.request.Request(base + '/v2/models/add_sub/infer', data=body.encode(), method='POST')
        with urllib.request.urlopen(req, timeout=30) as r: assert json.loads(r.read())['outputs'][0]['data'] == [2, 3, 4, 5]
        assert get(base + '/v2/models/linear_onnx/ready')[0] == 200
        assert get(base + '/v2/models/qwen_gguf/ready')[0] == 400          # in the repository, not loaded
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    out = '\n'.join(lines)
    about_llama = [l for l in lines if 'llama' in l.lower()]
    assert len(about_llama) == 1, out                                      # ONE line says what is missing
    assert about_llama[0].startswith('W') and 'not loading qwen_gguf, qwen_gguf_stream' in about_llama[0]
    assert 'pip install llama-cpp-python' in about_llama[0]
    assert 'Traceback' not in out and 'UNAVAILABLE' not in out, out
    table = [l for l in lines if l.startswith('| ')]
    assert any(l.startswith('| add_sub ') and 'READY' in l for l in table) and not any('qwen' in l for l in table), out


def test_named_repository_still_exits_on_error():
    "The same models in a repository the user names: tritonserver's behaviour, exit code 1."
    proc, http, lines = start(f'--model-repository={example_repository()}')
    assert proc.wait(120) == 1
    out = '\n'.join(lines)
    assert 'error: creating server: Internal - failed to load all models' in out, out
    assert 'not loading' not in out


@pytest.mark.oracle
def test_explicit_subset_is_ready_as_in_triton(tmp_path):
    """What the default run falls back to, `--model-control-mode=explicit --load-model=...` with the LLM models left
    in the repository, answers readiness and the repository index as real Triton 2.51 does."""
    import shutil
    from triton_servers import RealTriton, http
    repo = tmp_path / 'models'
    for name in ('add_sub', 'identity_bytes', 'qwen_gguf', 'qwen_gguf_stream'):
        shutil.copytree(example_repository() / name, repo / name, symlinks=True)
    flags = ['--model-control-mode=explicit', '--load-model=add_sub', '--load-model=identity_bytes']
    triton = RealTriton(repo, *flags)
    try: expected = [http(triton.http_port, m, p)[::2] for m, p in CHECKS]
    finally: triton.stop()
    proc, port, lines = start(f'--model-repository={repo}', *flags)
    try:
        assert wait_live(proc, f'http://127.0.0.1:{port}/v2/health/live'), '\n'.join(lines)
        got = [http(port, m, p)[::2] for m, p in CHECKS]
    finally:
        proc.send_signal(signal.SIGTERM); proc.wait(60)
    for (status, body), (want_status, want_body) in zip(got, expected):
        assert status == want_status
        if body.startswith('['): assert json.loads(body) == json.loads(want_body)


CHECKS = [('GET', '/v2/health/ready'), ('GET', '/v2/models/add_sub/ready'), ('GET', '/v2/models/qwen_gguf/ready'),
          ('POST', '/v2/repository/index')]
