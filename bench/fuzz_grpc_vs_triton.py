"""Differential gRPC fuzzing: random ModelInferRequests sent to real Triton 2.51 and to triton-mini (same models,
tests/models/conformance, both in model-control-mode none), the answers compared. The gRPC twin of
bench/fuzz_http_vs_triton.py: a tool for finding fidelity gaps, not a pass/fail check (what it found and what was
fixed is in bench/results/; intended differences are listed in tests/test_grpc.py and the notebooks).

Each case starts from a valid request to one of the conformance models and applies 1-3 mutations at the protobuf
level (datatypes, shapes, raw buffers, typed contents, parameters, requested outputs, versions, ids). Answers are
compared as (status code, details) for errors and as the response message for successes.

    python bench/fuzz_grpc_vs_triton.py --cases 2000 --seed 3
"""
import argparse, collections, json, random, sys, tempfile
from pathlib import Path

import grpc, numpy as np
from google.protobuf import json_format
from tritonclient.grpc import service_pb2 as pb, service_pb2_grpc as pb_grpc

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / 'tests'))
from triton_servers import MiniProcess, RealTriton, copy_models, start_together  # noqa: E402

T, C = pb.ModelInferRequest.InferInputTensor, pb.InferTensorContents
DATATYPES = ['BOOL', 'UINT8', 'UINT16', 'UINT32', 'UINT64', 'INT8', 'INT16', 'INT32', 'INT64', 'FP16', 'FP32', 'FP64', 'BYTES', 'BF16']
FIELDS = {'BOOL': 'bool_contents', 'UINT8': 'uint_contents', 'UINT16': 'uint_contents', 'UINT32': 'uint_contents',
          'UINT64': 'uint64_contents', 'INT8': 'int_contents', 'INT16': 'int_contents', 'INT32': 'int_contents',
          'INT64': 'int64_contents', 'FP32': 'fp32_contents', 'FP64': 'fp64_contents', 'BYTES': 'bytes_contents'}
ITEMSIZE = {'BOOL': 1, 'UINT8': 1, 'INT8': 1, 'UINT16': 2, 'INT16': 2, 'FP16': 2, 'BF16': 2, 'UINT32': 4, 'INT32': 4,
            'FP32': 4, 'UINT64': 8, 'INT64': 8, 'FP64': 8}


def seeds() -> list:
    "Valid requests, one or more per conformance model."
    f4 = np.arange(4, dtype=np.float32).reshape(1, 4).tobytes()
    add = pb.ModelInferRequest(model_name='add_sub', inputs=[T(name='INPUT0', datatype='FP32', shape=[1, 4]), T(name='INPUT1', datatype='FP32', shape=[1, 4])],
                               raw_input_contents=[f4, f4])
    add_typed = pb.ModelInferRequest(model_name='add_sub', inputs=[T(name='INPUT0', datatype='FP32', shape=[1, 4], contents=C(fp32_contents=[1, 2, 3, 4])),
                                                                   T(name='INPUT1', datatype='FP32', shape=[1, 4], contents=C(fp32_contents=[1, 1, 1, 1]))])
    nob = pb.ModelInferRequest(model_name='add_sub_nobatch', inputs=[T(name='INPUT0', datatype='FP32', shape=[4]), T(name='INPUT1', datatype='FP32', shape=[4])],
                               raw_input_contents=[f4, f4])
    i32 = pb.ModelInferRequest(model_name='identity_int32', inputs=[T(name='X', datatype='INT32', shape=[1, 3], contents=C(int_contents=[1, 2, 3]))])
    byt = pb.ModelInferRequest(model_name='identity_bytes', inputs=[T(name='IN', datatype='BYTES', shape=[2], contents=C(bytes_contents=[b'a', b'bc']))])
    typed = pb.ModelInferRequest(model_name='typed', inputs=[T(name='INT16', datatype='INT16', shape=[2], contents=C(int_contents=[1, -2])),
                                                           T(name='FP64', datatype='FP64', shape=[1], contents=C(fp64_contents=[0.5]))])
    gen = pb.ModelInferRequest(model_name='gen', inputs=[T(name='text_input', datatype='BYTES', shape=[1], contents=C(bytes_contents=[b'hi']))])
    ens = pb.ModelInferRequest(model_name='ens', inputs=[T(name='X', datatype='FP32', shape=[1, 2], contents=C(fp32_contents=[1, 2]))])
    cls = pb.ModelInferRequest(model_name='classify', inputs=[T(name='SCORES_IN', datatype='FP32', shape=[2, 5])],
                               raw_input_contents=[np.arange(10, dtype=np.float32).tobytes()])
    return [add, add_typed, nob, i32, byt, typed, gen, ens, cls]


