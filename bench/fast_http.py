#!/usr/bin/env python
"""triton-mini with the HTTP front end's fast path OFF (TRITON_MINI_HTTP_FAST=0: every request through uvicorn's ASGI
cycle, 07a_asgi and 08_http appendices): a `--exp-launcher` for bench/run.py, to put the ASGI path next to the
default (the fast path, on since 2026-12-05) in one run."""
import os, sys
os.environ['TRITON_MINI_HTTP_FAST'] = '0'
from triton_mini.cli import main

sys.exit(main(sys.argv[1:]))
