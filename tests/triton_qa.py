"""Triton's model-configuration QA corpus (`qa/L0_model_config`) run the way its test.sh runs it, on any server.

The corpus is NVIDIA's, not ours: it is read at test time from `../shared/triton-qa` (or `$TRITON_QA_DIR`) and never
copied into the project. For every CPU-relevant case this module rebuilds what test.sh builds (`rm -fr models`, copy
the case in, make the version folders and copy the `model.py` files test.sh copies), starts a server with the same
flags, and judges it as test.sh does:

- a case that must fail (`kind='error'`): the server does not come up, and one of the case's `expected*` files, a grep
  basic regex, matches a log line as `grep "^E[0-9][0-9][0-9][0-9].*$EX"` does (`kind='message'`, the cli_messages
  cases: anywhere in the log, unanchored, as test.sh greps those);
- a case that must load (`kind='success'`): the server comes up and `compare_status.py`'s test holds: the HTTP config
  JSON equals an `expected*` config (text format) converted by `MessageToJson(preserving_proto_field_name=True)`,
  or the gRPC `ModelConfig` equals it as a protobuf message.

Adaptations to a CPU-only machine, each one named where it happens:
- the success configs were recorded on a GPU machine (`instance_group { kind: KIND_GPU gpus: 0 }`); a CPU-only Triton
  autofills `kind: KIND_CPU` without gpus, so `cpu_expected()` rewrites exactly that;
- test.sh's container has Triton's C++ test backends (`identity`, `repeat`); here `tests/fixtures/triton_qa_backends`
  gives them as Python-based backends, passed as `--backend-directory` to both servers (with the oracle's `python/`);
  Python-based backends report `runtime: "model.py"`, which the oracle's expectation accounts for;
- `special_cases/invalid_platform` gets a small ONNX add/sub model of our own instead of the QA's
  `onnx_float32_float32_float32` (the case fails on its config before the file is read).
- the OpenVINO cases (autofill_noplatform{,_success}/openvino) get the model test.sh copies from the container's
  `qa/openvino_models`: that folder is in the server repository at v2.51.0, not in this corpus, so `openvino_models()`
  extracts it with git from `$TRITON_SERVER_REPO` (default: the mirror under /work/.mirror), never committing it. They
  need the openvino extra, and they run on triton-mini only: the CPU oracle has no OpenVINO backend, so the cases'
  own `expected*` files are the only judge (`missing()` says why a case cannot run here).

Grouping (`plan()`): test.sh starts one server per case. Single-folder cases that share their flags are loaded
together, one repository per flag set, with `--exit-on-error=false`; each then looks at its own model's readiness and
at the log lines that name its model (folder name or config name). Whole-repository cases (ensembles with their
steps) and the cli_messages cases keep a server of their own with exactly test.sh's flags. `TRITON_QA_ISOLATED=1`
runs every case alone, to check that grouping changes no verdict.
"""
from __future__ import annotations

import atexit, contextlib, dataclasses, functools, importlib.util, io, itertools, json, os, re, shutil, subprocess, sys
import tarfile, tempfile, time, urllib.parse
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

from triton_servers import ORACLE, ROOT, MiniProcess, RealTriton, http

QA = Path(os.environ.get('TRITON_QA_DIR') or ROOT.parent / 'shared' / 'triton-qa') / 'qa'
L0 = QA / 'L0_model_config'
STANDIN_BACKENDS = Path(__file__).parent / 'fixtures' / 'triton_qa_backends'
STRICT_FALSE = ('--strict-model-config=false',)
# The server repository's git directory, for the OpenVINO cases' model files (qa/openvino_models at the oracle's tag).
SERVER_REPO = Path(os.environ.get('TRITON_SERVER_REPO') or '/work/.mirror/triton-inference-server+server/repo')
SERVER_TAG = 'v2.51.0'