def _tensor(r, rng):
    return rng.choice(r.inputs) if r.inputs else None

def m_datatype(r, rng):
    if (t := _tensor(r, rng)) is not None: t.datatype = rng.choice(DATATYPES + ['', 'fp32', 'INT3'])
def m_shape(r, rng):
    if (t := _tensor(r, rng)) is None: return
    shape = list(t.shape)
    op = rng.randrange(5)
    if op == 0 and shape: shape[rng.randrange(len(shape))] = rng.choice([0, -1, 2, 3, 1 << 40, -(1 << 62)])
    elif op == 1: shape.append(rng.choice([1, 2]))
    elif op == 2 and shape: shape.pop()
    elif op == 3: shape = []
    else: shape = [rng.choice([0, 1, 2]) for _ in range(rng.randrange(1, 4))]
    del t.shape[:]; t.shape.extend(shape)
def m_raw(r, rng):
    op = rng.randrange(5)
    if op == 0: r.raw_input_contents.append(bytes(rng.randrange(9)))
    elif op == 1 and r.raw_input_contents: r.raw_input_contents.pop()
    elif op == 2 and r.raw_input_contents:
        i = rng.randrange(len(r.raw_input_contents)); b = r.raw_input_contents[i]
        r.raw_input_contents[i] = b[:rng.randrange(len(b) + 1)] if rng.random() < 0.5 else b + bytes(rng.randrange(1, 5))
    elif op == 3 and r.inputs:   # typed contents -> raw bytes (a valid size for the datatype, or not)
        t = _tensor(r, rng); n = int(np.prod(t.shape)) if len(t.shape) else 1
        t.ClearField('contents')
        del r.raw_input_contents[:]
        for u in r.inputs:
            size = ITEMSIZE.get(u.datatype, 4) * max(int(np.prod(u.shape)) if len(u.shape) else 1, 0)
            r.raw_input_contents.append(bytes(min(size + rng.choice([0, 0, 0, 1, -1]), 64) if size >= 0 else 0))
            u.ClearField('contents')
    else: r.raw_input_contents.append(b'\x01\0\0\0x')
def m_contents(r, rng):
    if (t := _tensor(r, rng)) is None: return
    field = rng.choice(list(set(FIELDS.values())))
    values = {'bool_contents': [True, False], 'bytes_contents': [b'x', b''], 'fp32_contents': [1.5, -2.0], 'fp64_contents': [1e300],
              'int_contents': [1, -1, 300], 'int64_contents': [1 << 40], 'uint_contents': [7, 1 << 31], 'uint64_contents': [1 << 63]}[field]
    getattr(t.contents, field).extend(values[:rng.randrange(0, len(values) + 1)])
def m_parameters(r, rng):
    key = rng.choice(['sequence_id', 'sequence_start', 'sequence_end', 'priority', 'timeout', 'binary_data_output',
                      'triton_enable_empty_final_response', 'triton_x', 'foo', 'shared_memory_region', 'classification', ''])
    kind = rng.choice(['int64_param', 'bool_param', 'string_param', 'double_param', 'uint64_param'])
    value = {'int64_param': rng.choice([0, 1, -1, 1 << 62]), 'bool_param': rng.random() < 0.5, 'string_param': rng.choice(['', 'x', '5']),
             'double_param': 2.5, 'uint64_param': 3}[kind]
    target = r if rng.random() < 0.6 or not r.inputs else _tensor(r, rng)
    setattr(target.parameters[key], kind, value)
