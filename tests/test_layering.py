"""The layering contract, checked (issue 17). More contracts (import-linter) join this file as the seams land."""
import subprocess, sys

def _modules_after(stmt):
    "The triton_mini modules a fresh interpreter has loaded after running `stmt`."
    code = f"{stmt}; import sys; print(' '.join(sorted(m for m in sys.modules if m.startswith('triton_mini'))))"
    return subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout.split()

def test_errors_is_the_bottom_of_the_core():
    "triton_mini.errors imports nothing of triton_mini, so every layer may import it."
    assert [m for m in _modules_after('import triton_mini.errors') if m not in ('triton_mini', 'triton_mini.errors')] == []

def test_portability_is_at_the_bottom_of_the_core():
    "triton_mini.portability (what Windows and macOS lack) imports nothing of triton_mini, so every layer may ask it."
    assert [m for m in _modules_after('import triton_mini.portability') if m not in ('triton_mini', 'triton_mini.portability')] == []

def test_one_error_class_and_one_verbose_level():
    "tensors re-exports the core's error; pb_utils and the command line use the core's VERBOSE level."
    from triton_mini import errors, tensors, pb_utils, cli
    assert tensors.TritonError is errors.TritonError and tensors.request_prefix is errors.request_prefix
    assert pb_utils.VERBOSE is errors.VERBOSE and cli.VERBOSE is errors.VERBOSE


# --- the import contract, read from the source (every `import`, at module level or inside a function) ---
import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / 'triton_mini'
FRONT_ENDS = {'http_server', 'grpc_server', 'metrics_server', 'openai_frontend', 'tritonserver'}
IN_PROCESS_FRONT_ENDS = {'tritonserver'}   # Triton's Python API: used by importing it, not put on a socket by the CLI
FRONT_END_HELPERS = {'http_hardening': 'http_server', 'grpc_extensions': 'grpc_server', 'grpc_h2': 'grpc_server'}   # a front end's own helper module: what it needs, that no other front end uses
COMPOSITION = {'cli', '__main__'}
SCALE_OUT = {'ray_serve'}   # above the front ends: a Ray Serve replica owns a TritonServer and the HTTP front end
BACKEND_IMPLEMENTATIONS = {'python_backend', 'onnx_backend', 'fil_backend', 'pytorch_backend', 'openvino_backend', 'stub_process', 'pb_utils'}
CORE = {'errors', 'portability', 'tensors', 'model_config', 'config_parser', 'model_config_utils', 'model_repository', 'backend',
        'scheduler', 'rate_limiter', 'sequence_batcher', 'ensemble', 'shared_memory', 'response_cache', 'trace', 'server',
        'metrics'}   # the Prometheus rendering, as in Triton's core (TRITONSERVER_MetricsFormatted); metrics_server serves it

def imports_of(module:str) -> set:
    "The triton_mini modules `module` imports anywhere in its source (relative or absolute)."
    tree, found = ast.parse((PKG / f'{module}.py').read_text()), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1: names = [node.module] if node.module else [a.name for a in node.names]
            elif (node.module or '').startswith('triton_mini'):
                rest = node.module.split('.')[1:]
                names = rest[:1] if rest else [a.name for a in node.names]
            else: continue
            found |= {n.split('.')[0] for n in names}
        elif isinstance(node, ast.Import):
            found |= {a.name.split('.')[1] for a in node.names if a.name.startswith('triton_mini.')}
    return found & {p.stem for p in PKG.glob('*.py')}

def test_front_ends_never_import_each_other():
    "HTTP, gRPC and metrics share only the core (and the HTTP plumbing in asgi), as Triton's http_server.cc and grpc_server.cc do."
    for fe in FRONT_ENDS: assert not imports_of(fe) & (FRONT_ENDS - {fe}), (fe, imports_of(fe))

def test_front_end_helpers_belong_to_one_front_end():
    "A front end's helper module (08d_http_hardening for HTTP, 08e_grpc_extensions for gRPC) stands on the core only, and only its front end imports it."
    for helper, owner in FRONT_END_HELPERS.items():
        assert imports_of(helper) <= CORE, (helper, imports_of(helper))
        assert helper in imports_of(owner), (owner, helper)
        for fe in FRONT_ENDS - {owner}: assert helper not in imports_of(fe), (fe, helper)