# Which parts of the corpus run here, and why the rest does not (reported by the test module's docstring).
CPU_GROUPS = ('common', 'custom', 'ensemble', 'python', 'openvino')
NOT_RUN = {
    'autofill_noplatform{,_success}/{tensorrt,pytorch}': 'TensorRT has no CPU backend; the PyTorch cases need the QA '
        "model files test.sh copies from NVIDIA's /data/inferenceserver",
    'autofill_noplatform_success/openvino/partial_config': "test.sh copies its model (qa_model_repository/"
        "openvino_int8_int8_int8) from NVIDIA's /data/inferenceserver (the other OpenVINO cases run, on triton-mini only)",
    'autofill_noplatform{,_success}/onnx': "need the QA's ONNX model files, and the CPU oracle has no onnxruntime backend",
    'noautofill_platform with tensorrt_plan / pytorch_libtorch': 'platforms without a CPU backend (onnxruntime_onnx runs)',
    'custom_parameters/tensorrt': 'TensorRT plans',
    'model_metrics': 'the model_metrics config field postdates Triton 2.51 (2.51 fails to read such a config.pbtxt)',
}


# test.sh's success loop: "If there is a config.pbtxt at the top-level of the test then assume that the directory is a
# single model. Otherwise assume that the directory is an entire model repository", except for these names.
NO_CONFIG_SINGLE_MODELS = ('no_config', 'no_config_variable', 'no_config_shape_tensor', 'no_config_non_linear_format_io')


def available() -> bool: return (L0 / 'test.sh').is_file()


@dataclasses.dataclass(frozen=True)
class Case:
    id: str                   # the case's path under L0_model_config; noautofill cases add the flag variant
    source: Path              # the case folder in the corpus
    kind: str                 # 'error' | 'message' | 'success'
    flags: tuple              # test.sh's SERVER_ARGS besides --model-repository
    whole_repo: bool = False  # the folder is a whole model repository, not one model folder
    platform: str = ''        # noautofill_platform: the platform test.sh writes into config.pbtxt

    @property
    def target(self) -> str: return self.source.name

    @property
    def groupable(self) -> bool: return not self.whole_repo and self.kind != 'message'


# ---------------------------------------------------------------------------------------------------------- the cases
def cases() -> list:
    "Every CPU-relevant case, in test.sh's order."
    out = []
    for t in sorted(p.name for p in (L0 / 'cli_messages').iterdir()):
        flags = {'cli_override': ('--disable-auto-complete-config', '--strict-model-config=false'),
                 'cli_deprecation': ('--strict-model-config=true',)}.get(t, ())
        out.append(Case(f'cli_messages/{t}', L0 / 'cli_messages' / t, 'message', flags))
    for t in sorted(p.name for p in (L0 / 'special_cases').iterdir()):
        flags = ('--disable-auto-complete-config',) if t == 'invalid_platform' else ()
        out.append(Case(f'special_cases/{t}', L0 / 'special_cases' / t, 'error', flags))
    for variant, flags in (('strict', ('--strict-model-config=true',)), ('disable_flag', ('--disable-auto-complete-config',))):
        for t in sorted(p.name for p in (L0 / 'noautofill_platform').iterdir()):
            out.append(Case(f'noautofill_platform/{variant}/{t}', L0 / 'noautofill_platform' / t, 'error', flags,
                            platform='onnxruntime_onnx'))
    for top, kind in (('autofill_noplatform', 'error'), ('autofill_noplatform_success', 'success')):
        for group in CPU_GROUPS:
            if not (L0 / top / group).is_dir(): continue
            for d in sorted((L0 / top / group).iterdir()):
                if f'{top}/{group}/{d.name}' in NOT_RUN: continue
                single = (d / 'config.pbtxt').is_file() or kind == 'success' and d.name in NO_CONFIG_SINGLE_MODELS
                out.append(Case(f'{top}/{group}/{d.name}', d, kind, STRICT_FALSE, whole_repo=not single))
    return out


def is_openvino(case:Case) -> bool: return case.id.split('/')[1:2] == ['openvino']


