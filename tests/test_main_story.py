"""Issue 43: a layer notebook's main story explains every name it calls. Each appendix-only name (a module-level def,
class, @patch method or constant that only the appendix defines) used by a main-story code cell must be named, in
backticks, in the main story's prose: one line on what it does and why, with a link to the appendix section that
defines it. `python tools/main_story.py NAME` lists the names and which are unexplained."""
import json, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / 'tools'))
import main_story  # noqa: E402

# Not done yet: the work left. Remove a notebook from here once its main story names what it uses.
NOT_YET = set()


def test_there_are_layer_notebooks():
    names = main_story.layer_notebooks()
    assert {'05_scheduler', '08_http', '02_model_repository', '04_pb_utils', '08a_grpc'} <= set(names)
    assert not any(n.startswith(('tutorial_', 'index')) for n in names)
    assert NOT_YET <= set(names), f'not layer notebooks (any more): {NOT_YET - set(names)}'


@pytest.mark.parametrize('nb', [n for n in main_story.layer_notebooks() if n not in NOT_YET])
def test_main_story_names_what_it_calls(nb):
    found = main_story.check(json.loads((main_story.NBS / f'{nb}.ipynb').read_text()), main_story.NOT_USES.get(nb, ()))
    unexplained = {k: v for k, v in found.items() if not v['explained']}
    assert not unexplained, (f'{nb}: its main story calls names only the appendix defines, and its prose does not name them '
                             f'(say in one line what each does, in backticks, linking its appendix section): '
                             + '; '.join(f"`{k}` (defined in cell {v['defined']}, used in {v['used']})" for k, v in unexplained.items()))


def test_not_yet_is_not_stale():
    "A notebook of NOT_YET whose main story already names everything should leave the list."
    done = [nb for nb in sorted(NOT_YET)
            if all(v['explained'] for v in main_story.check(json.loads((main_story.NBS / f'{nb}.ipynb').read_text()),
                                                             main_story.NOT_USES.get(nb, ())).values())]
    assert not done, f'take these out of NOT_YET: {done}'


def _nb(*cells):
    "A notebook dict from (cell_type, source) pairs."
    return {'cells': [{'cell_type': t, 'source': s, 'metadata': {}} for t, s in cells]}


def _story(prose:str):
    return _nb(('markdown', '# Story\n' + prose),
               ('code', "#| export\ndef run(batch):\n    for r in batch: r.done = True\n    return _helper(batch)"),
               ('code', 'x = run([])\nfor one in [1]: pass'),
               ('markdown', '## Appendix: helpers'),
               ('code', "#| export\ndef _helper(batch):\n    return batch\nLIMIT = 3\ndef one(): pass\ndef x(): pass"))


def test_checker_fails_a_story_that_does_not_name_its_helper():
    found = main_story.check(_story('Runs a batch.'))
    assert list(found) == ['_helper'], found                     # `one`, `x`: names the main story binds itself
    assert found['_helper'] == {'defined': 4, 'used': [1], 'explained': False}


def test_checker_passes_once_the_prose_names_it():
    found = main_story.check(_story('`_helper` answers the batch ([Appendix: helpers](#appendix-helpers)).'))
    assert found['_helper']['explained']
    assert not main_story.check(_story('Runs a batch.'), ignore={'_helper'})


def test_checker_reads_attributes_and_skips_code_fences():
    nb = _nb(('markdown', '```\n`_more` in a fence is code, not prose\n```'), ('code', 'self._more(inst)'),
             ('markdown', '## Hardening'), ('code', '@patch\ndef _more(self:S): pass'))
    assert main_story.check(nb) == {'_more': {'defined': 3, 'used': [1], 'explained': False}}
    assert main_story.check(_nb(('code', '_helper()'))) == {}   # no appendix: nothing to check
