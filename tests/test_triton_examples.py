"""Triton's own example client programs, run unchanged (only their server URL is pointed at ours): 39 of 39 pass on
triton-mini; real Triton 2.51 passes 39 of 39.

The programs are NVIDIA's and are not committed: tritonclient's `src/python/examples/*.py` are read from
`$TRITON_CLIENT_EXAMPLES` (that folder), and python_backend's `examples/` from `$TRITON_PYTHON_BACKEND_EXAMPLES`; else
from the git mirrors the `fetch` tool leaves under /work/.mirror (github:triton-inference-server/client and
/python_backend), else the tests skip. What they run against:
- tritonclient's examples: `tests/models/triton_examples`, our Python-backend stand-ins for the example models
  (`simple`, `simple_string`, `simple_identity`, `simple_int8`, `simple_sequence`, `simple_dyna_sequence`,
  `simple_string_dyna_sequence`; see its README), served with `--exit-on-error=false` so that one missing feature does
  not hide the rest (`test_example_repository_starts_with_default_flags` checks the default); the model-control
  client gets its own server with `--model-control-mode=explicit` (it loads, reconfigures and unloads `simple`);
  `simple_grpc_custom_repeat.py` runs against python_backend's `decoupled` repository (its `repeat_int32`).
- python_backend's examples: each folder's model(s), laid out as its README says, and its client(s).
A client passes when it exits 0 within its timeout and, if its source prints "PASS", printed it. The `-u` flag points
tritonclient's examples at our ports; python_backend's clients hard-code `localhost:800x`, which is rewritten to the
served ports in a temporary copy (nothing else changes). Clients that share fixed names run one at a time: the
sequence clients (sequence ids 1000-1002) per server, the shm clients (OS shared-memory keys like /input_simple) globally.

Known failures (strict xfails, each with its cause) are in `tests/triton_examples_known_failures.txt`.
Not run, and why: `NOT_RUN` below.
"""
import contextlib, io, json, os, re, shutil, subprocess, sys, tarfile, tempfile, threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

from triton_servers import MiniProcess, RealTriton, copy_models, http, model_path, oracle_or_skip, skip_or_fail

HERE = Path(__file__).parent
STANDINS = model_path('triton_examples')
MIRRORS = Path(os.environ.get('TRITON_MIRRORS') or '/work/.mirror')
KNOWN_FAILURES_FILE = HERE / 'triton_examples_known_failures.txt'

NOT_RUN = {
    'client/image_client.py, grpc_image_client.py, ensemble_image_client.py': 'image classification models and images',
    'client/grpc_client.py': 'the DenseNet ONNX model (densenet_onnx)',
    'client/simple_http_cudashm_client.py, simple_grpc_cudashm_client.py': 'CUDA shared memory needs a GPU',
    'client/simple_grpc_model_control.py': "counts 8 models in the QA's L0_grpc repository, which also holds an image "
        'model; its HTTP twin (7 models, the ones here) runs',
    'client/memory_growth_test.py': "a QA leak test (fixed ports, a custom backend's model, run under a memory profiler)",
    'python_backend/instance_kind, jax, pytorch, preprocessing': 'ResNet/PyTorch, JAX, TensorRT+DALI',
}

# python_backend examples: folder -> (the repository its README lays out: {model: (config file or None, model file)}, clients)
PB_REPOS = {
    'add_sub': ({'add_sub': ('add_sub/config.pbtxt', 'add_sub/model.py')}, ['add_sub/client.py']),
    'auto_complete': ({'nobatch_auto_complete': (None, 'auto_complete/nobatch_model.py'),
                       'batch_auto_complete': (None, 'auto_complete/batch_model.py')}, ['auto_complete/client.py']),
    # bls: its `pytorch` model needs torch (not installed); add_sub's model.py under pytorch's config stands in (same
    # inputs, outputs and sums). The clients send the callee's name as a BYTES tensor: sync_model passes those bytes
    # to pb_utils.InferenceRequest(model_name=...), which pybind11 converts to str.
    'bls': ({'bls_sync': ('bls/sync_config.pbtxt', 'bls/sync_model.py'), 'bls_async': ('bls/async_config.pbtxt', 'bls/async_model.py'),
             'add_sub': ('add_sub/config.pbtxt', 'add_sub/model.py'), 'pytorch': ('pytorch/config.pbtxt', 'add_sub/model.py')},
            ['bls/sync_client.py', 'bls/async_client.py']),
    'bls_decoupled': ({'bls_decoupled_sync': ('bls_decoupled/sync_config.pbtxt', 'bls_decoupled/sync_model.py'),
                       'bls_decoupled_async': ('bls_decoupled/async_config.pbtxt', 'bls_decoupled/async_model.py'),
                       'square_int32': ('decoupled/square_config.pbtxt', 'decoupled/square_model.py')},
                      ['bls_decoupled/sync_client.py', 'bls_decoupled/async_client.py']),
    'custom_metrics': ({'custom_metrics': ('custom_metrics/config.pbtxt', 'custom_metrics/model.py')}, ['custom_metrics/client.py']),
    'decoupled': ({'repeat_int32': ('decoupled/repeat_config.pbtxt', 'decoupled/repeat_model.py'),
                   'square_int32': ('decoupled/square_config.pbtxt', 'decoupled/square_model.py')},
                  ['decoupled/repeat_client.py', 'decoupled/square_client.py']),
}