def oracle_runs(case:Case) -> bool:
    "Whether the CPU oracle can run `case`: not the OpenVINO cases (pytriton's Triton has no OpenVINO backend)."
    return not is_openvino(case)


def missing(case:Case) -> str | None:
    "None when `case` can run here, else why not: the OpenVINO cases need the openvino extra and the server's git directory."
    if not is_openvino(case): return None
    if importlib.util.find_spec('openvino') is None:
        return "the OpenVINO cases of Triton's QA need OpenVINO: pip install -e '.[openvino]'"
    return openvino_models_missing()


def openvino_models_missing() -> str | None:
    "None when SERVER_REPO holds qa/openvino_models at SERVER_TAG, else why not."
    r = subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'rev-parse', '--verify', '-q', f'{SERVER_TAG}^{{commit}}'], capture_output=True)
    if r.returncode:
        return (f"the OpenVINO cases of Triton's QA need qa/openvino_models from a git directory of triton-inference-server/"
                f"server with tag {SERVER_TAG}: $TRITON_SERVER_REPO ({SERVER_REPO}) is not one")
    return None


@functools.cache
def openvino_models() -> Path:
    "The server's `qa/openvino_models` at SERVER_TAG (fixed_batch, dynamic_batch), extracted once per process."
    dest = Path(tempfile.mkdtemp(prefix='triton-qa-openvino-'))
    atexit.register(shutil.rmtree, dest, True)
    tar = subprocess.run(['git', f'--git-dir={SERVER_REPO}', 'archive', '--format=tar', SERVER_TAG, 'qa/openvino_models'],
                         capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(tar)) as t: t.extractall(dest, filter='data')
    return dest / 'qa' / 'openvino_models'


def model_dirs(case:Case, repo:Path) -> list:
    "The model folders a staged case puts into `repo`."
    if not case.whole_repo: return [repo / case.target]
    return sorted(repo / p.name for p in case.source.iterdir() if p.is_dir())


def stage(case:Case, repo:Path):
    "Copy the case into the repository `repo` and prepare it as test.sh does before it starts the server."
    if case.whole_repo:
        for p in case.source.iterdir():
            (shutil.copytree if p.is_dir() else shutil.copy)(p, repo / p.name)
    else: shutil.copytree(case.source, repo / case.target)
    group = case.id.split('/')[1] if case.id.startswith('autofill_') else ''
    for d in model_dirs(case, repo):
        if case.platform:   # sed -i '/platform:/d' $CONFIG; echo "platform: \"$TRIAL\"" >> $CONFIG
            cfg = d / 'config.pbtxt'
            if cfg.is_file():
                kept = [l for l in cfg.read_text().splitlines(keepends=True) if 'platform:' not in l]
                cfg.write_text(''.join(kept) + f'platform: "{case.platform}"\n')
        if group == 'python':   # its own model.py into 1/, else qa/python_models/auto_complete/model.py
            (d / '1').mkdir(exist_ok=True)
            shutil.copy(d / 'model.py' if (d / 'model.py').is_file() else QA / 'python_models' / 'auto_complete' / 'model.py', d / '1')
        elif group == 'openvino':   # cp -r /opt/tritonserver/qa/openvino_models/{fixed,dynamic}_batch/1 $modelpath
            shutil.copytree(openvino_models() / ('dynamic_batch' if d.name == 'dynamic_batch' else 'fixed_batch') / '1', d / '1')
        elif group == 'custom' or group == 'ensemble' and case.whole_repo:
            (d / '1').mkdir(exist_ok=True)   # test.sh's "Make version folders" lists: every folder of these cases
    name = case.target
    if case.id.startswith('noautofill_platform/') and name in ('invalid_cpu', 'invalid_gpu', 'negative_gpu'):
        (repo / name / '1').mkdir()   # "as the instance group validation is deferred to the beginning of model creation"
    if case.id == 'special_cases/invalid_platform':
        (repo / name / '1').mkdir()
        (repo / name / '1' / 'model.onnx').write_bytes(onnx_add_sub())
    if case.id == 'special_cases/runtime_escape':
        (repo / name / '1').mkdir()
        (repo / name / 'dummy_runtime').mkdir()
        (repo / name / 'dummy_runtime' / 'libtriton_identity.so').touch()
    if case.id == 'special_cases/invalid_runtime': (repo / name / '1').mkdir()


