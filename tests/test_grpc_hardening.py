"""tritonserver's gRPC hardening, through `python -m triton_mini` as an operator runs it, compared with Triton 2.51.

- `--grpc-restricted-protocol`: which RPCs each protocol group covers, the status and text without the header, a
  wrong value, the stream; the flag's syntax errors (tritonserver's `Bad option` lines and exit code 1).
- TLS (`--grpc-use-ssl`, `--grpc-use-ssl-mutual`, certificates made here with `openssl`) with tritonclient's
  `ssl=True` options; a missing certificate file stops the start with a clear error.
- `grpc.health.v1.Health/Check`, `--grpc-header-forward-pattern` (what a model sees, compared with Triton), response
  compression, and error hygiene: an unexpected exception answers INTERNAL without naming it and is logged once.
"""
import asyncio, json, logging, re, shutil, subprocess, sys, textwrap, time
from pathlib import Path

import numpy as np
import pytest

grpc = pytest.importorskip('grpc')
grpcclient = pytest.importorskip('tritonclient.grpc')
from tritonclient.grpc import service_pb2 as pb
from tritonclient.utils import InferenceServerException

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from triton_servers import ORACLE, oracle_available, oracle_or_skip, MiniProcess, RealTriton, copy_models, free_port, wait_until  # noqa: E402

T = pb.ModelInferRequest.InferInputTensor
PARAMS_PY = '''
import json
import numpy as np
import triton_python_backend_utils as pb_utils
class TritonPythonModel:
    def execute(self, requests):
        return [pb_utils.InferenceResponse([pb_utils.Tensor("P", np.array([r.parameters().encode()], dtype=np.object_))]) for r in requests]
'''


@pytest.fixture(scope='module')
def repo(tmp_path_factory):
    root = copy_models(tmp_path_factory.mktemp('hardening') / 'models', 'conformance/identity_int32', 'conformance/add_sub')
    (root / 'params' / '1').mkdir(parents=True)
    (root / 'params' / 'config.pbtxt').write_text('name: "params"\nbackend: "python"\nmax_batch_size: 0\n'
                                                  'input [ { name: "X" data_type: TYPE_INT32 dims: [ 1 ] } ]\n'
                                                  'output [ { name: "P" data_type: TYPE_STRING dims: [ 1 ] } ]\n')
    (root / 'params' / '1' / 'model.py').write_text(PARAMS_PY)
    return root


class Mini(MiniProcess):
    "`python -m triton_mini` on free ports (HTTP and gRPC), up once it is live and gRPC has started."
    def __init__(self, repo, *flags):
        super().__init__(repo, *flags, metrics=False, wait='live')
        try: wait_until(lambda: 'Started GRPCInferenceService' in self.log(), 30, 'gRPC to start')
        except BaseException: self.stop(); raise


def both(repo, *flags):
    "Yield (name, server) for triton_mini and, when present, the real Triton, with the same repo and flags."
    servers = [('mini', lambda: Mini(repo, *flags))]
    if oracle_available(): servers.append(('triton', lambda: RealTriton(repo, *flags)))
    for name, start in servers:
        s = start()
        try: yield name, s
        finally: s.stop()


# ------------------------------------------------------------------------------------------------- restricted protocols

RESTRICT = ['--grpc-restricted-protocol=health,metadata:admin-key=secret', '--grpc-restricted-protocol=inference,model-repository:infer-key=abc',
            '--grpc-restricted-protocol=statistics,trace,logging,model-config,shared-memory:x=y', '--model-control-mode=explicit', '--load-model=*']
HEADERS = {'admin': ('triton-grpc-protocol-admin-key', 'secret'), 'infer': ('triton-grpc-protocol-infer-key', 'abc'), 'x': ('triton-grpc-protocol-x', 'y')}
GROUP_OF = {'ServerLive': 'admin', 'ServerReady': 'admin', 'ModelReady': 'admin', 'ServerMetadata': 'admin', 'ModelMetadata': 'admin',
            'ModelConfig': 'x', 'ModelStatistics': 'x', 'RepositoryIndex': 'infer', 'RepositoryModelLoad': 'infer', 'RepositoryModelUnload': 'infer',
            'SystemSharedMemoryStatus': 'x', 'SystemSharedMemoryUnregister': 'x', 'CudaSharedMemoryStatus': 'x', 'CudaSharedMemoryUnregister': 'x',
            'TraceSetting': 'x', 'LogSettings': 'x', 'ModelInfer': 'infer', 'ModelStreamInfer': 'infer', 'grpc.health.v1.Health/Check': 'admin'}