SEQUENCE_CLIENTS = ('simple_grpc_aio_sequence_stream_infer_client.py', 'simple_grpc_sequence_stream_infer_client.py',
                    'simple_grpc_sequence_sync_infer_client.py', 'simple_http_sequence_sync_infer_client.py')
CLIENTS = sorted({
    'grpc_explicit_byte_content_client.py', 'grpc_explicit_int8_content_client.py', 'grpc_explicit_int_content_client.py',
    'reuse_infer_objects_client.py', 'simple_grpc_aio_infer_client.py', 'simple_grpc_async_infer_client.py',
    'simple_grpc_custom_args_client.py', 'simple_grpc_custom_repeat.py', 'simple_grpc_health_metadata.py',
    'simple_grpc_infer_client.py', 'simple_grpc_keepalive_client.py',
    'simple_grpc_shm_client.py', 'simple_grpc_shm_string_client.py', 'simple_grpc_string_infer_client.py',
    'simple_http_aio_infer_client.py', 'simple_http_async_infer_client.py', 'simple_http_health_metadata.py',
    'simple_http_infer_client.py', 'simple_http_model_control.py', 'simple_http_shm_client.py',
    'simple_http_shm_string_client.py', 'simple_http_string_infer_client.py', *SEQUENCE_CLIENTS})


@dataclass(frozen=True)
class Example:
    id: str          # client/<script>[ -d] or python_backend/<folder>/<client>
    source: str      # 'client' | 'python_backend'
    script: str      # path inside its source folder
    args: tuple      # flags besides the URL (only the sequence clients' -d)
    repo: str        # which server: 'examples', 'explicit' (model control), or 'pb:<folder>'

    @property
    def lock(self) -> str:
        "Clients holding the same lock never run at once: fixed sequence ids on one server, fixed OS shm keys anywhere."
        name = Path(self.script).name
        if 'shm' in name: return 'shm'
        return f'sequence@{self.repo}' if name in SEQUENCE_CLIENTS else ''


def examples() -> list:
    out = []
    for script in CLIENTS:
        repo = ('explicit' if script == 'simple_http_model_control.py' else 'pb:decoupled' if script == 'simple_grpc_custom_repeat.py'
                else 'examples')
        out.append(Example(f'client/{script}', 'client', script, (), repo))
        if script in SEQUENCE_CLIENTS: out.append(Example(f'client/{script} -d', 'client', script, ('-d',), repo))
    for folder, (_, clients) in PB_REPOS.items():
        out += [Example(f'python_backend/{c}', 'python_backend', c, (), f'pb:{folder}') for c in clients]
    return out


EXAMPLES = examples()


# ----------------------------------------------------------------------------------------------------- the sources
def _from_mirror(mirror:str, subdir:str, dest:Path) -> Path|None:
    git_dir = MIRRORS / mirror / 'repo'
    if not git_dir.is_dir(): return None
    archive = subprocess.run(['git', f'--git-dir={git_dir}', 'archive', 'HEAD', subdir], capture_output=True, timeout=120)
    if archive.returncode != 0: return None
    tarfile.open(fileobj=io.BytesIO(archive.stdout)).extractall(dest, filter='data')
    return dest / subdir


