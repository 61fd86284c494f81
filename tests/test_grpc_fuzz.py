"""A seeded fuzz suite for the gRPC frontend, against `python -m triton_mini` in a subprocess.

Every case is one gRPC call on a raw channel: bytes that are not a protobuf message, mutated valid messages,
ModelInferRequests with random models, names, datatypes, shapes (huge, negative, 200 dims), raw and typed
contents and parameters, other RPCs with random fields, and streams mixing all of these. Each must be answered,
within a deadline, with a status that is not UNKNOWN and details that name no Python exception (an error raised
*by a model* is reported as Triton reports it, "Failed to process the request(s) ... ValueError: ...", and that is
allowed). At the end the server is still ready, still answers a real inference, and its RSS has not grown.

Issue 26's heavy shapes are a seeded stream of their own (`heavy_case`, so the cases of every seed above stay as
they were), against a server in explicit mode with two sequence models: BYTES tensors of many small elements (raw and
typed, sometimes cut or mis-shaped), correlation ids out of range or of the wrong type or over-long strings, thousands
of parameters or megabyte ones, deeply nested or huge load configs and deep `file:` keys, and streams cancelled while
their sequence STARTs still wait in the backlog. Meanwhile ServerLive is polled: the slowest answer is reported. In CI
20 small ones run (fast) and 150 with up to 1M-element tensors (slow); `--heavy N` on the command line.

The corpus in tests/grpc_fuzz_corpus/ (`<name>.<Method>.bin`: the request bytes) is replayed first: the requests
that once found a bug. In CI 2,000 cases run (a few seconds) (FUZZ_CASES, FUZZ_SEED override); for a long run:

    python tests/test_grpc_fuzz.py --cases 100000 --seed 7     # failures are written to the corpus folder
    python tests/test_grpc_fuzz.py --cases 0 --heavy 500 --seed 1  # only issue 26's heavy shapes
"""
import os, random, re, shutil, struct, sys, threading, time
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
UNEXPECTED = 'internal error: the request could not be processed'   # the rpc wrapper's answer to an exception it did not expect
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


# ------------------------------------------------------------------------------------------------- issue 26's heavy shapes

SEQ_MODELS = ('seq_state', 'seq_string')     # tests/models/sequence, one INT32 input IN [1]; max_batch_size 2 (two slots)


class CancelledStream(list):
    "The messages of a stream that the client cancels `after` seconds after it starts (some may still be queued)."
    def __init__(self, msgs, after:float=0.0): super().__init__(msgs); self.after = after


def _strings(rng, n: int) -> list:
    "n short byte strings, cheap to make: all equal, or of lengths 0..12 in turn."
    if rng.random() < 0.5: return [b'abcdefgh'] * n
    return [b'abcdefghijkl'[:i % 13] for i in range(n)]


def _seq_request(model, sid_kind, sid, start=True, end=True) -> pb.ModelInferRequest:
    r = pb.ModelInferRequest(model_name=model, inputs=[T(name='IN', datatype='INT32', shape=[1, 1])], raw_input_contents=[b'\x01\0\0\0'])
    setattr(r.parameters['sequence_id'], sid_kind, sid)
    r.parameters['sequence_start'].bool_param, r.parameters['sequence_end'].bool_param = start, end
    return r


def _add_sub() -> pb.ModelInferRequest:
    raw = struct.pack('<4f', 1, 2, 3, 4)
    return pb.ModelInferRequest(model_name='add_sub', inputs=[T(name=n, datatype='FP32', shape=[1, 4]) for n in ('INPUT0', 'INPUT1')],
                                raw_input_contents=[raw, raw])


