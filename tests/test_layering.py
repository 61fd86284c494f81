"""The layering contract, checked (issue 17). More contracts (import-linter) join this file as the seams land."""
import subprocess, sys

def _modules_after(stmt):
    "The triton_mini modules a fresh interpreter has loaded after running `stmt`."
    code = f"{stmt}; import sys; print(' '.join(sorted(m for m in sys.modules if m.startswith('triton_mini'))))"
    return subprocess.run([sys.executable, '-c', code], check=True, capture_output=True, text=True).stdout.split()

def test_errors_is_the_bottom_of_the_core():
    "triton_mini.errors imports nothing of triton_mini, so every layer may import it."
    assert [m for m in _modules_after('import triton_mini.errors') if m not in ('triton_mini', 'triton_mini.errors')] == []

def test_one_error_class_and_one_verbose_level():
    "tensors re-exports the core's error; pb_utils and the command line use the core's VERBOSE level."
    from triton_mini import errors, tensors, pb_utils, cli
    assert tensors.TritonError is errors.TritonError and tensors.request_prefix is errors.request_prefix
    assert pb_utils.VERBOSE is errors.VERBOSE and cli.VERBOSE is errors.VERBOSE
