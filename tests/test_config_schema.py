"""The hand-typed schema (triton_mini.model_config) walked against model_config.proto itself.

tritonclient ships the proto as `tritonclient.grpc.model_config_pb2`. The walk visits every message of its DESCRIPTOR
(nested types included), every field (oneofs and maps included) and every enum, and proves for each one that:

1. it is mirrored: a dataclass with the proto's full name; each field with the same name, declaration order (the key
   order of Triton's JSON), scalar type, label, map key and value types, oneof, presence and JSON name; each enum
   with the same values and numbers (`test_schema_has_no_gaps`);
2. it parses from the text format: a config that sets just that field (reached through the shortest path from
   ModelConfig) gives what Google's `text_format` gives, and every integer field takes and refuses the same
   bounds (`test_field_parses_and_round_trips`, `test_integer_bounds`, `test_enum_value`);
3. it round-trips through our JSON: `to_dict` is exactly protobuf's `json_format` output (every field without presence
   printed, proto field names) after Triton's 64-bit fix-up; our JSON read by protobuf is Google's message; protobuf's
   JSON (proto names and camelCase names) read by `from_json` is our config.

tritonclient's proto is newer than Triton 2.51's, which is the one triton_mini reproduces. NEWER_THAN_2_51 lists what
2.51 does not have, each with the corpus file recorded from the 2.51 server that rejects it. With the oracle available,
`test_triton_2_51_own_descriptor` reads 2.51's own descriptor out of libtritonserver.so, requires no gap at all against
it, and checks that NEWER_THAN_2_51 is exactly the difference between the two protos.
"""
import json, re
from pathlib import Path

import pytest

from triton_mini import model_config as mc
from triton_mini.config_parser import parse_config
from triton_mini.model_config import ConfigError, ModelConfig, map_entry_fields, proto_fields

descriptor_pb2 = pytest.importorskip('google.protobuf.descriptor_pb2')
descriptor_pool = pytest.importorskip('google.protobuf.descriptor_pool')
json_format = pytest.importorskip('google.protobuf.json_format')
text_format = pytest.importorskip('google.protobuf.text_format')
model_config_pb2 = pytest.importorskip('tritonclient.grpc.model_config_pb2')
from google.protobuf.descriptor import FieldDescriptor as FD  # noqa: E402

CONFIGS = Path(__file__).parent / 'configs'

# In tritonclient's proto, not in Triton 2.51's: full names -> the corpus file that shows 2.51 rejecting it.
NEWER_THAN_2_51 = {
    'inference.ModelConfig.model_metrics': 'invalid/model_metrics.pbtxt',
    'inference.ModelMetrics': 'invalid/model_metrics.pbtxt',
    'inference.ModelMetrics.MetricControl': 'invalid/model_metrics.pbtxt',
    'inference.ModelMetrics.MetricControl.MetricIdentifier': 'invalid/model_metrics.pbtxt',
    'inference.ModelMetrics.MetricControl.HistogramOptions': 'invalid/model_metrics.pbtxt',
    'inference.ModelEnsembling.max_inflight_requests': 'invalid/max_inflight_requests.pbtxt',
}
# 64-bit fields Triton 2.51 leaves as JSON strings (its fix-up turns every other one into a number): recorded from the
# server in tests/configs (cuda_graphs, seq_basic / state files, instance_groups) and spec/model-config.md.
STRING_INT64 = {'inference.ModelSequenceBatching.InitialState.dims',
                'inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape.dim',
                'inference.ModelInstanceGroup.SecondaryDevice.device_id'}

KIND = {FD.TYPE_INT32: 'int32', FD.TYPE_INT64: 'int64', FD.TYPE_UINT32: 'uint32', FD.TYPE_UINT64: 'uint64',
        FD.TYPE_FLOAT: 'float', FD.TYPE_BOOL: 'bool', FD.TYPE_STRING: 'string', FD.TYPE_ENUM: 'enum',
        FD.TYPE_MESSAGE: None}
BOUNDS = {'int32': (-2**31, 2**31 - 1), 'int64': (-2**63, 2**63 - 1), 'uint32': (0, 2**32 - 1), 'uint64': (0, 2**64 - 1)}


# ---------------------------------------------------------------------------------------------- reading a descriptor