def _many_bytes(rng, n: int) -> pb.ModelInferRequest:
    "identity_bytes with n small elements, raw or typed; sometimes the last element cut or the shape off by one."
    items = _strings(rng, n)
    r = pb.ModelInferRequest(model_name='identity_bytes')
    t = r.inputs.add(name='IN', datatype='BYTES', shape=[n] if rng.random() < 0.8 else rng.choice([[n + 1], [n - 1], [1, n]]))
    if rng.random() < 0.4: t.contents.bytes_contents.extend(items)
    else:
        raw = b''.join(struct.pack('<I', len(x)) + x for x in items)
        r.raw_input_contents.append(raw[:-rng.randint(1, 3)] if rng.random() < 0.2 else raw)
    return r


def _bad_id(rng) -> pb.ModelInferRequest:
    "A sequence (or add_sub) request whose correlation id is out of range, of the wrong type, or a long string."
    kind, value = rng.choice([('int64_param', -1), ('int64_param', -2**63), ('int64_param', 2**31), ('int64_param', 2**31 - 1),
                              ('uint64_param', 2**63), ('uint64_param', 2**64 - 1), ('uint64_param', 2**32), ('int64_param', 0),
                              ('string_param', 'x' * 128), ('string_param', 'x' * 129), ('string_param', '\u00e9' * 65),
                              ('string_param', 'x' * rng.choice([10_000, 1_000_000])), ('string_param', ''),
                              ('bool_param', True), ('double_param', 1.5), ('int64_param', rng.randint(1, 2**32))])
    model = rng.choice(SEQ_MODELS + ('add_sub',))
    r = _seq_request(model, kind, value, start=rng.random() < 0.9, end=rng.random() < 0.8) if model != 'add_sub' else _add_sub()
    if model == 'add_sub': setattr(r.parameters['sequence_id'], kind, value)
    if rng.random() < 0.2: r.parameters['sequence_start'].string_param = 'true'     # a flag of the wrong type
    return r


def _huge_parameters(rng) -> pb.ModelInferRequest:
    "add_sub with thousands of parameters, a megabyte one, a long key, or many on an input and an output."
    r, k = _add_sub(), rng.randrange(4)
    if k == 0:
        for i in range(rng.choice([1_000, 20_000])): r.parameters[f'p{i}'].int64_param = i
    elif k == 1: r.parameters[rng.choice(['user', 'priority', 'timeout', 'triton_x'])].string_param = 'x' * rng.choice([2**16, 2**22])
    elif k == 2: r.parameters['k' * rng.choice([1_000, 1_000_000])].bool_param = True
    else:
        for i in range(5_000): r.inputs[0].parameters[f'p{i}'].string_param = 'v'
        r.outputs.add(name='OUTPUT0').parameters['classification'].int64_param = rng.choice([0, 1, 2**40, -1])
    return r


def _deep_load(rng) -> bytes:
    "A RepositoryModelLoad of deep0..2 with a deep or huge config, or a deep `file:` key."
    req, k = pb.RepositoryModelLoadRequest(model_name=f'deep{rng.randrange(3)}'), rng.randrange(3)
    if k == 0:
        d = rng.choice([100, 5_000, 200_000])
        req.parameters['config'].string_param = '{"parameters": ' * d + '{}' + '}' * d
    elif k == 1: req.parameters['config'].string_param = '{"backend": "python", "input": [' + '{"name": "x"},' * 20_000 + '{}]}'
    else:
        req.parameters['config'].string_param = '{"backend": "python"}'
        req.parameters['file:' + '/'.join(['d'] * rng.choice([10, 1_500, 3_000])) + '/model.py'].bytes_param = b'x'
    return req.SerializeToString()


def _cancelled_stream(rng) -> CancelledStream:
    "STARTs (few ENDs) of new sequences on one model, more than its two slots: the stream is cancelled while some wait."
    model = rng.choice(SEQ_MODELS)
    base = rng.randint(1, 2**32)
    msgs = [_seq_request(model, 'int64_param', base + i, end=rng.random() < 0.2).SerializeToString() for i in range(rng.randint(3, 8))]
    return CancelledStream(msgs, after=rng.choice([0.0, 0.01, 0.05]))


