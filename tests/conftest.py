"""Fixtures every test module shares; the machinery behind them is tests/triton_servers.py (importable by scripts too).

- `oracle`: the real Triton's path, or the test skips with the one reason every oracle test gives.
- `real_triton(repo, *flags, **kw)`, `mini_process(repo, *flags, **kw)`, `mini(repo, **kw)`: factories that start the
  real tritonserver, the `triton-mini` command, or triton_mini in process, on free ports; whatever a test started is
  stopped when it ends. `launch` is the same three as methods; `launch_module` keeps its servers for the whole module
  (for a module-scoped fixture: one server start shared by the module's tests).
- The folders of tests/models are used by name through `triton_servers.copy_models` / `model_path`.
- A test that fails while a server process runs gets the tail of that server's log in its report.
- Servers die with the test process that started them, however it ends (`triton_servers.guard`); a run with tests
  marked `default_ports` fails at collection when a process outside it holds 8000-8002.

Judges a test can be skipped for want of, and how CI insists on them:
- `oracle` (the real Triton 2.51: tools/real_triton.py installs it from PyPI), `examples` (Triton's example client
  programs, tests/test_triton_examples.py), `qa` (Triton's QA corpus, ../shared/triton-qa or $TRITON_QA_DIR), `python_qa`
  (the server repository's git directory for its Python-backend QA, tests/test_triton_python_qa.py: $TRITON_SERVER_REPO,
  unset by default while that judge is in its first stage, e.g. /work/.mirror/triton-inference-server+server/repo),
  `openvino_qa` (the OpenVINO cases of tests/test_triton_qa.py: the openvino extra and the server repository's git
  directory for qa/openvino_models, $TRITON_SERVER_REPO, by default that mirror), `libtorch_qa` (Triton's PyTorch-backend
  QA that needs no GPU, tests/test_libtorch_qa.py: torch and that git directory), `fil_qa`
  (the FIL backend's end-to-end QA, tests/test_fil_qa.py: $TRITON_FIL_BACKEND_REPO and $RAPIDS_TRITON_REPO, git
  directories of fil_backend and rapids-triton, which .ci/run takes from the mirrors, plus scikit-learn, pandas and
  cuda-python), `browser`
  (chromium and chromedriver, tests/test_docs_site.py), `cells` (the modules a notebook cell marked `#| needs: MODULE`
  imports: nbs/12_ray_serve.ipynb's, with the ray extra). Without one, its tests skip and the closing summary counts them.
- `TRITON_MINI_REQUIRE=oracle,qa,browser` (comma-separated; `all` for every judge) turns each of those skips into a
  failure with the same reason: .ci/run sets it for the judges it provides, so a judge that went missing there makes
  CI red instead of quietly skipping. Every skip for want of a judge goes through `triton_servers.skip_or_fail`.
- A test that starts the real Triton must carry the `oracle` marker (`pytest -m 'not oracle'` is the run without
  it): every way to the oracle (`RealTriton`, the `real_triton` and `oracle` fixtures, `oracle_or_skip()`,
  `oracle_available()`) fails a running test that lacks it. `CURRENT_TEST` below tells them which test is running.
"""
import logging, os, sys, time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))   # test modules and scripts import the helpers as top-level modules
import triton_servers as ts  # noqa: E402
# Options for this run only (CI's `--durations`): the pytest runs some tests start must not inherit them.
os.environ.pop('PYTEST_ADDOPTS', None)


@pytest.fixture(scope='session', autouse=True)
def _server_work_root(tmp_path_factory):
    "Server logs and working folders under pytest's temporary folder (outside the checkout; the last runs are kept)."
    ts.WORK_ROOT = tmp_path_factory.mktemp('servers')
    yield
    ts.WORK_ROOT = None


def pytest_configure(config):
    "A misspelt $TRITON_MINI_REQUIRE would require nothing: refuse it before any test runs."
    try: ts.required_judges()
    except ValueError as e: raise pytest.UsageError(str(e)) from None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    "The running test, for the oracle's marker check: its fixtures' setup (module-scoped ones too), call and teardown."
    ts.CURRENT_TEST = item
    try: yield
    finally: ts.CURRENT_TEST = None


@pytest.fixture(autouse=True)
def _triton_mini_logger_restored():
    """The 'triton_mini' logger as each test found it: a test that runs the command line in process (setup_logging) or
    a stub in a thread routes it elsewhere and stops its propagation, and a later test's caplog would then see nothing."""
    logger = logging.getLogger('triton_mini')
    saved = logger.handlers[:], logger.propagate, logger.level
    yield
    logger.handlers[:], logger.propagate = saved[0], saved[1]
    logger.setLevel(saved[2])


@pytest.fixture
def oracle() -> str:
    "The oracle's path (per test, not per session: each test that asks for it is checked for the `oracle` marker)."
    ts.oracle_or_skip()
    return ts.ORACLE


@pytest.fixture
def launch():
    launcher = ts.Launcher()
    yield launcher
    launcher.close()


@pytest.fixture(scope='module')
def launch_module():
    launcher = ts.Launcher()
    yield launcher
    launcher.close()