def is_repeated(f) -> bool:
    return f.is_repeated if hasattr(f, 'is_repeated') else f.label == FD.LABEL_REPEATED


def map_entry(f):
    "The hidden `...Entry` message of a map field, else None."
    return f.message_type if f.type == FD.TYPE_MESSAGE and f.message_type.GetOptions().map_entry else None


def value_field(f):
    "The field that holds the values: `f` itself, or the `value` of its map entry."
    entry = map_entry(f)
    return entry.fields_by_name['value'] if entry else f


def real_oneof(f):
    "The oneof `f` belongs to, not counting the synthetic one of a proto3 `optional` field."
    o = f.containing_oneof
    return None if o is None or (len(o.fields) == 1 and o.name == '_' + f.name) else o


def proto_type(f) -> str:
    v = value_field(f)
    t = v.message_type.full_name if v.type == FD.TYPE_MESSAGE else v.enum_type.full_name if v.type == FD.TYPE_ENUM \
        else KIND.get(v.type, f'type {v.type}')
    if map_entry(f): return f'map<{KIND.get(map_entry(f).fields_by_name["key"].type)}, {t}>'
    return f'repeated {t}' if is_repeated(f) else t


def messages(file) -> dict:
    "Full name -> descriptor of every message in `file`, nested ones included, map entries left out."
    out = {}
    def walk(d):
        if not d.GetOptions().map_entry: out[d.full_name] = d
        for n in d.nested_types: walk(n)
    for d in file.message_types_by_name.values(): walk(d)
    return out


def enums(file) -> dict:
    out = {e.full_name: e for e in file.enum_types_by_name.values()}
    for d in messages(file).values(): out.update({e.full_name: e for e in d.enum_types})
    return out


def ours() -> dict:
    "Proto full name -> dataclass of every message in triton_mini.model_config."
    return {c._proto: c for c in vars(mc).values()
            if isinstance(c, type) and issubclass(c, mc._Message) and c is not mc._Message}


def our_enums() -> dict:
    return {f.enum.full_name: f.enum for c in ours().values() for f in proto_fields(c).values() if f.enum is not None}


# ---------------------------------------------------------------------------------------------- 1. the mirror

def field_differences(f, mine) -> list:
    "How our ProtoField `mine` differs from descriptor field `f` (empty if it does not)."
    out, entry, v = [], map_entry(f), value_field(f)
    kind = KIND.get(v.type, f'unsupported proto type {v.type}')
    if mine.scalar != kind: out.append(f'value type {mine.scalar!r}, proto {kind!r}')
    if kind == 'enum' and getattr(mine.enum, 'full_name', None) != v.enum_type.full_name:
        out.append(f'enum {getattr(mine.enum, "full_name", None)}, proto {v.enum_type.full_name}')
    if kind is None and getattr(mine.message, '_proto', None) != v.message_type.full_name:
        out.append(f'message {getattr(mine.message, "_proto", None)}, proto {v.message_type.full_name}')
    if mine.repeated != is_repeated(f): out.append(f'repeated={mine.repeated}, proto {proto_type(f)}')
    if entry is None and mine.map_key is not None: out.append(f'a map here, not in the proto ({proto_type(f)})')
    if entry is not None:
        key = KIND.get(entry.fields_by_name['key'].type)
        if mine.map_key != key: out.append(f'map key {mine.map_key!r}, proto {key!r}')
    oneof = real_oneof(f)
    if mine.oneof != (oneof.name if oneof else None): out.append(f'oneof {mine.oneof!r}, proto {oneof and oneof.name!r}')
    if mine.presence != f.has_presence: out.append(f'presence={mine.presence}, proto has_presence={f.has_presence}')
    if mc._json_name(f.name) != f.json_name: out.append(f'JSON name {mc._json_name(f.name)!r}, proto {f.json_name!r}')
    return out


