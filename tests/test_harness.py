"""The test machinery itself (tests/triton_servers.py, tests/conftest.py): if one of these breaks, other tests fail
for reasons that have nothing to do with triton_mini (a busy port, a stray Triton stub, a model folder not found)."""
import os, shutil, socket, subprocess, sys

import pytest

import triton_servers as ts


def test_free_ports_are_bindable_and_not_handed_out_twice():
    ports = [ts.free_port() for _ in range(50)]
    assert len(set(ports)) == 50
    with socket.socket() as s: s.bind(('127.0.0.1', ports[-1]))


def test_ports_taken_sees_a_listener():
    with socket.socket() as s:
        s.bind(('0.0.0.0', 0)); s.listen()
        port = s.getsockname()[1]
        assert ts.ports_taken(port) == [port]
    assert ts.ports_taken(port) == []


def test_copy_models_by_name(tmp_path):
    one = ts.copy_models(tmp_path / 'one', 'conformance/add_sub', 'python_backend/streamer')
    assert sorted(p.name for p in one.iterdir()) == ['add_sub', 'streamer']
    assert (one / 'add_sub' / 'config.pbtxt').is_file() and (one / 'streamer' / '1' / 'model.py').is_file()
    whole = ts.copy_models(tmp_path / 'whole', 'conformance_explicit')
    assert {p.name for p in whole.iterdir()} == {p.name for p in ts.model_path('conformance_explicit').iterdir()}
    triton_examples = ts.copy_models(tmp_path / 'examples', 'triton_examples')
    assert not (triton_examples / 'README.md').exists()                           # documentation is not a model
    with pytest.raises(FileNotFoundError, match="no test model or repository 'conformance/nope'"):
        ts.copy_models(tmp_path / 'x', 'conformance/nope')


@pytest.mark.slow
def test_a_taken_port_is_retried_on_fresh_ports(tmp_path, monkeypatch, mini_process):
    "Another process takes the port between free_port() and the server's bind: the launcher starts it again."
    holder = socket.socket()
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(('0.0.0.0', 0)); holder.listen()
    taken, real_free_port = holder.getsockname()[1], ts.free_port
    handed = iter([taken])
    monkeypatch.setattr(ts, 'free_port', lambda *a: next(handed, None) or real_free_port(*a))
    try:
        s = mini_process(ts.copy_models(tmp_path / 'models', 'conformance/add_sub'), grpc=False)
        assert s.http_port != taken and s.request('GET', '/v2/health/ready')[0] == 200
    finally: holder.close()


@pytest.mark.slow
def test_fixed_ports_taken_are_reported_not_retried(tmp_path):
    "A server that must use given ports (seed 003's curl commands: the defaults) reports them taken, so its test can skip."
    with socket.socket() as holder:
        holder.bind(('0.0.0.0', 0)); holder.listen()
        taken = holder.getsockname()[1]
        with pytest.raises(ts.PortsTaken, match='already in use'):
            ts.MiniProcess(ts.copy_models(tmp_path / 'models', 'conformance/add_sub'), grpc=False, fixed_ports=(taken, None, ts.free_port()))


@pytest.mark.oracle
def test_real_triton_runs_outside_the_checkout_and_its_group_is_gone_after_stop(tmp_path, oracle, real_triton):
    triton = real_triton(ts.copy_models(tmp_path / 'models', 'conformance/add_sub'))
    assert triton.proc.args[0] == oracle
    assert ts.ROOT not in triton.cwd.resolve().parents and triton.cwd.resolve() != ts.ROOT
    assert ts.http(triton.http_port, 'GET', '/v2/models/add_sub/ready')[0] == 200   # its Python stub runs
    group = os.getpgid(triton.proc.pid)
    assert group == triton.proc.pid                                                 # a session of its own
    assert triton.stop() == 0                                                       # SIGTERM: a clean exit, not a crash
    with pytest.raises(ProcessLookupError): os.killpg(group, 0)                    # stubs included


