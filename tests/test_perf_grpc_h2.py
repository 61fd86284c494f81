"""perf's synchronous gRPC client on its own HTTP/2 connection (issue 46): against triton-mini's gRPC server and the
real Triton 2.51 (oracle) it echoes a large tensor both ways (flow control past 64 KB) and fails an unknown model with
grpcio's very message; against broken servers (one that hangs up, a huge header block, garbage, silence) it fails
with PerfError, never hangs."""
import os, shutil, socket, subprocess, sys, threading

import numpy as np
import pytest
from tritonclient.grpc import service_pb2

from triton_servers import ROOT
from triton_mini.perf import GrpcH2, PerfError, grpc_caller, grpc_h2_caller, grpc_request, h2_frame, H2_SETTINGS, H2_HEADERS, H2_CONTINUATION

BIG = np.arange(100_000, dtype=np.float32).reshape(1, -1)       # 400 KB each way: past HTTP/2's default 64 KB windows


def echo_repo(tmp_path):
    "bench/repo's identity_big (FP32 [1,N] echoed, any N), its model file copied, not linked."
    shutil.copytree(ROOT / 'bench' / 'repo' / 'identity_big', tmp_path / 'repo' / 'identity_big', symlinks=False)
    return tmp_path / 'repo'


def check_server(port:int):
    "The h2 caller echoes BIG exactly, several calls on one connection, and fails an unknown model as grpcio's caller does."
    url = f'localhost:{port}'
    call, big = grpc_h2_caller(url), grpc_request('identity_big', '', {'INPUT0': BIG})
    for _ in range(3):
        t0, t1, t2, t3, n = call(big)
        assert t0 <= t1 <= t2 <= t3 and n == 1
    conn = GrpcH2(url)                                           # the caller parses the answer but keeps it: check it here
    conn.send(b'\x00' + len(big).to_bytes(4, 'big') + big)
    out = service_pb2.ModelInferResponse.FromString(conn.receive())
    assert np.array_equal(np.frombuffer(out.raw_output_contents[0], np.float32), BIG.ravel())
    conn.close()
    unknown = grpc_request('no_such_model', '', {'INPUT0': BIG[:, :4]})
    with pytest.raises(PerfError) as h2_error: call(unknown)
    with pytest.raises(PerfError) as grpcio_error: grpc_caller(url)(unknown)
    assert str(h2_error.value) == str(grpcio_error.value) and 'no_such_model' in str(h2_error.value)
    assert call(big)[-1] == 1                                    # the next call, on a new connection, succeeds


def test_h2_caller_against_triton_mini(launch_module, tmp_path):
    check_server(launch_module.mini_process(echo_repo(tmp_path)).grpc_port)


@pytest.mark.oracle
def test_h2_caller_against_real_triton(real_triton, tmp_path):
    check_server(real_triton(echo_repo(tmp_path)).grpc_port)


def perf_cmd(port, env_value, *flags):
    env = {**os.environ, 'TRITON_MINI_PERF_GRPC': env_value}
    return subprocess.run([sys.executable, '-m', 'triton_mini', 'perf', '-m', 'identity_big', '-i', 'grpc', '-u', f'localhost:{port}',
                           '--shape', 'INPUT0:4', '-p', '300', '-s', '50', '--max-trials', '3', *flags],
                          capture_output=True, text=True, timeout=120, env=env)


def test_perf_with_either_grpc_client(launch_module, tmp_path):
    "TRITON_MINI_PERF_GRPC picks the client: both measure; anything else is one line and exit code 1."
    port = launch_module.mini_process(echo_repo(tmp_path)).grpc_port
    for client in ('h2', 'grpcio'):
        r = perf_cmd(port, client)
        assert r.returncode == 0 and 'Avg gRPC time' in r.stdout, r.stderr
    r = perf_cmd(port, 'grcpio')
    assert (r.returncode, r.stderr.strip()) == (1, "error: TRITON_MINI_PERF_GRPC must be h2 or grpcio, not 'grcpio'")


def broken_server(*replies:bytes, hang_up=True) -> str:
    "One connection: after each read of the client's bytes the next reply; then (hang_up) it closes its side."
    srv = socket.create_server(('127.0.0.1', 0))
    def serve():
        conn, _ = srv.accept(); srv.close()
        for reply in replies:
            if not conn.recv(1 << 20): break
            conn.sendall(reply)
        try:   # the client may have closed first (ENOTCONN), which is what some tests provoke
            if hang_up: conn.shutdown(socket.SHUT_WR)
            while conn.recv(1 << 20): pass
        except OSError: pass
        conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return f'127.0.0.1:{srv.getsockname()[1]}'


SETTINGS = h2_frame(H2_SETTINGS, 0, 0)

@pytest.mark.parametrize('replies, message', [
    ((SETTINGS,), 'the server closed the connection'),
    ((b'',), 'the server closed the connection'),                                          # before its SETTINGS
    ((b'HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n',), 'did not answer in HTTP/2: is it a gRPC port?'),
    ((b'\x00\x00\x05\x00\x00\x00\x00\x00\x01hello',), 'did not answer in HTTP/2'),            # DATA before SETTINGS
    ((SETTINGS + b'\x7f' * 9,), 'a frame of 8355711 bytes'),
    ((SETTINGS + h2_frame(H2_HEADERS, 0, 1, b'\x88') + h2_frame(H2_CONTINUATION, 0, 1, bytes(16000)) * 8,), 'header block of more than 65536'),
    ((SETTINGS + h2_frame(H2_HEADERS, 0x4, 1, b'\x88\xff\xff\xff\xff\x0f'),), 'header block that does not decode'),
])
def test_broken_servers_give_perf_error(replies, message):
    with pytest.raises(PerfError, match=message.replace('?', r'\?')):
        grpc_h2_caller(broken_server(*replies), timeout=30)(b'request')


def test_a_silent_server_times_out():
    with pytest.raises(PerfError, match='the server sent nothing for 0.3 s'):
        grpc_h2_caller(broken_server(SETTINGS, hang_up=False), timeout=0.3)(b'request')
