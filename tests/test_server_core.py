"""The server core's own edge cases (the layers below have their own test files)."""
import os, shutil, time
import numpy as np
import pytest

from triton_mini.cli import example_repository
from triton_mini.server import TritonServer
from triton_mini.tensors import TritonError


def test_a_request_that_raced_a_reload_goes_to_the_new_version(tmp_path):
    "A request that looked up a version just before it retired is queued on the version serving now."
    root = tmp_path / 'models'
    shutil.copytree(example_repository() / 'add_sub', root / 'add_sub')
    server = TritonServer(root, model_control_mode='explicit', load_models=['add_sub'])
    server.start()
    try:
        old = server.repository.get('add_sub')
        model_py = root / 'add_sub' / '1' / 'model.py'
        os.utime(model_py, (time.time() + 5, time.time() + 5))          # a change: the next load reloads
        server.load_model('add_sub')
        server.repository.wait_for_unloads()
        new = server.repository.get('add_sub')
        assert new is not old and old.scheduler._stopping
        real_get, calls = server.repository.get, []
        def stale_then_real(name, version=-1, namespace=None):          # the first lookup still sees the old version
            calls.append(version)
            return old if len(calls) == 1 else real_get(name, version, namespace)
        server.repository.get = stale_then_real
        x = np.ones((1, 4), np.float32)
        assert server.infer('add_sub', {'INPUT0': x, 'INPUT1': x})['OUTPUT0'].tolist() == [[2, 2, 2, 2]]
        assert calls == [-1, -1]
        server.repository.get = lambda name, version=-1, namespace=None: old   # a version asked for by number: no retry
        with pytest.raises(TritonError, match="has no available versions"):
            server.infer('add_sub', {'INPUT0': x, 'INPUT1': x}, model_version=1)
    finally: server.stop()
