"""The test machinery itself (tests/triton_servers.py, tests/conftest.py): if one of these breaks, other tests fail
for reasons that have nothing to do with triton_mini (a busy port, a stray Triton stub, a model folder not found)."""
import os, socket

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
    assert triton.stop() is not None
    with pytest.raises(ProcessLookupError): os.killpg(group, 0)                    # stubs included


def test_a_launcher_stops_what_it_started(tmp_path):
    launcher = ts.Launcher()
    repo = ts.copy_models(tmp_path / 'models', 'conformance/add_sub')
    process, inproc = launcher.mini_process(repo, grpc=False), launcher.mini(repo, metrics=False)
    launcher.close()
    assert process.proc.poll() is not None and inproc.server is None
    with pytest.raises(ProcessLookupError): os.killpg(process.proc.pid, 0)
