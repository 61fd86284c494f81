"The package's public face: the first names a user needs, from `triton_mini` itself, without importing the world."
import subprocess, sys, json
import pytest
import triton_mini

@pytest.mark.parametrize('name', sorted(triton_mini._PUBLIC))
def test_public_name_is_the_layer_s_object(name):
    import importlib
    module = importlib.import_module(f'triton_mini.{triton_mini._PUBLIC[name]}')
    assert getattr(triton_mini, name) is getattr(module, name)
    assert name in triton_mini.__all__ and name in dir(triton_mini)

def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchThing'"): triton_mini.NoSuchThing

def test_import_triton_mini_loads_no_front_end_nor_heavy_dependency():
    code = ("import sys, json, triton_mini; print(json.dumps(sorted(m for m in sys.modules "
            "if m.split('.')[0] in ('triton_mini', 'onnxruntime', 'grpc', 'uvicorn', 'tritonclient', 'numpy'))))")
    loaded = json.loads(subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout)
    assert loaded == ['triton_mini'], loaded

def test_readme_style_import_works_in_a_fresh_interpreter():
    code = "from triton_mini import TritonServer, example_repository, __version__; print(TritonServer.__module__, __version__)"
    out = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == 'triton_mini.server' and out[1] == triton_mini.__version__