def heavy_case(rng, big: bool = False) -> tuple:
    "(method, request bytes or a list of them for a stream): one of issue 26's shapes; `big`: up to 1M BYTES elements."
    k = rng.randrange(6)
    n = rng.choice([1_000, 10_000, 50_000] + ([300_000, 1_000_000] if big else []))
    if k == 0: return 'ModelInfer', _many_bytes(rng, n).SerializeToString()
    if k == 1: return 'ModelInfer', _bad_id(rng).SerializeToString()
    if k == 2: return 'ModelInfer', _huge_parameters(rng).SerializeToString()
    if k == 3: return 'RepositoryModelLoad', _deep_load(rng)
    if k == 4: return 'ModelStreamInfer', _cancelled_stream(rng)
    return 'ModelStreamInfer', [rng.choice([_bad_id, _huge_parameters])(rng).SerializeToString() for _ in range(rng.randint(1, 3))]


# ------------------------------------------------------------------------------------------------- the server and a call

class Server(MiniProcess):
    """`python -m triton_mini` on a copy of the conformance models, gRPC on a free port, with a raw channel to it.
    `heavy`: also the sequence models (0.2 s idle, so abandoned STARTs drain fast) and deep0..2 (copies of identity_int32
    for the deep load configs), in explicit mode, all loaded."""
    def __init__(self, root: Path, heavy: bool = False):
        repo = copy_models(root / 'models', 'conformance', *(f'sequence/{m}' for m in SEQ_MODELS if heavy))
        for m in SEQ_MODELS if heavy else ():
            cfg = repo / m / 'config.pbtxt'
            cfg.write_text(cfg.read_text().replace('sequence_batching {', 'sequence_batching {\n  max_sequence_idle_microseconds: 200000', 1))
        for i in range(3 if heavy else 0):     # deep0..2, that the deep load configs replace (and fail to)
            shutil.copytree(repo / 'identity_int32', repo / f'deep{i}')
            cfg = repo / f'deep{i}' / 'config.pbtxt'
            cfg.write_text(cfg.read_text().replace('"identity_int32"', f'"deep{i}"'))
        flags = ['--model-control-mode=explicit', '--load-model=*'] if heavy else []
        super().__init__(repo, '--exit-timeout-secs=5', *flags, metrics=False)
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
            if isinstance(data, CancelledStream):
                answers = stream(iter(data), timeout=timeout)
                time.sleep(data.after)
                answers.cancel()
                return [('OK', m.error_message) for m in answers] or [('OK', '')]
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
        elif details.startswith(UNEXPECTED):
            out.append(f'an unexpected exception in the server (its fixed text): {details[:200]}')
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


class LivePoller:
    "ServerLive every 20 ms, on a channel of its own, while a block runs: `worst` is the slowest answer in seconds."
    def __init__(self, port: int, every: float = 0.02, stop: threading.Event | None = None):
        self.port, self.every, self.worst, self.times, self.stop = port, every, 0.0, [], stop or threading.Event()

    def _poll(self):
        with grpc.insecure_channel(f'127.0.0.1:{self.port}') as channel:
            live = channel.unary_unary('/inference.GRPCInferenceService/ServerLive', request_serializer=lambda b: b,
                                       response_deserializer=lambda b: b)
            while not self.stop.wait(self.every):
                t0 = time.monotonic()
                try: live(b'', timeout=30); took = time.monotonic() - t0
                except grpc.RpcError: took = 30.0            # a failed poll counts as 30 s
                self.times.append(took); self.worst = max(self.worst, took)

    def __enter__(self):
        self.thread = threading.Thread(target=self._poll, daemon=True); self.thread.start(); return self

    def __exit__(self, *exc): self.stop.set(); self.thread.join(35)