def schema_gaps(file, newer=NEWER_THAN_2_51) -> list:
    "Every difference between the proto in `file` and triton_mini.model_config, as readable lines."
    gaps, mine, theirs = [], ours(), messages(file)
    for name, d in theirs.items():
        if name in newer: continue
        cls = mine.get(name)
        if cls is None:
            gaps.append(f'message {name}: missing (fields {[f.name for f in d.fields]})')
            continue
        flds = proto_fields(cls)
        for f in d.fields:
            if f.full_name in newer: continue
            if f.name not in flds:
                gaps.append(f'field {f.full_name} = {f.number} ({proto_type(f)}): missing')
                continue
            gaps += [f'field {f.full_name}: {p}' for p in field_differences(f, flds[f.name])]
            if map_entry(f) and map_entry_fields(cls, f.name)[0] != map_entry(f).full_name:
                gaps.append(f'field {f.full_name}: entry message {map_entry_fields(cls, f.name)[0]}, '
                            f'proto {map_entry(f).full_name}')
        gaps += [f'field {name}.{n}: not in the proto' for n in flds if n not in d.fields_by_name]
        proto_order = [f.name for f in d.fields if f.name in flds]
        if [n for n in flds if n in d.fields_by_name] != proto_order:
            gaps.append(f'message {name}: field order {list(flds)}, proto declares {proto_order}')
        proto_oneofs = {o.name: [f.name for f in o.fields] for o in d.oneofs if o.fields and real_oneof(o.fields[0])}
        proto_oneofs = {k: [n for n in v if f'{name}.{n}' not in newer] for k, v in proto_oneofs.items()}
        if {k: list(v) for k, v in cls._oneofs.items()} != proto_oneofs:
            gaps.append(f'message {name}: oneofs {cls._oneofs}, proto {proto_oneofs}')
    gaps += [f'message {name}: not in the proto' for name in mine if name not in theirs]
    for name in newer:
        owner, _, field = name.rpartition('.')
        if name in mine or (owner in mine and field in proto_fields(mine[owner])):
            gaps.append(f'{name}: listed as newer than 2.51 but mirrored')
    have = our_enums()
    for name, e in enums(file).items():
        values = {v.name: v.number for v in e.values}
        if name not in have: gaps.append(f'enum {name}: missing ({values})')
        elif list(have[name].values.items()) != list(values.items()):
            gaps.append(f'enum {name}: values {have[name].values}, proto {values}')
    return gaps


def test_schema_has_no_gaps():
    "The walk over tritonclient's model_config.proto finds nothing missing, extra or different."
    gaps = schema_gaps(model_config_pb2.DESCRIPTOR)
    assert gaps == [], '\n'.join(gaps)


def test_walk_sees_the_whole_proto():
    "The walk is not vacuous: it covers every message and enum of ModelConfig's proto, and the mirror is that big."
    theirs, mine = messages(model_config_pb2.DESCRIPTOR), ours()
    assert len(theirs) >= 40 and len(enums(model_config_pb2.DESCRIPTOR)) >= 9
    assert set(mine) == set(theirs) - set(NEWER_THAN_2_51)
    assert sum(len(d.fields) for d in theirs.values()) >= 150


def _edited_proto(edit):
    "tritonclient's model_config.proto with `edit(FileDescriptorProto)` applied, as a FileDescriptor."
    fdp = descriptor_pb2.FileDescriptorProto()
    model_config_pb2.DESCRIPTOR.CopyToProto(fdp)
    edit(fdp)
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return pool.FindFileByName(fdp.name)


def _message_proto(fdp, name):
    return next(m for m in fdp.message_type if m.name == name)


def _add_field(fdp):
    f = _message_proto(fdp, 'ModelInput').field.add()
    f.name, f.number, f.type, f.label, f.json_name = 'new_flag', 99, FD.TYPE_BOOL, FD.LABEL_OPTIONAL, 'newFlag'


def _retype(fdp):
    next(f for f in _message_proto(fdp, 'ModelConfig').field if f.name == 'max_batch_size').type = FD.TYPE_UINT32


def _unrepeat(fdp):
    next(f for f in _message_proto(fdp, 'ModelInput').field if f.name == 'dims').label = FD.LABEL_OPTIONAL


def _enum_value(fdp):
    v = next(e for e in fdp.enum_type if e.name == 'DataType').value.add()
    v.name, v.number = 'TYPE_FP8', 15


def _reorder(fdp):
    fields = _message_proto(fdp, 'ModelOutput').field
    a, b = fields[0], fields[1]
    tmp = descriptor_pb2.FieldDescriptorProto(); tmp.CopyFrom(a); a.CopyFrom(b); b.CopyFrom(tmp)