def onnx_add_sub() -> bytes:
    "Our own stand-in for the QA's onnx_float32_float32_float32: OUTPUT0 = INPUT0 + INPUT1, OUTPUT1 = INPUT0 - INPUT1."
    try: from onnx import TensorProto, helper
    except ImportError: return b''
    io = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ['batch', 16])
    graph = helper.make_graph([helper.make_node('Add', ['INPUT0', 'INPUT1'], ['OUTPUT0']),
                               helper.make_node('Sub', ['INPUT0', 'INPUT1'], ['OUTPUT1'])], 'add_sub',
                              [io('INPUT0'), io('INPUT1')], [io('OUTPUT0'), io('OUTPUT1')])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)], ir_version=8).SerializeToString()


# What a CPU-only Triton 2.51 logs where the corpus's expectation needs a GPU (observed on the oracle). negative_gpu's
# first instance group has `gpus: [ 0 ]` and no kind: with GPUs the kind becomes KIND_GPU and the second group's id -1
# is the error; without GPUs it becomes KIND_CPU, and Triton rejects that first group instead.
CPU_EXPECTED = {'negative_gpu': 'instance group negative_gpu_0 of model negative_gpu has kind KIND_CPU but specifies one or more GPUs'}


def expected_files(case:Case, repo:Path) -> list:
    "`ls models/$TARGET/expected*` (one model) or `ls models/expected*` (a whole repository), after staging."
    where = repo if case.whole_repo and case.kind != 'success' else repo / case.target
    if case.id.startswith('noautofill_platform/') and case.target in CPU_EXPECTED:
        (where / 'expected_cpu_only').write_text(CPU_EXPECTED[case.target] + '\n')   # written by this harness
    return sorted(p for p in where.glob('expected*') if p.is_file())


# ---------------------------------------------------------------------------------------------------- judging a log
def grep(pattern:str, text:str) -> bool:
    "`grep PATTERN` over `text`: GNU grep itself, so basic-regex semantics are exactly test.sh's."
    r = subprocess.run(['grep', '-e', pattern], input=text, capture_output=True, text=True, env={**os.environ, 'LC_ALL': 'C'})
    if r.returncode > 1: raise RuntimeError(f'grep failed on {pattern!r}: {r.stderr}')
    return r.returncode == 0


def expected_pattern(case:Case, path:Path) -> str:
    ex = path.read_text().rstrip('\n')   # EX=`cat $EXPECTED`: command substitution drops trailing newlines
    return ex if case.kind == 'message' else '^E[0-9][0-9][0-9][0-9].*' + ex


def names_of(model_dir:Path) -> set:
    "The names a model's log lines may use: its folder, and the name its config.pbtxt gives."
    names = {model_dir.name}
    cfg = model_dir / 'config.pbtxt'
    if cfg.is_file():
        names |= set(re.findall(r'^\s*name\s*:\s*"([^"]+)"', cfg.read_text(), re.M)[:1])
    return names


def lines_naming(log:str, names:set) -> str:
    "The log lines that name one of `names` as a whole word (so 'x' does not claim lines about 'x_2' or 'x.y')."
    rx = re.compile('|'.join(rf'(?<![\w.]){re.escape(n)}(?!\w|\.\w)' for n in names))
    return ''.join(l for l in log.splitlines(keepends=True) if rx.search(l))


