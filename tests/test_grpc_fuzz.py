"""A seeded fuzz suite for the gRPC frontend, against `python -m triton_mini` in a subprocess.

Every case is one gRPC call on a raw channel: bytes that are not a protobuf message, mutated valid messages,
ModelInferRequests with random models, names, datatypes, shapes (huge, negative, 200 dims), raw and typed
contents and parameters, other RPCs with random fields, and streams mixing all of these. Each must be answered,
within a deadline, with a status that is not UNKNOWN and details that name no Python exception (an error raised
*by a model* is reported as Triton reports it, "Failed to process the request(s) ... ValueError: ...", and that is
allowed). At the end the server is still ready, still answers a real inference, and its RSS has not grown.

The corpus in tests/grpc_fuzz_corpus/ (`<name>.<Method>.bin`: the request bytes) is replayed first: the requests
that once found a bug. In CI 2,000 cases run (a few seconds) (FUZZ_CASES, FUZZ_SEED override); for a long run:

    python tests/test_grpc_fuzz.py --cases 100000 --seed 7     # failures are written to the corpus folder
"""
import os, random, re, struct, sys, time
from pathlib import Path

import pytest

grpc = pytest.importorskip('grpc')
psutil = pytest.importorskip('psutil')
from tritonclient.grpc import service_pb2 as pb

HERE = Path(__file__).parent
CORPUS = HERE / 'grpc_fuzz_corpus'
sys.path.insert(0, str(HERE))
from triton_servers import MiniProcess, copy_models  # noqa: E402

