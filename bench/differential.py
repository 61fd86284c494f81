"""What the stateful differential fuzzers (bench/fuzz_repository_vs_triton.py, bench/fuzz_shm_vs_triton.py) print:
the first differences in step order, then the differences grouped by (operation, Triton's status, triton-mini's
status), one example each."""
import json


def _request(x:dict) -> str:
    return f'{x["method"]} {x["path"]} ' + (json.dumps(x['body'])[:300] if x['body'] is not None else '')


def _answers(x:dict, width:int):
    print('   Triton: ' + x['triton'].replace('\n', ' ')[:width])
    print('   mini:   ' + x['triton_mini'].replace('\n', ' ')[:width])


def report(rows:list, groups:dict, steps:int, same:int, first:int=5, show:int=30):
    "rows: one dict per differing step (step, method, path, body, triton, triton_mini); groups: (op, status, status) -> steps."
    print(f'{steps} steps, {same} identical, {len(rows)} different')
    for x in rows[:first]:
        print(f'\nstep {x["step"]}: {_request(x)}')
        _answers(x, 600)
    print('\nGrouped:')
    by_step = {x['step']: x for x in rows}
    for (op, theirs, ours), at in sorted(groups.items(), key=lambda kv: -len(kv[1]))[:show]:
        x = by_step[at[0]]
        print(f'\n{len(at):4d}  {op:14s} Triton {theirs} / triton-mini {ours}   (step {x["step"]}: {_request(x)})')
        _answers(x, 400)