@pytest.fixture(scope='module')
def sources(tmp_path_factory) -> dict:
    "{'client': folder of tritonclient's examples or None, 'python_backend': folder of python_backend's examples or None}."
    tmp = tmp_path_factory.mktemp('triton-example-sources')
    found = {}
    for key, env, mirror, subdir in (('client', 'TRITON_CLIENT_EXAMPLES', 'triton-inference-server+client', 'src/python/examples'),
                                     ('python_backend', 'TRITON_PYTHON_BACKEND_EXAMPLES', 'triton-inference-server+python_backend', 'examples')):
        given = os.environ.get(env)
        found[key] = Path(given) if given and Path(given).is_dir() else _from_mirror(mirror, subdir, tmp / key)
    return found


def _need(sources, source:str) -> Path:
    if sources[source] is None:
        skip_or_fail('examples', f'Triton {source} examples not found: set $TRITON_{"CLIENT" if source == "client" else "PYTHON_BACKEND"}_EXAMPLES '
                    f'or fetch github:triton-inference-server/{"client" if source == "client" else "python_backend"} into {MIRRORS}')
    return sources[source]


# ----------------------------------------------------------------------------------------------------- the servers
def write_repository(key:str, sources:dict, dest:Path) -> Path:
    "The model repository server `key` serves, laid out in `dest`."
    if key in ('examples', 'explicit'):
        return copy_models(dest, 'triton_examples')
    models, _ = PB_REPOS[key.split(':', 1)[1]]
    for name, (config, model) in models.items():
        (dest / name / '1').mkdir(parents=True)
        shutil.copy(sources['python_backend'] / model, dest / name / '1' / 'model.py')
        if config: shutil.copy(sources['python_backend'] / config, dest / name / 'config.pbtxt')
    return dest


def ExampleServer(kind:str, repo:Path, flags:tuple):
    "triton-mini (`python -m triton_mini`) or the real tritonserver on free ports, serving one repository until stop(); `up`: it came up (live)."
    launcher = MiniProcess if kind == 'mini' else RealTriton
    return launcher(repo, *flags, wait='live', timeout=300, check=False)


def server_flags(key:str) -> tuple:
    if key == 'explicit': return ('--model-control-mode=explicit',)
    return ('--exit-on-error=false',) if key == 'examples' else ()


# ----------------------------------------------------------------------------------------------------- the clients
def prepare_client(ex:Example, sources:dict, server:ExampleServer, workdir:Path) -> list:
    "The command line that runs `ex` against `server`: tritonclient's get `-u`; python_backend's get their URLs rewritten."
    src = sources[ex.source] / ex.script
    if ex.source == 'client':
        port = server.http_port if '"localhost:8000"' in src.read_text() else server.grpc_port
        return [sys.executable, str(src), '-u', f'127.0.0.1:{port}', *ex.args]
    text, ports = src.read_text(), {'8000': server.http_port, '8001': server.grpc_port, '8002': server.metrics_port}
    patched, n = re.subn(r'localhost:(800[012])', lambda m: f'127.0.0.1:{ports[m.group(1)]}', text)
    assert n, f'{ex.script}: no localhost:800x URL to point at the server'
    copy = workdir / Path(ex.script).name
    copy.write_text(patched)
    return [sys.executable, str(copy), *ex.args]


def run_client(ex:Example, sources:dict, server:ExampleServer, timeout:float=240) -> tuple:
    "(passed, detail): exit 0 within `timeout`, and PASS printed where the program prints it."
    with tempfile.TemporaryDirectory(prefix='triton-example-') as work:
        cmd = prepare_client(ex, sources, server, Path(work))
        try: r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=work)
        except subprocess.TimeoutExpired as e:
            return False, f'timed out after {timeout} s; output:\n{(e.stdout or b"")[-2000:]}'
    out = r.stdout + r.stderr
    wants_pass = 'PASS' in (sources[ex.source] / ex.script).read_text()
    ok = r.returncode == 0 and (not wants_pass or 'PASS' in r.stdout)
    return ok, f'exit {r.returncode}{"" if not wants_pass or "PASS" in r.stdout else ", no PASS printed"}; output tail:\n{out[-2500:]}'