# --------------------------------------------------------------------------------------------------- configs
def cpu_expected(config):
    "The GPU-recorded expectation as a CPU-only Triton autofills it: KIND_GPU with gpus [0] becomes KIND_CPU."
    import tritonclient.grpc.model_config_pb2 as mc
    for g in config.instance_group:
        if g.kind == mc.ModelInstanceGroup.KIND_GPU:
            g.kind = mc.ModelInstanceGroup.KIND_CPU
            del g.gpus[:]
    return config


def expected_configs(paths:list, standin_runtime:bool) -> list:
    "The `expected*` text-format configs as ModelConfig messages (compare_status.py parses them the same way)."
    import tritonclient.grpc.model_config_pb2 as mc
    from google.protobuf import text_format
    out = []
    for p in paths:
        config = cpu_expected(text_format.Parse(p.read_text(), mc.ModelConfig()))
        if standin_runtime and config.backend and (STANDIN_BACKENDS / config.backend).is_dir() and not config.runtime:
            config.runtime = 'model.py'   # what Triton reports for a Python-based backend (our stand-ins)
        out.append(config)
    return out


def config_matches(expected:list, http_json, grpc_config) -> str:
    "compare_status.py's verdict: '' when the HTTP JSON or the gRPC message equals one expected config, else why not."
    from google.protobuf import json_format
    for config in expected:
        if json.loads(json_format.MessageToJson(config, preserving_proto_field_name=True)) == http_json: return ''
    for config in expected:
        if grpc_config is not None and config == grpc_config: return ''
    from google.protobuf import text_format
    got = text_format.MessageToString(grpc_config) if grpc_config is not None else json.dumps(http_json)
    want = text_format.MessageToString(expected[0]) if expected else '(no expected file)'
    return f"config matches none of {len(expected)} expected:\n--- got (gRPC) ---\n{got}--- expected[0] ---\n{want}"


# --------------------------------------------------------------------------------------------------- servers
@dataclasses.dataclass
class Observation:
    "What one server start showed: its log, whether it came up, and per model: ready, HTTP config, gRPC config."
    log: str
    started: bool
    ready: dict
    http_config: dict
    grpc_config: dict
    note: str = ''


class Server:
    "One server start on free ports: triton-mini's CLI, or the real tritonserver (tests/triton_servers.py's launchers)."
    def __init__(self, kind:str, repo:Path, flags:tuple, backends:Path|None):
        self.kind, self.repo, self.flags, self.backends = kind, repo, flags, backends

    def observe(self, models:list, timeout:float, grouped:bool) -> Observation:
        "Start, wait until it is up (ready, or live when grouped) or gone, look at `models`, stop. (The launcher retries a port clash.)"
        extra = [f'--backend-directory={self.backends}'] if self.backends else []
        launcher = MiniProcess if self.kind == 'mini' else partial(RealTriton, exit_timeout=None)   # exactly test.sh's flags
        server = launcher(self.repo, *self.flags, *extra, wait='live' if grouped else 'ready', timeout=timeout, check=False)
        self.http_port, self.grpc_port = server.http_port, server.grpc_port
        try:
            ready, configs, grpc_configs = {}, {}, {}
            if server.up:
                for m in models:
                    q = urllib.parse.quote(m)
                    ready[m] = http(self.http_port, 'GET', f'/v2/models/{q}/ready')[0] == 200
                    if ready[m]:
                        status, _, body = http(self.http_port, 'GET', f'/v2/models/{q}/config')
                        configs[m] = json.loads(body) if status == 200 else {'status': status, 'body': body}
                        grpc_configs[m] = self._grpc_config(m)
        finally: server.stop()
        shutil.copy(server.log_path, self.repo.parent / f'server-{self.kind}.log')   # next to the staged repository ($TRITON_QA_KEEP)
        return Observation(server.log(), bool(server.up), ready, configs, grpc_configs, server.note)

    def _grpc_config(self, model):
        "The gRPC ModelConfig (None if gRPC does not answer): compare_status.py's second chance."
        import tritonclient.grpc as grpcclient
        from tritonclient.utils import InferenceServerException
        client = grpcclient.InferenceServerClient(f'127.0.0.1:{self.grpc_port}')
        try:
            for _ in range(50):   # gRPC may start a moment after HTTP
                try: return client.get_model_config(model, client_timeout=10).config
                except InferenceServerException as e:
                    if 'unavailable' not in str(e).lower() and 'connect' not in str(e).lower(): return None
                time.sleep(0.2)
            return None
        finally: client.close()