REQUESTS = {'ModelReady': pb.ModelReadyRequest(name='add_sub'), 'ModelMetadata': pb.ModelMetadataRequest(name='add_sub'),
            'ModelConfig': pb.ModelConfigRequest(name='add_sub'), 'ModelStatistics': pb.ModelStatisticsRequest(name='add_sub'),
            'RepositoryModelLoad': pb.RepositoryModelLoadRequest(model_name='add_sub'), 'RepositoryModelUnload': pb.RepositoryModelUnloadRequest(model_name='nope'),
            'ModelInfer': pb.ModelInferRequest(model_name='identity_int32', inputs=[T(name='X', datatype='INT32', shape=[1, 1])], raw_input_contents=[b'\0' * 4])}


def restriction_table(port) -> dict:
    "{rpc: (status without headers, status with the right header, status with a wrong value)} over a raw channel."
    out = {}
    with grpc.insecure_channel(f'127.0.0.1:{port}') as ch:
        for rpc, group in GROUP_OF.items():
            path = f'/{rpc}' if '/' in rpc else f'/inference.GRPCInferenceService/{rpc}'
            data = REQUESTS.get(rpc, pb.ModelInferRequest() if rpc == 'ModelStreamInfer' else b'')
            data = data if isinstance(data, bytes) else data.SerializeToString()
            def status(md):
                try:
                    if rpc == 'ModelStreamInfer':
                        f = ch.stream_stream(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)
                        list(f(iter([REQUESTS['ModelInfer'].SerializeToString()]), metadata=md, timeout=30))
                    else: ch.unary_unary(path, request_serializer=lambda b: b, response_deserializer=lambda b: b)(data, metadata=md, timeout=30)
                    return 'OK'
                except grpc.RpcError as e: return f'{e.code().name}: {e.details()}'
            header, value = HEADERS[group]
            out[rpc] = (status(None), status([(header, value)]), status([(header, value + 'x')]))
    return out


@pytest.mark.oracle
def test_restricted_protocols_as_triton(repo):
    tables = {name: restriction_table(s.grpc_port) for name, s in both(repo, *RESTRICT)}
    mini = tables['mini']
    for rpc, (without, right, wrong) in mini.items():
        header = HEADERS[GROUP_OF[rpc]][0]
        assert without == wrong == f"UNAVAILABLE: This protocol is restricted, expecting header '{header}'", rpc
        assert right == 'OK', (rpc, right)
    if 'triton' in tables: assert mini == tables['triton']


SYNTAX_ERRORS = [
    ('health,metadata,admin-key=secret', "--grpc-restricted-protocol option format is '<config name>:<setting>=<value>'. Got health,metadata,admin-key=secret"),
    ('health:k', "--grpc-restricted-protocol option format is '<config name>:<setting>=<value>'. Got health:k"),
    ('foo:k=v', "unknown restricted protocol 'foo' "),
    ('health,,metadata:k=v', "unknown restricted protocol '' ")]


@pytest.mark.parametrize('value, reason', SYNTAX_ERRORS)
def test_restricted_protocol_syntax_errors(repo, value, reason):
    p = subprocess.run([sys.executable, '-m', 'triton_mini', f'--model-repository={repo}', f'--grpc-restricted-protocol={value}'],
                       capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr.splitlines()[-2:]) == (1, ['Bad option: "--grpc-restricted-protocol".', reason])
    assert 'loaded' not in p.stderr                                  # refused before any model loads


@pytest.mark.oracle
@pytest.mark.parametrize('value, reason', SYNTAX_ERRORS)
def test_restricted_protocol_syntax_errors_as_triton(repo, value, reason):
    "The reasons above are Triton's: the real tritonserver prints the same two lines and exits 1."
    oracle_or_skip()
    t = subprocess.run([ORACLE, f'--model-repository={repo}', f'--grpc-restricted-protocol={value}'], capture_output=True, text=True,
                       timeout=120, cwd=repo.parent)
    lines = (t.stdout + t.stderr).splitlines()
    i = lines.index('Bad option: "--grpc-restricted-protocol".')
    assert (t.returncode, lines[i:i + 2]) == (1, ['Bad option: "--grpc-restricted-protocol".', reason])