def run_examples(kind:str, selected:list, sources:dict, workers:int=3) -> dict:
    "Start the servers `selected` needs, run every client (several at a time, same-lock clients one by one): {id: (ok, detail)}."
    results, servers, tmp = {}, {}, Path(tempfile.mkdtemp(prefix=f'triton-examples-{kind}-'))
    try:
        def start(key):
            repo = write_repository(key, sources, tmp / key.replace(':', '_') / 'models')
            servers[key] = ExampleServer(kind, repo, server_flags(key))
        keys = sorted({ex.repo for ex in selected})
        with ThreadPoolExecutor(workers) as pool: list(pool.map(start, keys))
        locks = {ex.lock: threading.Lock() for ex in selected}
        def one(ex):
            server = servers[ex.repo]
            if not server.up:
                return ex.id, (False, f'the server did not come up; its log:\n{server.log()[-3000:]}')
            with locks[ex.lock] if ex.lock else contextlib.nullcontext():
                return ex.id, run_client(ex, sources, server)
        order = sorted(selected, key=lambda ex: ex.lock == '')   # locked chains first: they are the long poles
        with ThreadPoolExecutor(workers) as pool: results.update(pool.map(one, order))
    finally:
        for s in servers.values(): s.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return results


# ----------------------------------------------------------------------------------------------------- the tests
def known_failures() -> dict:
    out = {}
    for line in KNOWN_FAILURES_FILE.read_text().splitlines():
        line = line.split('#', 1)[0].strip()
        if line:
            cid, _, cause = line.partition('  ')   # ids hold one space (`... -d`): two separate the cause
            out[cid.strip()] = cause.strip()
    return out


KNOWN = known_failures()


def params(kind:str) -> list:
    marks = lambda ex: [pytest.mark.xfail(strict=True, reason=KNOWN[ex.id])] if kind == 'mini' and ex.id in KNOWN else []
    return [pytest.param(ex, id=ex.id, marks=marks(ex)) for ex in EXAMPLES]


@pytest.fixture(scope='module')
def verdicts(request, sources):
    cache = {}
    def get(kind:str, ex:Example) -> tuple:
        _need(sources, ex.source)
        if kind not in cache:
            test = f'test_{kind}_runs_triton_example'
            selected = [item.callspec.params['ex'] for item in request.session.items
                        if getattr(item, 'originalname', None) == test and item.module is sys.modules[__name__]]
            selected = [e for e in selected if sources[e.source] is not None]
            cache[kind] = run_examples(kind, selected, sources)
        return cache[kind][ex.id]
    return get


@pytest.mark.slow
@pytest.mark.parametrize('ex', params('mini'))
def test_mini_runs_triton_example(ex, verdicts):
    ok, detail = verdicts('mini', ex)
    assert ok, f'{ex.id}: {detail}'


@pytest.mark.slow
@pytest.mark.oracle
@pytest.mark.parametrize('ex', params('triton'))
def test_triton_runs_triton_example(ex, verdicts):
    "Real Triton runs every example against the same repository: where it does not, the stand-ins are wrong."
    oracle_or_skip()
    ok, detail = verdicts('triton', ex)
    assert ok, f'{ex.id}: {detail}'


@pytest.mark.slow
@pytest.mark.parametrize('kind', [
    'mini',
    pytest.param('triton', marks=pytest.mark.oracle)])
def test_example_repository_starts_with_default_flags(kind, tmp_path):
    "A new user's first step: tritonserver's default flags on the repository the examples expect; every model READY."
    if kind == 'triton': oracle_or_skip()
    server = ExampleServer(kind, write_repository('examples', {}, tmp_path / 'models'), ())
    try:
        assert server.up and http(server.http_port, 'GET', '/v2/health/ready')[0] == 200, server.log()[-3000:]
        index = json.loads(http(server.http_port, 'POST', '/v2/repository/index', {})[2])
        assert sorted((m['name'], m.get('state')) for m in index) == [(p.name, 'READY') for p in sorted(STANDINS.iterdir()) if p.is_dir()]
    finally: server.stop()


def test_known_failures_name_examples_with_causes():
    ids = {ex.id for ex in EXAMPLES}
    assert not set(KNOWN) - ids, f'not an example: {sorted(set(KNOWN) - ids)}'
    assert all(KNOWN.values())


def test_docstring_states_the_figure():
    m = re.search(r'(\d+) of (\d+) pass on triton-mini; real Triton 2.51 passes (\d+) of (\d+)', ' '.join(__doc__.split()))
    assert m and tuple(map(int, m.groups())) == (len(EXAMPLES) - len(KNOWN), len(EXAMPLES), len(EXAMPLES), len(EXAMPLES))