def _new_message(fdp):
    m = fdp.message_type.add(); m.name = 'ModelTelemetry'


def _leave_oneof(fdp):
    m = _message_proto(fdp, 'ModelConfig')
    next(f for f in m.field if f.name == 'dynamic_batching').ClearField('oneof_index')


@pytest.mark.parametrize('edit, gap', [
    (_add_field, 'field inference.ModelInput.new_flag = 99 (bool): missing'),
    (_retype, "field inference.ModelConfig.max_batch_size: value type 'int32', proto 'uint32'"),
    (_unrepeat, 'field inference.ModelInput.dims: repeated=True, proto int64'),
    (_enum_value, 'enum inference.DataType: values'),
    (_reorder, 'message inference.ModelOutput: field order'),
    (_new_message, 'message inference.ModelTelemetry: missing'),
    (_leave_oneof, "field inference.ModelConfig.dynamic_batching: oneof 'scheduling_choice', proto None"),
], ids=lambda x: getattr(x, '__name__', '')[1:] if callable(x) else '')
def test_walk_finds_each_kind_of_gap(edit, gap):
    "A proto that differs in one way (a new field, a type, a label, an enum value, order, a message, a oneof) is caught."
    gaps = schema_gaps(_edited_proto(edit))
    assert any(g.startswith(gap) for g in gaps), gaps


def test_newer_fields_are_rejected_by_us_as_by_triton_2_51():
    """Each exempted field has a corpus file, recorded from Triton 2.51, where 2.51 refuses it (we do too); each exempted
    message is reachable only through an exempted field."""
    theirs = messages(model_config_pb2.DESCRIPTOR)
    fields = {f.full_name: f for d in theirs.values() for f in d.fields}
    for name, corpus in NEWER_THAN_2_51.items():
        data = (CONFIGS / corpus).read_bytes()
        expect = data.split(b'\n')[2].decode()
        assert expect.startswith('# expect: parse ') and 'has no field named' in expect, corpus
        with pytest.raises(ConfigError, match='has no field named'):
            parse_config(data)
        if name in fields:
            assert f'has no field named "{fields[name].name}"' in expect, (name, corpus)
        else:
            users = [f for f in fields.values() if value_field(f).type == FD.TYPE_MESSAGE
                     and value_field(f).message_type.full_name == name]
            assert users and all(f.full_name in NEWER_THAN_2_51 or f.containing_type.full_name in NEWER_THAN_2_51
                                 for f in users), name


# ---------------------------------------------------------------------------------------------- 2./3. text and JSON

def field_paths(root) -> list:
    "(path, field) for every field of every message reachable from `root`, each message reached by its shortest path."
    seen, queue, out = {root.full_name}, [((), root)], []
    while queue:
        path, d = queue.pop(0)
        for f in d.fields:
            if f.full_name in NEWER_THAN_2_51: continue
            out.append((path, f))
            v = value_field(f)
            if v.type == FD.TYPE_MESSAGE and v.message_type.full_name not in seen:
                seen.add(v.message_type.full_name)
                queue.append((path + (f,), v.message_type))
    return out


PATHS = field_paths(model_config_pb2.ModelConfig.DESCRIPTOR)


def path_id(p): return '.'.join([f.name for f in p[0]] + [p[1].name])


def sample(f, which: int = 0) -> str:
    "A non-default value of scalar field `f` in text format (`which` picks a second, different one)."
    kind = KIND[f.type]
    if kind == 'enum': return f.enum_type.values[-1 - which].name
    return {'int32': ('-7', '8'), 'int64': ('-1099511627777', '1099511627776'), 'uint32': ('7', '4294967295'),
            'uint64': ('1099511627776', '18446744073709551615'), 'float': ('0.5', '-0.25'), 'bool': ('true', 'false'),
            'string': ('"x"', '"y z"')}[kind][which]


def key_sample(entry, which: int) -> str:
    return ('"k1"', '"k2"')[which] if KIND[entry.fields_by_name['key'].type] == 'string' else ('1', '2')[which]