def test_a_group_in_two_flags_is_refused(repo):
    p = subprocess.run([sys.executable, '-m', 'triton_mini', f'--model-repository={repo}', '--grpc-restricted-protocol=health:a=b',
                        '--grpc-restricted-protocol=health,logging:c=d'], capture_output=True, text=True, timeout=60)
    assert (p.returncode, p.stderr.splitlines()[-1]) == (1, "restricted protocol 'health' can not be specified in multiple config groups")


# ------------------------------------------------------------------------------------------------- TLS

@pytest.fixture(scope='module')
def certs(tmp_path_factory):
    if shutil.which('openssl') is None: pytest.skip('openssl not found')
    d = tmp_path_factory.mktemp('certs')
    run = lambda *a: subprocess.run(['openssl', *a], cwd=d, check=True, capture_output=True)
    run('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=test-ca')
    (d / 'san.ext').write_text('subjectAltName=DNS:localhost,IP:127.0.0.1\n')
    for n in ('server', 'client'):
        run('req', '-newkey', 'rsa:2048', '-nodes', '-keyout', f'{n}.key', '-out', f'{n}.csr', '-subj', '/CN=localhost')
        run('x509', '-req', '-in', f'{n}.csr', '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-out', f'{n}.crt', '-days', '2', '-extfile', 'san.ext')
    return d


def live(port, **ssl) -> object:
    "True if a tritonclient with these TLS options reaches the server, else the status it got."
    try:
        with grpcclient.InferenceServerClient(f'localhost:{port}', **ssl) as c: return c.is_server_live(client_timeout=10)
    except InferenceServerException as e: return e.status()


@pytest.mark.parametrize('transport', ['grpcio', 'h2'])
@pytest.mark.parametrize('mutual', [False, True])
def test_tls(repo, certs, mutual, transport):
    flags = [f'--grpc-transport={transport}', '--grpc-use-ssl=true', f'--grpc-server-cert={certs}/server.crt', f'--grpc-server-key={certs}/server.key', f'--grpc-root-cert={certs}/ca.crt']
    s = Mini(repo, *flags, *(['--grpc-use-ssl-mutual=true'] if mutual else []))
    try:
        ca = dict(ssl=True, root_certificates=str(certs / 'ca.crt'))
        client_cert = dict(ca, private_key=str(certs / 'client.key'), certificate_chain=str(certs / 'client.crt'))
        assert live(s.grpc_port) == 'StatusCode.UNAVAILABLE'                     # plaintext is refused
        assert live(s.grpc_port, ssl=True) == 'StatusCode.UNAVAILABLE'           # a client that does not trust the CA
        assert live(s.grpc_port, **ca) == (not mutual or 'StatusCode.UNAVAILABLE')
        assert live(s.grpc_port, **client_cert) is True
        with grpcclient.InferenceServerClient(f'localhost:{s.grpc_port}', **client_cert) as c:
            x = grpcclient.InferInput('X', [1, 2], 'INT32'); x.set_data_from_numpy(np.array([[1, 2]], np.int32))
            assert c.infer('identity_int32', [x]).as_numpy('Y').tolist() == [[1, 2]]
    finally: s.stop()


