"""Imported at start-up by every interpreter whose PYTHONPATH holds this folder (bench/echo_stub.py puts it there).
With HOP_ECHO=1, a stub answers the identity model without the Python backend: `Stub._run_one` returns the input as
OUTPUT0 (no InferenceRequest rebuilt, no pb_utils, no model): what is left of a request's trip through a stub is the
hop itself. An experiment's tool, never a server's."""
import os, sys

if os.environ.get('HOP_ECHO') == '1':
    import importlib.abc, importlib.util

    def _echo(module):
        from triton_mini.backend import InferenceResponse
        def _run_one(self, batch_id, wire_requests):
            return ('done', batch_id, [InferenceResponse({'OUTPUT0': w['inputs']['INPUT0']}) for w in wire_requests],
                    None, False, None)
        module.Stub._run_one = _run_one

    class _PatchOnImport(importlib.abc.MetaPathFinder):
        "Patch triton_mini.stub_process right after it is first imported."
        def find_spec(self, name, path, target=None):
            if name != 'triton_mini.stub_process': return None
            sys.meta_path.remove(self)
            spec = importlib.util.find_spec(name)
            run = spec.loader.exec_module
            def exec_module(module): run(module); _echo(module)
            spec.loader.exec_module = exec_module
            return spec

    sys.meta_path.insert(0, _PatchOnImport())
