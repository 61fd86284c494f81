#!/usr/bin/env python
"""triton-mini with the stub instances' `pipeline_depth` set from $PIPELINE_DEPTH (1: one batch per hop, as before
the fast path) and, if $PYTHON_BACKEND_MODE is set, that mode (it overrides --mini-flags: bench/run.py can then put
the thread mode next to the process mode). A `--mini-launcher` / `--exp-launcher` for bench/run.py and served_hop.py."""
import os, sys
from triton_mini.stub_process import StubModelInstance
from triton_mini.cli import main

StubModelInstance.pipeline_depth = int(os.environ.get('PIPELINE_DEPTH', '1'))
mode = os.environ.get('PYTHON_BACKEND_MODE')
sys.exit(main(sys.argv[1:] + ([f'--python-backend-mode={mode}'] if mode else [])))