# --------------------------------------------------------------------------------------------------- running cases
def plan(selected:list, isolated:bool=False) -> list:
    "Server starts as lists of cases: groupable cases share a repository per flag set; the rest run alone."
    groups, solo = {}, []
    for c in selected:
        if c.groupable and not isolated: groups.setdefault(c.flags, []).append(c)
        else: solo.append([c])
    for flags, group in list(groups.items()):   # an ensemble whose step names a model of the group would see it: alone
        names = {c.target for c in group}
        apart = [c for c in group if referenced_models(c) & (names - {c.target})]
        groups[flags] = [c for c in group if c not in apart]
        solo += [[c] for c in apart]
    shared = [part for g in groups.values() for part in by_name(g)]
    return sorted(shared, key=len, reverse=True) + solo   # big groups first: they take longest


def by_name(group:list) -> list:
    """`group` cut into repositories where no two cases stage a model of the same name (each case goes to the first
    that lacks its name): autofill_noplatform_success/python and autofill_noplatform/openvino both have `unknown_input`,
    and share flags once the openvino extra is installed."""
    parts = []
    for c in group:
        part = next((q for q in parts if c.target not in {x.target for x in q}), None)
        if part is None: parts.append(part := [])
        part.append(c)
    return parts


def referenced_models(case:Case) -> set:
    "The models an ensemble config's steps name."
    cfg = case.source / 'config.pbtxt'
    return set(re.findall(r'model_name\s*:\s*"([^"]+)"', cfg.read_text())) if cfg.is_file() else set()


def backend_directory(kind:str, where:Path) -> Path:
    "A --backend-directory with the stand-in backends (and, for the oracle, its own Python backend as `python/`)."
    d = where / 'backends'
    d.mkdir()
    for p in STANDIN_BACKENDS.iterdir():
        if p.is_dir(): shutil.copytree(p, d / p.name)
    if kind == 'triton': (d / 'python').symlink_to(oracle_python_backend())
    return d


def oracle_python_backend() -> Path:
    "The oracle's Python backend folder (libtriton_python.so + stub), set up by the oracle script on its first run."
    home = Path(os.environ.get('TRITON_ORACLE_HOME') or Path.home() / '.cache' / 'triton-oracle')
    found = sorted(home.glob('backends-*/python/triton_python_backend_stub'))
    if not found:
        subprocess.run([ORACLE, '--help'], capture_output=True, timeout=900, cwd=tempfile.gettempdir())
        found = sorted(home.glob('backends-*/python/triton_python_backend_stub'))
    if not found: raise RuntimeError(f'no Python backend under {home} after running {ORACLE} --help')
    return found[-1].parent


def run_group(kind:str, group:list, timeout:float=300) -> dict:
    "Start one server for `group` (one case, or several that share flags), judge every case: {id: (passed, detail)}."
    grouped = len(group) > 1
    keep = os.environ.get('TRITON_QA_KEEP')   # a folder: keep each staged repository and its server log there
    if keep: Path(keep).mkdir(parents=True, exist_ok=True)
    with (contextlib.nullcontext(tempfile.mkdtemp(prefix=f'{kind}-', dir=keep)) if keep else
          tempfile.TemporaryDirectory(prefix=f'triton-qa-{kind}-')) as tmp:
        tmp = Path(tmp)
        repo = tmp / 'models'
        repo.mkdir()
        for c in group: stage(c, repo)
        flags = group[0].flags + (('--exit-on-error=false',) if grouped else ())
        models = [d.name for c in group for d in model_dirs(c, repo)]
        if len(models) != len(set(models)): raise RuntimeError(f'model name clash in a group: {models}')
        server = Server(kind, repo, flags, backend_directory(kind, tmp))
        obs = server.observe(models, timeout, grouped)
        if grouped and not obs.started: return group   # one case took the whole server down: run_cases runs each alone
        return {c.id: judge(c, repo, obs, grouped, kind) for c in group}