def test_a_launcher_stops_what_it_started(tmp_path):
    launcher = ts.Launcher()
    repo = ts.copy_models(tmp_path / 'models', 'conformance/add_sub')
    process, inproc = launcher.mini_process(repo, grpc=False), launcher.mini(repo, metrics=False)
    launcher.close()
    assert process.proc.poll() is not None and inproc.server is None
    with pytest.raises(ProcessLookupError): os.killpg(process.proc.pid, 0)


# ------------------------------------------------------------------------------------------------- judges and the oracle marker

META = """
import pytest, triton_servers as ts

def test_unmarked_asks_for_the_oracle(oracle): pass

def test_unmarked_starts_the_real_triton(tmp_path, real_triton): real_triton(tmp_path)

@pytest.fixture(scope='module')
def shared(tmp_path_factory): return ts.RealTriton(tmp_path_factory.mktemp('m'))

def test_unmarked_through_a_module_fixture(shared): pass

def test_unmarked_compares_when_present(): ts.oracle_available()

@pytest.mark.oracle
def test_marked(oracle): pass

def test_wants_the_qa_corpus(): ts.skip_or_fail('qa', 'no corpus here')

def test_no_judge(): pass
"""


def run_meta(tmp_path, require:str) -> dict:
    "This folder's conftest and machinery around META in a pytest subprocess, the oracle absent: {test name: outcome}."
    for f in ('conftest.py', 'triton_servers.py'): shutil.copy(ts.TESTS / f, tmp_path / f)
    (tmp_path / 'test_meta.py').write_text(META)
    env = {**os.environ, 'TRITON_ORACLE': str(tmp_path / 'no-such-oracle'), ts.REQUIRE: require}
    r = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-rA', '-p', 'no:cacheprovider', '-p', 'no:xdist', str(tmp_path)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    out = {}
    for line in r.stdout.splitlines():
        word, _, rest = line.partition(' test_meta.py::')
        if word in ('PASSED', 'FAILED', 'SKIPPED', 'ERROR'): out[rest.split(' ')[0]] = word
        elif line.startswith('SKIPPED ['): out.setdefault('skipped', []).append(line)   # `SKIPPED [1] file:line: reason`
    return out, r.stdout


@pytest.mark.slow
@pytest.mark.parametrize('require', ['', 'oracle,qa'])
def test_unmarked_oracle_use_fails_and_required_judges_fail_instead_of_skipping(tmp_path, require):
    out, text = run_meta(tmp_path, require)
    unmarked = {'asks_for_the_oracle': 'ERROR', 'starts_the_real_triton': 'FAILED', 'through_a_module_fixture': 'ERROR',
                'compares_when_present': 'FAILED'}   # ERROR: in a fixture's setup
    assert {name: out.get(f'test_unmarked_{name}') for name in unmarked} == unmarked and out.get('test_no_judge') == 'PASSED', text
    assert text.count('has no `oracle` marker') >= 4, text
    if require:
        assert (out.get('test_marked'), out.get('test_wants_the_qa_corpus')) == ('ERROR', 'FAILED'), text
        assert 'real Triton 2.51 unavailable' in text and 'no corpus here (TRITON_MINI_REQUIRE names qa)' in text, text
    else:
        assert len(out.get('skipped', [])) == 2 and 'no corpus here' in text and 'real Triton 2.51 unavailable' in text, text


def test_an_unknown_required_judge_is_a_usage_error(tmp_path):
    (tmp_path / 'test_x.py').write_text('def test_x(): pass\n')
    for f in ('conftest.py', 'triton_servers.py'): shutil.copy(ts.TESTS / f, tmp_path / f)
    r = subprocess.run([sys.executable, '-m', 'pytest', '-q', '-p', 'no:cacheprovider', '-p', 'no:xdist', str(tmp_path)],
                       capture_output=True, text=True, timeout=120, cwd=tmp_path, env={**os.environ, ts.REQUIRE: 'oracle,browsr'})
    assert r.returncode == 4 and "unknown judge(s) ['browsr']" in r.stderr, (r.returncode, r.stdout, r.stderr)
