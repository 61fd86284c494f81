"""Running one of Triton's QA scripts (qa/L0_*/test.sh) whole against triton-mini, as the QA container runs it: what
tests/test_rate_limiter_qa.py, test_grpc_state_cleanup_qa.py, test_decoupled_qa.py, test_request_cancellation_qa.py and
test_parameters_qa.py share.

The scripts are NVIDIA's, read at test time from a git directory of triton-inference-server/server
(`$TRITON_SERVER_REPO`, tag v2.51.0, see tests/triton_python_qa.py) and never copied into the project. The container
has Triton at $TRITON_DIR (bin/tritonserver, backends/); here `$TRITON_DIR/bin/tritonserver` is a script running
`python -m triton_mini --backend-directory=$TRITON_DIR/backends`, and backends/ holds Triton's C++ QA test backends
ported as Python-based backends (tests/qa_backends)."""
from __future__ import annotations

import os, shutil, signal, subprocess, sys
from pathlib import Path

import pytest

import triton_python_qa as pyqa
from triton_servers import popen, skip_or_fail

QA_BACKENDS = Path(__file__).parent / 'qa_backends'
# QA that CI's 90 minutes do not hold (yet): run only with TRITON_MINI_LONG_QA=1, and .ci/run names each one it leaves out
LONG_QA = os.environ.get('TRITON_MINI_LONG_QA') == '1'


def long_qa(why:str):
    "Mark a QA test as run only with TRITON_MINI_LONG_QA=1, for `why`."
    return pytest.mark.skipif(not LONG_QA, reason=f'{why}; TRITON_MINI_LONG_QA=1 runs it (.ci/run says so)')


# L0_request_cancellation, L0_client_timeout and L0_shared_memory (about 7 minutes on the default ports together) pass
# on main (2026-12-07), and wait for a CI log that shows the room: CI took 79 of its 90 minutes at the last landing.
ci_budget = long_qa("CI's budget: this QA joins CI once a CI log shows room for it (79 of 90 minutes at the last landing)")


def extract(root:Path, *paths:str):
    "The server repository's `paths` at Triton 2.51's tag, under `root` (the test skips, or fails in CI, without it)."
    if why := pyqa.missing(): skip_or_fail('python_qa', why)
    tar = subprocess.run(['git', f'--git-dir={pyqa.SERVER_REPO}', 'archive', '--format=tar', pyqa.TAG, *paths],
                         capture_output=True, check=True).stdout
    subprocess.run(['tar', '-x', '-C', str(root)], input=tar, check=True)


def triton_dir(root:Path) -> Path:
    "`root`/tritonserver as the container's $TRITON_DIR: bin/tritonserver runs triton-mini, backends/ the QA backends."
    triton = root / 'tritonserver'
    shutil.copytree(QA_BACKENDS, triton / 'backends')
    server = triton / 'bin' / 'tritonserver'
    server.parent.mkdir(parents=True)
    server.write_text(f'#!/bin/sh\nexec {sys.executable} -m triton_mini --backend-directory={triton / "backends"} "$@"\n')
    server.chmod(0o755)
    return triton


def stage(root:Path, qa:str) -> Path:
    "qa/common and the QA folder `qa` (e.g. 'qa/L0_parameters') under `root`, with the container's TRITON_DIR; that folder."
    extract(root, 'qa/common', qa)
    triton_dir(root)
    return root / qa


def environment(root:Path, **extra:str) -> dict:
    "test.sh's environment: the container's version and $TRITON_DIR, this interpreter (with tritonclient) as `python`."
    return {**os.environ, 'NVIDIA_TRITON_SERVER_VERSION': '24.10', 'TRITON_DIR': str(root / 'tritonserver'),
            'PATH': f'{Path(sys.executable).parent}{os.pathsep}{os.environ["PATH"]}',
            'PYTHONPATH': os.pathsep.join(p for p in (str(Path(__file__).parents[1]), os.environ.get('PYTHONPATH')) if p),
            **extra}


def run_bash(args:list, where:Path, env:dict, timeout:float) -> tuple:
    "`bash *args` in `where` (a guarded process: it dies with the test); (returncode, output), killed at `timeout`."
    run = popen(['bash', *args], cwd=where, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try: out, _ = run.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL); out, _ = run.communicate()
    return run.returncode, out


def container_server(script:str) -> str:
    "test.sh with its container path `SERVER=/opt/tritonserver/bin/tritonserver` made `${TRITON_DIR}/bin/tritonserver`."
    line = 'SERVER=/opt/tritonserver/bin/tritonserver\n'
    assert line in script, 'test.sh no longer names the container path of its server'
    return script.replace(line, 'SERVER=${TRITON_DIR}/bin/tritonserver\n')