def run_heavy(server: Server, cases: int, seed: int, big: bool = False, save: bool = False) -> list:
    "`cases` of issue 26's heavy shapes (a seeded stream of their own); returns the failures."
    failures, rng = [], random.Random(seed)
    for i in range(cases):
        method, data = heavy_case(rng, big)
        found = problems(call(server.channel, method, data, timeout=60))
        if found:
            failures.append((f'heavy{seed}_case{i}', method, found))
            if save: save_case(f'found_heavy{seed}_case{i}', method, data)
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


@pytest.fixture(scope='module')
def heavy_server(tmp_path_factory):
    s = Server(tmp_path_factory.mktemp('grpc_fuzz_heavy'), heavy=True)
    yield s
    s.stop()


def unary(server, data: bytes, timeout: float = 20) -> pb.ModelInferResponse:
    infer = server.channel.unary_unary('/inference.GRPCInferenceService/ModelInfer', request_serializer=lambda b: b,
                                        response_deserializer=pb.ModelInferResponse.FromString)
    return infer(data, timeout=timeout)


def check_heavy(server, cases: int, seed: int, big: bool) -> float:
    "Run the heavy cases: no failure, the server up; a new sequence on each sequence model and add_sub answer at once."
    with LivePoller(server.grpc_port) as live: failures = run_heavy(server, cases, seed, big)
    assert not failures, f'{len(failures)} heavy cases failed (seed {seed}), first: {failures[:5]}'
    assert server.proc.poll() is None
    for i, model in enumerate(SEQ_MODELS):       # cancelled streams left no STARTs holding the slots (idle is 0.2 s)
        t0 = time.monotonic()
        reply = unary(server, _seq_request(model, 'int64_param', 2**50 + seed * 10 + i).SerializeToString())
        assert reply.outputs[0].name == 'SUM' and time.monotonic() - t0 < 1.0
    assert struct.unpack('<4f', unary(server, _add_sub().SerializeToString()).raw_output_contents[0]) == (2, 4, 6, 8)
    return live.worst


def test_heavy_shapes(heavy_server):
    "20 of issue 26's shapes, at most 50,000 BYTES elements (about a second)."
    check_heavy(heavy_server, 20, 26, big=False)


@pytest.mark.slow
def test_heavy_shapes_big(heavy_server):
    "150 of them, up to 1M BYTES elements: no failure, ServerLive always answered within a second, RSS not grown."
    before = heavy_server.rss_mb()
    worst = check_heavy(heavy_server, 150, 2651, big=True)
    assert worst < 1.0, f'ServerLive took {worst * 1000:.0f} ms during the heavy cases'
    assert heavy_server.rss_mb() - before < 300, f'RSS grew from {before:.0f} MB to {heavy_server.rss_mb():.0f} MB'


if __name__ == '__main__':
    import argparse, tempfile
    a = argparse.ArgumentParser(description='A long gRPC fuzz run; failing cases are saved to tests/grpc_fuzz_corpus/.')
    a.add_argument('--cases', type=int, default=100_000)
    a.add_argument('--seed', type=int, default=int(time.time()))
    a.add_argument('--heavy', type=int, default=0, help="then N of issue 26's heavy shapes, up to 1M BYTES elements")
    args = a.parse_args()
    s = Server(Path(tempfile.mkdtemp()), heavy=args.heavy > 0)
    try:
        t0, rss0 = time.monotonic(), s.rss_mb()
        failures = run(s, args.cases, args.seed, save=True)
        with LivePoller(s.grpc_port) as live: failures += run_heavy(s, args.heavy, args.seed, big=True, save=True)
        print(f'{args.cases} cases, {args.heavy} heavy, seed {args.seed}: {len(failures)} failures, {time.monotonic() - t0:.0f} s, '
              f'RSS {rss0:.0f} -> {s.rss_mb():.0f} MB, slowest ServerLive during the heavy cases {live.worst * 1000:.0f} ms')
        for f in failures[:20]: print(f)
    finally: s.stop()
