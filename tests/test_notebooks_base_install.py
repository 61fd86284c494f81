"""Every notebook runs without the `llm` extra: 11_llm, executed as nbdev_test executes it (execnb, `#| slow`
cells skipped) in a Python where `import llama_cpp` fails, runs to the end; each cell marked `#| needs: llama_cpp`
prints why it is skipped, and every other cell (the config lesson, the GGUF writer and its tests) still runs."""
import json, re, subprocess, sys
from pathlib import Path

import nbformat
import pytest

NBS = Path(__file__).resolve().parents[1] / 'nbs'

# Runs one notebook the way nbdev_test does (nbdev.test.test_nb's CaptureShell and cell filter), with
# llama_cpp made unimportable, and prints each code cell's stdout (or the error) as JSON.
RUNNER = r'''
import json, sys
for m in sys.argv[2:] or ['llama_cpp']: sys.modules[m] = None
from pathlib import Path
from execnb.nbio import read_nb
from execnb.shell import CaptureShell
from nbdev.process import NBProcessor
from fastcore.xtras import working_directory
fn = Path(sys.argv[1])
nb = NBProcessor(fn, process=True).nb
def skip(cell):
    if cell.cell_type != 'code' or 'nbdev_export(' in cell.source: return True
    return 'slow' in (getattr(cell, 'directives_', {}) or {})
shell, out = CaptureShell(fn), []
with working_directory(fn.parent):
    for cell in nb.cells:
        if skip(cell): continue
        outputs = shell.run(cell.source)
        text = ''.join(''.join(o.get('text', '')) for o in outputs if o['output_type'] == 'stream')
        errors = [o['ename'] + ': ' + o['evalue'] for o in outputs if o['output_type'] == 'error']
        out.append({'source': cell.source, 'stdout': text, 'errors': errors})
        if errors: break
print(json.dumps(out))
'''


def run_without_llama_cpp(name, hidden=('llama_cpp',)):
    r = subprocess.run([sys.executable, '-c', RUNNER, str(NBS / f'{name}.ipynb'), *hidden], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.splitlines()[-1])


def notebooks_importing(module):
    "The notebooks whose code cells import `module`."
    found = []
    for path in sorted(NBS.glob('*.ipynb')):
        cells = nbformat.read(path, as_version=4).cells
        if any(f'import {module}' in c.source or f'from {module}' in c.source for c in cells if c.cell_type == 'code'):
            found.append(path.stem)
    return found


@pytest.mark.slow
def test_llm_notebook_runs_without_llama_cpp():
    cells = run_without_llama_cpp('11_llm')
    errors = [(c['source'][:200], c['errors']) for c in cells if c['errors']]
    assert not errors, errors
    needs = [c for c in cells if re.search(r'^#\| needs: llama_cpp$', c['source'], re.M)]
    assert len(needs) >= 8
    for c in needs:
        assert c['stdout'].startswith('skipped: this cell needs llama_cpp (') and 'pip install llama-cpp-python' in c['stdout'], c
    others = [c for c in cells if c not in needs]
    assert any('write_tiny_gguf(tmp' in c['source'] for c in others)       # the GGUF writer's tests ran
    assert not any(c['stdout'].startswith('skipped') for c in others)


def test_only_marked_notebooks_import_llama_cpp():
    "A notebook that imports llama_cpp must be the one whose cells are tested above (else it is untested here)."
    assert notebooks_importing('llama_cpp') == ['11_llm']


@pytest.mark.slow
def test_ray_serve_notebook_runs_without_ray():
    "12_ray_serve in the base install (no ray, no starlette): the replica's demo cells say why they are skipped."
    cells = run_without_llama_cpp('12_ray_serve', ('ray', 'starlette'))
    errors = [(c['source'][:200], c['errors']) for c in cells if c['errors']]
    assert not errors, errors
    needs = [c for c in cells if re.search(r'^#\| needs: starlette$', c['source'], re.M)]
    assert len(needs) >= 4 and all(c['stdout'].startswith('skipped: this cell needs starlette') for c in needs), needs


@pytest.mark.slow
def test_pytorch_notebook_runs_without_torch():
    "04e_pytorch_backend in the base install (no torch): the cells that need a TorchScript module say why they are skipped; the rest run."
    cells = run_without_llama_cpp('04e_pytorch_backend', ('torch',))
    errors = [(c['source'][:200], c['errors']) for c in cells if c['errors']]
    assert not errors, errors
    needs = [c for c in cells if re.search(r'^#\| needs: torch$', c['source'], re.M)]
    assert len(needs) >= 5 and all(c['stdout'].startswith('skipped: this cell needs torch') for c in needs), needs
    others = [c for c in cells if c not in needs]
    assert any('tensor_positions(' in c['source'] for c in others)          # the naming rules' cells ran


@pytest.mark.slow
def test_llm_tutorial_runs_without_llama_cpp():
    "Part 5 of the learning path in the base install: it says llama-cpp-python is missing, its LLM cells say why they are skipped, the config lesson runs."
    cells = run_without_llama_cpp('tutorial_5_llm')
    errors = [(c['source'][:200], c['errors']) for c in cells if c['errors']]
    assert not errors, errors
    needs = [c for c in cells if re.search(r'^#\| needs: llama_cpp$', c['source'], re.M)]
    assert len(needs) >= 8 and all(c['stdout'].startswith('skipped: this cell needs llama_cpp') for c in needs), needs
    others = [c for c in cells if c not in needs]
    assert any(c['stdout'].startswith('llama-cpp-python is not installed here') for c in others)
    assert any('GGUFReader(gguf_path)' in c['source'] for c in others)      # the stand-in GGUF is still read