@pytest.fixture
def real_triton(launch): return launch.real_triton


@pytest.fixture
def mini_process(launch): return launch.mini_process


@pytest.fixture
def mini(launch): return launch.mini


# ------------------------------------------------------------------------------------------------- failure reports

def pytest_runtest_setup(item):
    item._server_window_start = time.monotonic()
    ts.LIVE[:] = [s for s in ts.LIVE if s.stopped_at is None or s.stopped_at >= item._server_window_start - 600]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    "On failure: the last lines of every server process that ran during the test (they are often the explanation)."
    outcome = yield
    report = outcome.get_result()
    if not report.failed: return
    start = getattr(item, '_server_window_start', 0)
    for s in ts.LIVE:
        if s.started_at is not None and (s.stopped_at is None or s.stopped_at >= start):
            report.sections.append((f'{s.label} log ({s.workdir / "server.log"})', s.log_tail(40)))


# ------------------------------------------------------------------------------------------------- slow, and what was skipped

def pytest_collection_modifyitems(config, items):
    "Every oracle comparison starts a real tritonserver: it is `slow` too, so `-m 'not slow'` is the fast loop."
    for item in items:
        if item.get_closest_marker('oracle') and not item.get_closest_marker('slow'): item.add_marker(pytest.mark.slow)


@pytest.hookimpl(tryfirst=True)   # in an xdist worker, before xdist's own, which sends the collection to the controller
def pytest_collection_finish(session):
    """A run whose selected tests bind the default ports stops here, in one line, when a process outside it holds
    them (an orphan of a killed run, say): each of those tests would otherwise fail or skip on its own, minutes apart."""
    if session.config.option.collectonly or not any(item.get_closest_marker('default_ports') for item in session.items): return
    worker = hasattr(session.config, 'workerinput')
    if not (stranger := ts.strangers_on_default_ports(os.getppid() if worker else os.getpid())): return   # a worker's parent is the run
    if not worker: raise pytest.UsageError(stranger)
    session.items[:] = []          # an xdist worker: it runs nothing, and the controller stops with the reason
    session.shouldstop = stranger


WANTS = {'the real Triton (tools/real_triton.py, $TRITON_ORACLE)': ts.SKIP_ORACLE,
         "Triton's QA corpus ($TRITON_QA_DIR)": 'Triton QA corpus not found',
         'llama-cpp-python (the llm extra)': "No module named 'llama_cpp'",
         "Triton's example programs (client, python_backend: tests/test_triton_examples.py)": 'examples not found',
         'ray (the ray extra)': 'the ray extra is not installed'}


def pytest_terminal_summary(terminalreporter):
    "One closing line: how many tests were skipped for want of the oracle, the QA corpus, Triton's examples or an extra."
    reasons = [str(r.longrepr[2]) if isinstance(r.longrepr, tuple) else str(r.longrepr)
               for r in terminalreporter.stats.get('skipped', [])]
    counts = {want: sum(key in r for r in reasons) for want, key in WANTS.items()}
    if any(counts.values()):
        terminalreporter.write_line('skipped for want of: ' + ', '.join(f'{want}: {n}' for want, n in counts.items() if n))


# ------------------------------------------------------------------------------------------------- the served pass's files

def _record_served_files(record:str):
    """.ci/run's second pass runs the suite again with `TRITON_MINI_PYTHON_BACKEND_MODE=process` (issue 42: the mode
    users get). That variable changes one thing: a Python model whose server was built without a mode runs in a stub
    process instead of on a thread. A test file in which no Python model ran on a thread, and which started no Python
    process that could build such a server, runs exactly as it did, so the second pass can leave it out. With
    $TRITON_MINI_RECORD_SERVED set (a file), the first pass appends to it each test file that (a) resolved a Python
    model to thread mode in this process, or (b) started a Python process other than a stub or the `triton-mini`
    command (both already run stub processes in the first pass). Over-inclusion costs time, never a check."""
    import subprocess
    from triton_mini.python_backend import PythonBackend
    tests = Path(__file__).resolve().parent

    def note():
        item = ts.CURRENT_TEST
        if item is None or tests not in Path(item.path).parents: return
        with open(record, 'a') as f: f.write(f'{Path(item.path).relative_to(tests.parent)}\n')

    mode_for = PythonBackend.mode_for
    def recorded_mode_for(self, cfg):
        mode = mode_for(self, cfg)
        if mode == 'thread': note()
        return mode
    PythonBackend.mode_for = recorded_mode_for

    popen_init = subprocess.Popen.__init__
    def recorded_popen_init(self, args, *a, **kw):
        argv = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        words = ' '.join(map(os.fsdecode, argv))
        if 'python' in Path(os.fsdecode(argv[0]).split()[0]).name and 'triton_mini.stub_process' not in words \
           and '-m triton_mini ' not in words + ' ':
            note()
        popen_init(self, args, *a, **kw)
    subprocess.Popen.__init__ = recorded_popen_init


if os.environ.get('TRITON_MINI_RECORD_SERVED'): _record_served_files(os.environ['TRITON_MINI_RECORD_SERVED'])