def wrap(path, inner: str) -> str:
    "Text that sets `inner` inside the messages of `path`, outermost first (a map takes one entry)."
    for f in reversed(path):
        entry = map_entry(f)
        inner = f'{f.name} {{ key: {key_sample(entry, 0)} value {{ {inner} }} }}' if entry else f'{f.name} {{ {inner} }}'
    return inner


def setting(f) -> str:
    "Text that gives field `f` a non-default value (two values or entries for repeated fields and maps)."
    entry = map_entry(f)
    if entry:
        v = entry.fields_by_name['value']
        value = 'value { }' if v.type == FD.TYPE_MESSAGE else f'value: {sample(v)}'
        return ' '.join(f'{f.name} {{ key: {key_sample(entry, i)} {value} }}' for i in (0, 1))
    if f.type == FD.TYPE_MESSAGE: return f'{f.name} {{ }}' + (f' {f.name} {{ }}' if is_repeated(f) else '')
    if is_repeated(f): return f'{f.name}: [ {sample(f)}, {sample(f, 1)} ]'
    return f'{f.name}: {sample(f)}'


def triton_json(msg) -> dict:
    "Google's message as Triton's JSON shows it: json_format with every field, then Triton's 64-bit fix-up."
    d = json_format.MessageToDict(msg, preserving_proto_field_name=True, always_print_fields_with_no_presence=True)
    return _fix(d, msg.DESCRIPTOR)


def _fix(d: dict, desc) -> dict:
    out = {}
    for k, x in d.items():
        f = desc.fields_by_name[k]
        if f.full_name in NEWER_THAN_2_51: continue
        v = value_field(f)
        def one(y):
            if v.type == FD.TYPE_MESSAGE: return _fix(y, v.message_type)
            if v.type in (FD.TYPE_INT64, FD.TYPE_UINT64) and v.full_name not in STRING_INT64: return int(y)
            return y
        out[k] = {kk: one(y) for kk, y in x.items()} if map_entry(f) else [one(y) for y in x] if is_repeated(f) else one(x)
    return out


def google(text: str):
    return text_format.Parse(text, model_config_pb2.ModelConfig())


def assert_same(text: str):
    "Our parse of `text` and Google's agree, in Triton's JSON and through every JSON round trip."
    msg, cfg = google(text), parse_config(text)
    assert msg != model_config_pb2.ModelConfig() and cfg != ModelConfig(), 'the text sets nothing'
    assert cfg.to_dict() == triton_json(msg)
    assert json_format.Parse(cfg.to_json(), model_config_pb2.ModelConfig()) == msg       # protobuf reads our JSON
    assert ModelConfig.from_json(json_format.MessageToJson(msg, preserving_proto_field_name=True)) == cfg
    assert ModelConfig.from_json(json_format.MessageToJson(msg)) == cfg                  # camelCase names
    assert ModelConfig.from_json(cfg.to_json()) == cfg


@pytest.mark.parametrize('path', PATHS, ids=path_id)
def test_field_parses_and_round_trips(path):
    "Each field, set alone (inside its parents), parses and round-trips exactly like protobuf."
    assert_same(wrap(path[0], setting(path[1])))


INTEGER_PATHS = [p for p in PATHS if KIND.get(p[1].type) in BOUNDS]


@pytest.mark.parametrize('path', INTEGER_PATHS, ids=path_id)
def test_integer_bounds(path):
    "Each integer field takes its type's smallest and largest value and refuses one beyond, like protobuf."
    parents, f = path
    low, high = BOUNDS[KIND[f.type]]
    for value in (low, high, low - 1, high + 1):
        text = wrap(parents, f'{f.name}: {value}')
        try: google(text)
        except text_format.ParseError:
            with pytest.raises(ConfigError, match='Integer out of range|Expected integer'):
                parse_config(text)
            assert value in (low - 1, high + 1)
            continue
        assert value in (low, high)
        if value != 0: assert_same(text)
        else: assert parse_config(text).to_dict() == triton_json(google(text))


def enum_values() -> list:
    "(path, field, value) for every value of every enum, each through the first field that uses the enum."
    first = {}
    for parents, f in PATHS:
        v = value_field(f)
        if v.type == FD.TYPE_ENUM and map_entry(f) is None: first.setdefault(v.enum_type.full_name, (parents, f))
    return [(*first[e.full_name], v) for e in enums(model_config_pb2.DESCRIPTOR).values() for v in e.values
            if e.full_name in first]