def test_nothing_imports_the_command_line():
    for p in PKG.glob('*.py'):
        if p.stem not in COMPOSITION: assert not imports_of(p.stem) & {'cli'}, p.stem

def test_the_core_imports_no_front_end_and_no_backend_implementation():
    "The core names backends (BACKEND_CLASSES) and the command line (COMPOSITION_ROOT); it imports neither."
    for m in CORE:
        assert not imports_of(m) & (FRONT_ENDS | COMPOSITION | {'asgi', 'demo', 'llm'} | BACKEND_IMPLEMENTATIONS), (m, imports_of(m))

def test_the_asgi_plumbing_imports_only_the_core():
    assert imports_of('asgi') <= CORE, imports_of('asgi')

def test_a_python_only_server_never_loads_onnxruntime():
    "Backends are found by name when a model needs them: serving Python models does not import ONNX Runtime."
    code = ("import sys, tempfile; from triton_mini.server import TritonServer; "
            "s = TritonServer(tempfile.mkdtemp()); s.start(); s.stop(); "
            "print('onnxruntime' in sys.modules, 'triton_mini.http_server' in sys.modules, 'triton_mini.cli' in sys.modules)")
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout.split()
    assert out == ['False', 'False', 'False'], out

def test_the_contract_checker_sees_imports():
    "The checker itself: grpc_server does import the core, and the CLI imports every front end it serves."
    assert 'server' in imports_of('grpc_server') and FRONT_ENDS - IN_PROCESS_FRONT_ENDS <= imports_of('cli')

def test_serves_without_uvloop_and_httptools():
    "uvloop and httptools are accelerators (uvloop has no Windows build): without them the HTTP front end still answers."
    code = ("import sys; sys.modules['uvloop'] = sys.modules['httptools'] = None\n"
            "import json, urllib.request\n"
            "from triton_mini.server import TritonServer\nfrom triton_mini.cli import example_repository\n"
            "from triton_mini.http_server import HTTPFrontend\nfrom triton_mini.asgi import HTTPService, bind_socket\n"
            "s = TritonServer(example_repository(), model_control_mode='explicit', load_models=['add_sub']); s.start()\n"
            "with HTTPService({HTTPFrontend(s): bind_socket('127.0.0.1', 0)}) as svc:\n"
            "    print(json.loads(urllib.request.urlopen(f'http://127.0.0.1:{svc.ports[0]}/v2/models/add_sub').read())['name'])\n"
            "s.stop(); print('uvloop' in sys.modules and sys.modules['uvloop'] is not None)")
    out = subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True, timeout=60).stdout.split()
    assert out == ['add_sub', 'False'], out

def test_front_ends_import_no_backend_implementation():
    "Front ends talk to the core only: the metrics port serves models' families without importing pb_utils (which owns them)."
    for fe in FRONT_ENDS: assert not imports_of(fe) & BACKEND_IMPLEMENTATIONS, (fe, imports_of(fe))

def test_scale_out_sits_above_the_front_ends():
    "ray_serve may import the core, asgi and the HTTP front end; only the command line above it (`--ray`) imports it."
    for m in SCALE_OUT: assert imports_of(m) <= CORE | {'asgi', 'http_server'}, (m, imports_of(m))
    for p in PKG.glob('*.py'):
        if p.stem not in SCALE_OUT | COMPOSITION: assert not imports_of(p.stem) & SCALE_OUT, p.stem

def test_ray_serve_imports_without_ray():
    "The base install has no Ray: the module imports it only when a deployment is built."
    code = "import sys; sys.modules['ray'] = None; import triton_mini.ray_serve; print('ok')"
    assert subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout.split() == ['ok']

def test_the_metrics_rendering_has_no_http_in_it():
    "Server.metrics() of the in-process API renders Prometheus text without loading the HTTP plumbing or any front end."
    loaded = _modules_after('import triton_mini.metrics')
    assert not {m.split('.')[-1] for m in loaded} & (FRONT_ENDS | {'asgi'}), loaded
