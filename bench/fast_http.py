#!/usr/bin/env python
"""triton-mini with the HTTP front end's fast path for a plain /infer on (TRITON_MINI_HTTP_FAST=1, 07a_asgi and
08_http appendices): a `--exp-launcher` for bench/run.py, to put it next to the default in one run."""
import os, sys
os.environ['TRITON_MINI_HTTP_FAST'] = '1'
from triton_mini.cli import main

sys.exit(main(sys.argv[1:]))