def m_outputs(r, rng):
    o = r.outputs.add(name=rng.choice(['OUTPUT0', 'OUTPUT1', 'Y', 'OUT', 'SCORES', 'nope', '', 'text_output', 'SUM']))
    if rng.random() < 0.5: o.parameters['classification'].int64_param = rng.choice([0, 1, 3, -1, 100])
    if rng.random() < 0.2: o.parameters['binary_data'].bool_param = True
def m_version(r, rng): r.model_version = rng.choice(['', '1', '2', '0', '-1', 'x', ' 1', '99'])
def m_id(r, rng): r.id = rng.choice(['', 'a', 'é', 'x' * 300])
def m_inputs(r, rng):
    op = rng.randrange(4)
    if op == 0 and r.inputs: del r.inputs[rng.randrange(len(r.inputs))]
    elif op == 1 and r.inputs: r.inputs.add().CopyFrom(rng.choice(r.inputs))      # a duplicate name
    elif op == 2: r.inputs.add(name=rng.choice(['Z', 'INPUT0', '']), datatype='FP32', shape=[1], contents=C(fp32_contents=[1]))
    elif r.inputs: _tensor(r, rng).name = rng.choice(['', 'input0', 'INPUT0 ', 'X'])
def m_model(r, rng): r.model_name = rng.choice(['add_sub', 'typed', 'gen', 'ens', 'decoupled', 'nope', '', 'identity_bytes'])

MUTATIONS = [m_datatype, m_shape, m_raw, m_contents, m_parameters, m_outputs, m_version, m_id, m_inputs, m_model]


def cases(seed:int, n:int):
    rng, base = random.Random(seed), seeds()
    for i in range(n):
        r = pb.ModelInferRequest(); r.CopyFrom(rng.choice(base))
        muts = rng.sample(MUTATIONS, rng.randrange(1, 4))
        for m in muts: m(r, rng)
        yield '+'.join(m.__name__[2:] for m in muts), r


def answer(stub, request):
    try: return 'OK', json_format.MessageToDict(stub.ModelInfer(request, timeout=20), preserving_proto_field_name=True)
    except grpc.RpcError as e: return e.code().name, e.details()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--cases', type=int, default=2000)
    ap.add_argument('--seed', type=int, default=3)
    a = ap.parse_args()
    root = Path(tempfile.mkdtemp())
    triton, mine = start_together(lambda: RealTriton(copy_models(root / 'triton', 'conformance')),
                                  lambda: MiniProcess(copy_models(root / 'mine', 'conformance'), metrics=False))
    channels = [grpc.insecure_channel(f'127.0.0.1:{s.grpc_port}') for s in (triton, mine)]
    theirs_stub, ours_stub = (pb_grpc.GRPCInferenceServiceStub(c) for c in channels)
    groups, rows = collections.defaultdict(list), []
    try:
        for kind, request in cases(a.seed, a.cases):
            theirs, ours = answer(theirs_stub, request), answer(ours_stub, request)
            if theirs != ours:
                groups[(theirs[0], ours[0], str(theirs[1])[:50])].append((kind, request, theirs, ours))
                rows.append({'kind': kind, 'request': json_format.MessageToDict(request), 'triton': theirs, 'triton_mini': ours})
    finally:
        for c in channels: c.close()
        triton.stop(); mine.stop()
    (HERE / 'results').mkdir(exist_ok=True)
    out = HERE / 'results' / f'fuzz_grpc_vs_triton-{a.seed}.jsonl'
    out.write_text(''.join(json.dumps(r, default=str) + '\n' for r in rows))
    for (t, m, _), items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        kind, request, theirs, ours = items[0]
        print(f'{len(items):5d}  Triton {t} / triton-mini {m}  ({kind})\n       {json_format.MessageToJson(request, indent=None)[:300]}\n'
              f'       Triton: {str(theirs[1])[:200]}\n       mini:   {str(ours[1])[:200]}')
    print(f'{len(rows)} differences in {a.cases} cases (all of them in {out.relative_to(HERE.parent)})')


if __name__ == '__main__':
    main()