def test_every_enum_is_reachable():
    used = {f.enum_type.full_name for _, f, _ in enum_values()}
    assert used == set(enums(model_config_pb2.DESCRIPTOR))


@pytest.mark.parametrize('case', enum_values(), ids=lambda c: f'{path_id(c[:2])}={c[2].name}')
def test_enum_value(case):
    "Every enum value, by name and by number, parses to the same thing as in protobuf and prints by name."
    parents, f, value = case
    for written in (value.name, str(value.number)):
        text = wrap(parents, f'{f.name}: {written}' + (f' {f.name}: {written}' if is_repeated(f) else ''))
        cfg, msg = parse_config(text), google(text)
        assert cfg.to_dict() == triton_json(msg)
        assert ModelConfig.from_json(cfg.to_json()) == cfg
        if value.number != 0: assert_same(text)


def test_the_walk_covers_every_field():
    "Every field of every mirrored message is reached by some path (so every one is parsed and round-tripped)."
    reached = {f.full_name for _, f in PATHS}
    every = {f.full_name for d in messages(model_config_pb2.DESCRIPTOR).values() for f in d.fields
             if d.full_name not in NEWER_THAN_2_51 and f.full_name not in NEWER_THAN_2_51}
    assert reached == every and len(PATHS) == len(every)


# ---------------------------------------------------------------------------------------------- Triton 2.51's own proto

def embedded_file_descriptor(library: bytes):
    "The serialized model_config.proto FileDescriptorProto that protoc compiled into `library`, parsed."
    start = library.find(b'\n\x12model_config.proto')
    if start < 0: return None
    i = start
    while True:  # read top-level fields while they look like FileDescriptorProto's (1-12, 14)
        tag, j = _varint(library, i)
        number, wire = tag >> 3, tag & 7
        if number not in range(1, 15) or number == 13 or wire != (0 if number in (10, 11, 14) else 2): break
        n, j = _varint(library, j)
        i = j + (n if wire == 2 else 0)
    fdp = descriptor_pb2.FileDescriptorProto.FromString(library[start:i])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return pool.FindFileByName('model_config.proto')


def _varint(b: bytes, i: int):
    shift = result = 0
    while True:
        c = b[i]; i += 1
        result |= (c & 0x7F) << shift; shift += 7
        if c < 0x80: return result, i


@pytest.fixture(scope='module')
def triton_2_51_proto(tmp_path_factory):
    "model_config.proto as compiled into the running Triton 2.51 (found through the server's memory map)."
    from triton_servers import RealTriton
    repo = tmp_path_factory.mktemp('schema') / 'models'
    repo.mkdir()
    server = RealTriton(repo)
    try:
        maps = Path(f'/proc/{server.proc.pid}/maps').read_text()
        libs = sorted({line.split()[-1] for line in maps.splitlines() if re.search(r'libtritonserver[^/]*\.so', line)})
        assert libs, 'libtritonserver.so is not mapped by the oracle process'
        file = embedded_file_descriptor(Path(libs[0]).read_bytes())
    finally:
        server.stop()
    assert file is not None, f'no model_config.proto descriptor in {libs[0]}'
    return file


@pytest.mark.oracle
def test_triton_2_51_own_descriptor(triton_2_51_proto):
    "Against Triton 2.51's own proto nothing may be missing; tritonclient's extras are exactly NEWER_THAN_2_51."
    gaps = schema_gaps(triton_2_51_proto, newer={})
    assert gaps == [], '\n'.join(gaps)
    theirs = messages(triton_2_51_proto)
    newer = messages(model_config_pb2.DESCRIPTOR)
    extra = set(newer) - set(theirs)
    extra |= {f.full_name for name, d in newer.items() if name in theirs for f in d.fields
              if f.name not in theirs[name].fields_by_name}
    assert extra == set(NEWER_THAN_2_51)


if __name__ == '__main__':  # print what the walk finds, e.g. after upgrading tritonclient
    for line in schema_gaps(model_config_pb2.DESCRIPTOR, newer={}) or ['no gaps']: print(line)
