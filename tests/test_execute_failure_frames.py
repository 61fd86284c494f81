"""The `At:` lines of a failed `execute` list every Python frame from the model down, libraries included, as real
Triton 2.51's stub does (pybind11's traceback): io's dlpack_empty_output on a CPU answers there with torch's
`torch/cuda/__init__.py(522): _lazy_init` above the model's `execute`; triton_mini listed the model's own file only
(05_scheduler's execute_failure for a BaseException, 04a_python_backend's _format_exception for the rest).
triton_mini's own frames (standing in for Triton's C++, which has none) stay out."""
import importlib.util
from types import SimpleNamespace

from triton_mini.scheduler import execute_failure

MODEL = '''import json
from triton_mini import pb_utils
def execute(requests): return json.loads("{")
def into_our_code(requests): return pb_utils.get_input_tensor_by_name(None, "X")
'''


def demo_model(tmp_path, module_name:str):
    "MODEL written as tmp_path/demo/1/model.py and imported: (the module, its path)."
    version = tmp_path / 'demo' / '1'
    version.mkdir(parents=True)
    (version / 'model.py').write_text(MODEL)
    spec = importlib.util.spec_from_file_location(module_name, version / 'model.py')
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module, version / 'model.py'


def failure(tmp_path, entry):
    module, path = demo_model(tmp_path, 'demo_frames_model')
    inst = SimpleNamespace(name='demo_0', args=SimpleNamespace(model_dir=str(tmp_path / 'demo'), model_version=1))
    try: getattr(module, entry)([])
    except Exception as e: return execute_failure(inst, e).message, path


def frames(message): return [line.strip() for line in message.split('\n\nAt:\n')[1].splitlines() if line.strip()]


def test_library_frames_are_listed_innermost_first(tmp_path):
    message, model = failure(tmp_path, 'execute')
    at = frames(message)
    assert [f.rsplit(': ', 1)[1] for f in at] == ['raw_decode', 'decode', 'loads', 'execute'], message
    assert at[-1] == f'{model}(3): execute' and at[0].split('(')[0].endswith('json/decoder.py')


def test_triton_minis_own_frames_are_not(tmp_path):
    message, model = failure(tmp_path, 'into_our_code')
    assert frames(message) == [f'{model}(4): into_our_code'], message


def test_the_python_backends_own_text_lists_them_too(tmp_path):
    "An Exception from execute is formatted by the Python backend itself (python_backend._format_exception): same rule."
    from triton_mini.python_backend import _format_exception
    module, path = demo_model(tmp_path, 'demo_frames_model2')
    for entry, want in (('execute', ['raw_decode', 'decode', 'loads', 'execute']), ('into_our_code', ['into_our_code'])):
        try: getattr(module, entry)([])
        except Exception as e: text = _format_exception(e, path)
        assert [f.rsplit(': ', 1)[1] for f in frames(text)] == want, text