def test_tls_without_its_files_does_not_start(repo, tmp_path):
    p = subprocess.run([sys.executable, '-m', 'triton_mini', f'--model-repository={repo}', f'--http-port={free_port()}', f'--grpc-port={free_port()}',
                        '--allow-metrics=false', '--grpc-use-ssl=true', f'--grpc-server-cert={tmp_path}/nope.crt', f'--grpc-server-key={tmp_path}/nope.key'],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 1
    assert f"failed to start GRPCInferenceService: failed to read --grpc-server-key '{tmp_path}/nope.key': No such file or directory" in p.stderr


# ------------------------------------------------------------------------------------------------- health, header forwarding, compression

def health_check(port) -> bytes:
    with grpc.insecure_channel(f'127.0.0.1:{port}') as ch:
        return ch.unary_unary('/grpc.health.v1.Health/Check', request_serializer=lambda b: b, response_deserializer=lambda b: b)(b'', timeout=30)


def test_grpc_health_service(repo, tmp_path):
    s = Mini(repo)
    try: assert health_check(s.grpc_port) == b'\x08\x01'                          # SERVING
    finally: s.stop()
    broken = tmp_path / 'models'
    shutil.copytree(repo, broken)
    (broken / 'add_sub' / 'config.pbtxt').write_text('name: "add_sub"\nbackend: "python"\ninput [ { name: "I" data_type: TYPE_FP32 } ]\n')
    s = Mini(broken, '--exit-on-error=false')
    try: assert health_check(s.grpc_port) == b'\x08\x02'                          # NOT_SERVING: not ready (strict readiness)
    finally: s.stop()


@pytest.mark.oracle
def test_header_forward_pattern_as_triton(repo):
    seen = {}
    for name, s in both(repo, '--grpc-header-forward-pattern=^X-Fwd'):   # matched case-insensitively
        with grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}') as c:
            x = grpcclient.InferInput('X', [1], 'INT32'); x.set_data_from_numpy(np.array([1], np.int32))
            r = c.infer('params', [x], headers={'x-fwd-user': 'ada', 'x-fwd-team': 'ops', 'x-other': 'no', 'my-x-fwd': 'no'}, parameters={'p': 1})
            seen[name] = json.loads(r.as_numpy('P')[0])
    assert seen['mini'] == {'p': 1, 'x-fwd-user': 'ada', 'x-fwd-team': 'ops'}
    if 'triton' in seen: assert seen['mini'] == seen['triton']


def test_compressed_responses(repo):
    s = Mini(repo, '--grpc-infer-response-compression-level=high')
    try:
        with grpcclient.InferenceServerClient(f'127.0.0.1:{s.grpc_port}') as c:
            x = grpcclient.InferInput('X', [1, 3], 'INT32'); x.set_data_from_numpy(np.array([[1, 2, 3]], np.int32))
            assert c.infer('identity_int32', [x]).as_numpy('Y').tolist() == [[1, 2, 3]]
    finally: s.stop()


# ------------------------------------------------------------------------------------------------- error hygiene, in process

class Aborted(Exception): pass

class Context:
    def invocation_metadata(self): return ()
    def set_compression(self, c): pass
    async def abort(self, code, details): raise Aborted(code.name, details)


def test_an_unexpected_exception_is_internal_unnamed_and_logged_once(repo, caplog, monkeypatch):
    from triton_mini.server import TritonServer
    from triton_mini.grpc_server import GRPCFrontend, INTERNAL_MESSAGE
    server = TritonServer(repo)
    frontend = GRPCFrontend(server)
    monkeypatch.setattr(server, 'model_metadata', lambda *a: (_ for _ in ()).throw(ValueError('secret path /srv/models')))
    async def many():
        out = []
        for _ in range(50):
            try: await frontend.ModelMetadata(pb.ModelMetadataRequest(name='add_sub'), Context())
            except Aborted as e: out.append(e.args)
        return out
    with caplog.at_level(logging.ERROR, logger='triton_mini.grpc_server'):
        answers = asyncio.run(many())
    assert set(answers) == {('INTERNAL', INTERNAL_MESSAGE)}
    records = [r for r in caplog.records if r.name == 'triton_mini.grpc_server']
    assert len(records) == 1 and records[0].exc_info is not None and 'ValueError' in records[0].getMessage()


def test_an_unexpected_exception_in_a_stream_answers_its_request_and_the_stream_ends(repo, monkeypatch):
    import triton_mini.grpc_server as g
    server = g.TritonServer(repo)
    assert server.start() == {}
    try:
        frontend = g.GRPCFrontend(server)
        def broken(*a, **kw): raise KeyError('x')
        monkeypatch.setattr(g, 'decode_infer_request', broken)
        async def run():
            async def requests():
                yield REQUESTS['ModelInfer']
            return [m async for m in frontend.ModelStreamInfer(requests(), Context())]
        messages = asyncio.run(asyncio.wait_for(run(), 30))
        assert [m.error_message for m in messages] == [g.INTERNAL_MESSAGE]
    finally: server.stop()