T, C, P = pb.ModelInferRequest.InferInputTensor, pb.InferTensorContents, pb.InferParameter
MODELS = {   # the conformance models the fuzzer aims at: name -> [(input, datatype)]
    'add_sub': [('INPUT0', 'FP32'), ('INPUT1', 'FP32')], 'add_sub_nobatch': [('INPUT0', 'FP32'), ('INPUT1', 'FP32')],
    'identity_bytes': [('IN', 'BYTES')], 'identity_int32': [('X', 'INT32')], 'classify': [('SCORES_IN', 'FP32')],
    'ens': [('X', 'FP32')], 'versioned': [('X', 'INT32')],
    'typed': [(d, 'BYTES' if d == 'STRING' else d) for d in ('BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16',
                                                               'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'STRING')]}
DATATYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'BF16', 'BYTES']
SIZES = {'BOOL': 1, 'UINT8': 1, 'INT8': 1, 'UINT16': 2, 'INT16': 2, 'FP16': 2, 'BF16': 2, 'UINT32': 4, 'INT32': 4, 'FP32': 4,
         'UINT64': 8, 'INT64': 8, 'FP64': 8}
UNARY = [m.name for m in pb.DESCRIPTOR.services_by_name['GRPCInferenceService'].methods if not m.client_streaming]
EXCEPTION_NAME = re.compile(r'\b[A-Z]\w*(Error|Exception|Exit|Interrupt)\b|Traceback|<class ')
MODEL_FAILURE = 'Failed to process the request(s) for model'
DISCONNECTED = re.compile(r'Socket closed|failed to connect|Connection reset|GOAWAY')   # the server went away


# ------------------------------------------------------------------------------------------------- case generation

def _bytes(rng, n: int) -> bytes: return rng.getrandbits(8 * n).to_bytes(n, 'little') if n else b''


def _shape(rng, good):
    return rng.choice([good, good, [rng.randint(-3, 9) for _ in range(rng.randint(0, 4))], [1, 600_000_000], [600_000_000],
                       [1, 2**40, 2**40], [1, 2**62], [2**62, 4], [0, 2**62], [1] * rng.choice([65, 200]), [],
                       [rng.randint(0, 2**63 - 1)], [-1] + good[1:], [rng.randint(-2**63, -1)]])


def _raw(rng, datatype, shape):
    n = 1
    for d in shape: n *= max(d, 0)
    if datatype == 'BYTES' and rng.random() < 0.6 and n <= 16:
        return b''.join(struct.pack('<I', len(b)) + b for b in (_bytes(rng, rng.randint(0, 6)) for _ in range(n)))
    exact = SIZES.get(datatype, 1) * n
    if rng.random() < 0.5 and exact <= 4096: return _bytes(rng, exact)
    return rng.choice([b'', b'\x01\x00\x00\x00x', b'\xff\xff\xff\x7f', _bytes(rng, rng.randint(0, 64))])


def _contents(rng, datatype):
    c = C()
    field = rng.choice(['bool_contents', 'int_contents', 'int64_contents', 'uint_contents', 'uint64_contents',
                        'fp32_contents', 'fp64_contents', 'bytes_contents'])
    n = rng.randint(0, 6)
    values = {'bool_contents': lambda: rng.random() < 0.5, 'int_contents': lambda: rng.randint(-2**31, 2**31 - 1),
              'int64_contents': lambda: rng.randint(-2**63, 2**63 - 1), 'uint_contents': lambda: rng.randint(0, 2**32 - 1),
              'uint64_contents': lambda: rng.randint(0, 2**64 - 1), 'fp32_contents': lambda: rng.uniform(-1e6, 1e6),
              'fp64_contents': lambda: rng.choice([rng.random(), float('nan'), float('inf')]),
              'bytes_contents': lambda: _bytes(rng, rng.randint(0, 5))}[field]
    getattr(c, field).extend(values() for _ in range(n))
    if rng.random() < 0.1: c.fp32_contents.append(1.0)      # two fields at once
    return c


def _parameter(rng, p):
    kind = rng.choice(['bool_param', 'int64_param', 'string_param', 'double_param', 'uint64_param'])
    value = {'bool_param': rng.random() < 0.5, 'int64_param': rng.randint(-2**63, 2**63 - 1), 'string_param': rng.choice(['', 'x', '\u2603']),
             'double_param': rng.uniform(-10, 10), 'uint64_param': rng.randint(0, 2**64 - 1)}[kind]
    setattr(p, kind, value)


def infer_request(rng) -> pb.ModelInferRequest:
    "A random ModelInferRequest: mostly close to valid, often broken in one or several ways."
    model = rng.choice(list(MODELS) + ['nope', '', 'x' * 300])
    spec = MODELS.get(model, [('X', 'INT32')])
    r = pb.ModelInferRequest(model_name=model, id=rng.choice(['', 'r1', '\u00e9\u2603', 'x' * 100]),
                             model_version=rng.choice(['', '', '1', '3', '-1', 'x', '99999999999999999999', ' 2', '0']))
    batching = model not in ('add_sub_nobatch', 'identity_bytes', 'typed', 'versioned')
    width = {'add_sub': 4, 'add_sub_nobatch': 4, 'classify': 5, 'ens': 2}.get(model, 1)
    chosen = rng.sample(spec, k=min(len(spec), rng.randint(0, 3))) + ([('EXTRA', 'FP32')] if rng.random() < 0.1 else [])
    typed = rng.random() < 0.3
    for name, datatype in chosen:
        datatype = datatype if rng.random() < 0.8 else rng.choice(DATATYPES + ['FOO', '', 'fp32'])
        good = ([rng.randint(1, 3)] if batching else []) + [width if width > 1 else rng.randint(0, 4)]
        t = r.inputs.add(name=name if rng.random() < 0.95 else rng.choice(['', 'x', name]), datatype=datatype, shape=_shape(rng, good))
        if typed: t.contents.CopyFrom(_contents(rng, datatype))
        else: r.raw_input_contents.append(_raw(rng, datatype, list(t.shape)))
        if rng.random() < 0.05: t.parameters['shared_memory_region'].string_param = 'r'
        if rng.random() < 0.05: _parameter(rng, t.parameters['binary_data_size'])
    if rng.random() < 0.1: r.raw_input_contents.append(_bytes(rng, 8))     # one buffer too many
    for _ in range(rng.choice([0, 0, 0, 1, 2])):
        _parameter(rng, r.parameters[rng.choice(['sequence_id', 'sequence_start', 'priority', 'timeout', 'triton_x',
                                                 'triton_enable_empty_final_response', 'user', 'binary_data_output'])])
    for _ in range(rng.choice([0, 0, 1, 2])):
        o = r.outputs.add(name=rng.choice(['OUTPUT0', 'SCORES', 'OUT', 'Y', 'nope', '']))
        if rng.random() < 0.4: _parameter(rng, o.parameters['classification'])
    return r


def stream_requests(rng) -> list:
    "Serialized messages of one stream: inference requests (decoupled ones too), sometimes bytes that do not parse."
    out = []
    for _ in range(rng.randint(0, 4)):
        x = rng.random()
        if x < 0.15: out.append(_bytes(rng, rng.randint(1, 40)))
        elif x < 0.4:
            r = pb.ModelInferRequest(model_name='decoupled', id=f's{len(out)}')
            r.inputs.add(name='text_input', datatype='BYTES', shape=[1], contents=C(bytes_contents=[b'hi']))
            if rng.random() < 0.5: r.inputs.add(name='N', datatype='INT32', shape=[1], contents=C(int_contents=[rng.randint(-2, 4)]))
            if rng.random() < 0.3: r.parameters[rng.choice(['fail_at', 'raise_at'])].int64_param = rng.randint(0, 3)
            if rng.random() < 0.3: r.parameters['triton_enable_empty_final_response'].bool_param = True
            out.append(r.SerializeToString())
        else: out.append(infer_request(rng).SerializeToString())
    return out


def other_request(rng, method) -> bytes:
    "A random request for a unary RPC other than ModelInfer (random names, versions, settings)."
    cls = getattr(pb, pb.DESCRIPTOR.services_by_name['GRPCInferenceService'].methods_by_name[method].input_type.name)
    msg = cls()
    for f in cls.DESCRIPTOR.fields:
        if rng.random() < 0.5: continue
        current = getattr(msg, f.name)
        if isinstance(current, bool): setattr(msg, f.name, True)
        elif isinstance(current, str): setattr(msg, f.name, rng.choice(['', 'add_sub', 'nope', '../x', '1', '-1', 'x' * 200]))
        elif isinstance(current, int): setattr(msg, f.name, rng.randint(0, 2**63 - 1))
    data = msg.SerializeToString()
    if method == 'LogSettings' and rng.random() < 0.5:
        s = pb.LogSettingsRequest()
        key = rng.choice(['log_info', 'log_verbose_level', 'log_format', 'log_file', 'x'])
        kind, value = rng.choice([('bool_param', True), ('uint32_param', 3), ('string_param', 'x'), ('string_param', 'ISO8601')])
        setattr(s.settings[key], kind, value)
        data = s.SerializeToString()
    return data


def mutate(rng, data: bytes) -> bytes:
    "Flip, cut or splice bytes of a valid message."
    b = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.random()
        if op < 0.4 and b: b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif op < 0.7 and b: del b[rng.randrange(len(b)):]
        else: b[rng.randrange(len(b) + 1):0] = _bytes(rng, rng.randint(1, 6))
    return bytes(b)


def random_case(rng) -> tuple:
    "(method, request bytes or list of them for a stream)."
    x = rng.random()
    if x < 0.45: return 'ModelInfer', infer_request(rng).SerializeToString()
    if x < 0.6: return 'ModelInfer', mutate(rng, infer_request(rng).SerializeToString())
    if x < 0.72: return 'ModelStreamInfer', stream_requests(rng)
    if x < 0.8: return rng.choice(UNARY), _bytes(rng, rng.randint(0, 80))
    method = rng.choice([m for m in UNARY if m not in ('ModelInfer', 'RepositoryModelLoad', 'RepositoryModelUnload')])
    data = other_request(rng, method)
    return method, (mutate(rng, data) if rng.random() < 0.3 else data)


# ------------------------------------------------------------------------------------------------- the server and a call

class Server(MiniProcess):
    "`python -m triton_mini` on a copy of the conformance models, gRPC on a free port, with a raw channel to it."
    def __init__(self, root: Path):
        super().__init__(copy_models(root / 'models', 'conformance'), '--exit-timeout-secs=5', metrics=False)
        opts = [('grpc.max_receive_message_length', -1), ('grpc.max_send_message_length', -1)]
        self.channel = grpc.insecure_channel(f'127.0.0.1:{self.grpc_port}', options=opts)
        try: grpc.channel_ready_future(self.channel).result(timeout=60)
        except BaseException: self.stop(); raise

    def rss_mb(self) -> float: return self.rss() / 2**20

    def stop(self, *args, **kw):
        if getattr(self, 'channel', None) is not None: self.channel.close()
        return super().stop(*args, **kw)


def call(channel, method: str, data, timeout: float = 20) -> list:
    "Send one case; [(status name, details)] for the call and, for a stream, each error message it carried."
    ident = lambda b: b
    path = f'/inference.GRPCInferenceService/{method}'
    try:
        if method == 'ModelStreamInfer':
            stream = channel.stream_stream(path, request_serializer=ident, response_deserializer=pb.ModelStreamInferResponse.FromString)
            return [('OK', m.error_message) for m in stream(iter(data), timeout=timeout)] or [('OK', '')]
        channel.unary_unary(path, request_serializer=ident, response_deserializer=ident)(data, timeout=timeout)
        return [('OK', '')]
    except grpc.RpcError as e: return [(e.code().name, e.details() or '')]


def problems(answers: list) -> list:
    "What is wrong with the answers to one case (empty: nothing)."
    out = []
    for status, details in answers:
        if status in ('UNKNOWN', 'DEADLINE_EXCEEDED') or (status == 'UNAVAILABLE' and DISCONNECTED.search(details)):
            out.append(f'status {status}: {details[:200]}')
        elif EXCEPTION_NAME.search(details) and not details.startswith(MODEL_FAILURE):
            out.append(f'an exception name in {status}: {details[:200]}')
    return out


def corpus_cases() -> list:
    "The saved cases: (name, method, data); a stream's messages are stored length-prefixed."
    cases = []
    for f in sorted(CORPUS.glob('*.bin')):
        name, method = f.stem.rsplit('.', 1)
        data = f.read_bytes()
        if method == 'ModelStreamInfer':
            msgs, pos = [], 0
            while pos < len(data):
                n = struct.unpack_from('<I', data, pos)[0]; msgs.append(data[pos + 4:pos + 4 + n]); pos += 4 + n
            data = msgs
        cases.append((name, method, data))
    return cases


def save_case(name: str, method: str, data):
    CORPUS.mkdir(exist_ok=True)
    blob = b''.join(struct.pack('<I', len(m)) + m for m in data) if method == 'ModelStreamInfer' else data
    (CORPUS / f'{name}.{method}.bin').write_bytes(blob)


def run(server: Server, cases: int, seed: int, save: bool = False) -> list:
    "Replay the corpus, then `cases` random cases; returns the failures."
    failures = []
    def check(label, method, data):
        found = problems(call(server.channel, method, data))
        if found:
            failures.append((label, method, found))
            if save: save_case(f'found_{label}', method, data)
    for name, method, data in corpus_cases(): check(name, method, data)
    rng = random.Random(seed)
    for i in range(cases):
        method, data = random_case(rng)
        check(f'seed{seed}_case{i}', method, data)
    return failures


# ------------------------------------------------------------------------------------------------- the test

@pytest.fixture(scope='module')
def server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp('grpc_fuzz'))
    yield s
    s.stop()


def test_corpus_is_there():
    names = {name for name, _, _ in corpus_cases()}
    assert {'declared_bytes_1x6e8', 'shape_overflow_2e40x2e40', 'dims_200', 'not_protobuf', 'stream_garbage_between'} <= names


def test_seeded_fuzz(server):
    n, seed = int(os.environ.get('FUZZ_CASES', 2000)), int(os.environ.get('FUZZ_SEED', 18))
    warm = random.Random(0)
    for _ in range(30): call(server.channel, 'ModelInfer', infer_request(warm).SerializeToString())
    before = server.rss_mb()
    failures = run(server, n, seed)
    assert not failures, f'{len(failures)} cases failed (FUZZ_SEED={seed}), first: {failures[:5]}'
    assert server.proc.poll() is None
    assert server.rss_mb() - before < 100, f'RSS grew from {before:.0f} MB to {server.rss_mb():.0f} MB'
    assert call(server.channel, 'ServerReady', b'') == [('OK', '')]
    ok = pb.ModelInferRequest(model_name='identity_int32', inputs=[T(name='X', datatype='INT32', shape=[1, 2])], raw_input_contents=[b'\x01\0\0\0\x02\0\0\0'])
    infer = server.channel.unary_unary('/inference.GRPCInferenceService/ModelInfer', request_serializer=lambda b: b,
                                        response_deserializer=pb.ModelInferResponse.FromString)
    reply = infer(ok.SerializeToString(), timeout=20)
    assert (reply.outputs[0].name, reply.raw_output_contents[0]) == ('Y', b'\x01\0\0\0\x02\0\0\0')


if __name__ == '__main__':
    import argparse, tempfile
    a = argparse.ArgumentParser(description='A long gRPC fuzz run; failing cases are saved to tests/grpc_fuzz_corpus/.')
    a.add_argument('--cases', type=int, default=100_000)
    a.add_argument('--seed', type=int, default=int(time.time()))
    args = a.parse_args()
    s = Server(Path(tempfile.mkdtemp()))
    try:
        t0, rss0 = time.monotonic(), s.rss_mb()
        failures = run(s, args.cases, args.seed, save=True)
        print(f'{args.cases} cases, seed {args.seed}: {len(failures)} failures, {time.monotonic() - t0:.0f} s, '
              f'RSS {rss0:.0f} -> {s.rss_mb():.0f} MB')
        for f in failures[:20]: print(f)
    finally: s.stop()