def judge(case:Case, repo:Path, obs:Observation, grouped:bool, kind:str) -> tuple:
    "test.sh's verdict on one case from what its server showed: (passed, detail)."
    names = set().union(*(names_of(d) for d in model_dirs(case, repo))) if grouped else None
    mine = lines_naming(obs.log, names) if grouped else obs.log
    up = obs.ready.get(case.target, False) if grouped else obs.started
    files = expected_files(case, repo)
    if case.kind == 'success':
        if not up:
            return False, f'unable to start / model not ready ({obs.note}); its E lines:\n' + error_lines(obs.log, names)
        why = config_matches(expected_configs(files, standin_runtime=kind == 'triton'),
                             obs.http_config.get(case.target), obs.grpc_config.get(case.target))
        return not why, why
    if up: return False, 'unexpected success starting the server' + (' (the model is READY)' if grouped else '')
    for f in files:
        if grep(expected_pattern(case, f), mine): return True, f'found {f.name}'
    wanted = '\n'.join(f'  {f.name}: {f.read_text().strip()}' for f in files)
    return False, f'no log line matches any of:\n{wanted}\n{"its" if grouped else "the"} E lines:\n' + error_lines(obs.log, names)


def error_lines(log:str, names:set|None=None, limit:int=8) -> str:
    "The log's E records (with the lines a message that broke the line continues on), those naming `names` if given."
    records, lines = [], log.splitlines()
    for i, line in enumerate(lines):
        if not re.match(r'E\d{4} ', line): continue
        more = list(itertools.takewhile(lambda l: not re.match(r'[IWE]\d{4} ', l), lines[i + 1:i + 4]))
        record = '\n    '.join([line[:600]] + [l[:300] for l in more])
        if names is None or lines_naming(record.replace('\n', ' ') + '\n', names): records.append(record)
    return '\n'.join('  ' + r for r in records[:limit]) or '  (none)'


def run_cases(kind:str, selected:list, workers:int=3, isolated:bool=False) -> dict:
    "Judge `selected` on `kind` ('mini' | 'triton'), several server starts at a time: {case id: (passed, detail)}."
    def one(group):
        try: return run_group(kind, group)
        except Exception as e:   # a harness failure is reported on every case of its group, never hidden
            return {c.id: (False, f'harness error: {type(e).__name__}: {e}') for c in group}
    results = {}
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = [pool.submit(one, g) for g in plan(selected, isolated)]
        while futures:
            r = futures.pop(0).result()
            if isinstance(r, list):   # the group's server did not come up (a case crashed it): halves, down to single cases
                futures += [pool.submit(one, half) for half in (r[:len(r) // 2], r[len(r) // 2:])]
            else: results.update(r)
    return results


if __name__ == '__main__':   # python tests/triton_qa.py [mini|triton] [--isolated] [--json FILE]: the failures, the figure
    kind = sys.argv[1] if len(sys.argv) > 1 else 'mini'
    t0 = time.monotonic()
    runnable = [c for c in cases() if missing(c) is None and (kind == 'mini' or oracle_runs(c))]
    res = run_cases(kind, runnable, isolated='--isolated' in sys.argv)
    for cid, (ok, detail) in sorted(res.items()):
        if not ok: print(f'FAIL {cid}\n{detail}\n')
    if '--json' in sys.argv: Path(sys.argv[sys.argv.index('--json') + 1]).write_text(json.dumps(res, indent=1, sort_keys=True))
    print(f'{kind}: {sum(ok for ok, _ in res.values())} of {len(res)} pass ({time.monotonic() - t0:.0f} s)')
