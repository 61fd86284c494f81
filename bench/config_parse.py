"""Config parsing speed: parse, autofill and to_json for every valid config in tests/configs (best of 5 rounds).

    python bench/config_parse.py            # prints µs per file for each stage, and the slowest files

Speed is a benchmark, not a unit test: the notebook 00b only prints one figure, and nothing asserts on time."""
import timeit, sys
from pathlib import Path
from triton_mini.config_parser import parse_config
from triton_mini.model_config_utils import autofill_config

ROOT = Path(__file__).resolve().parents[1]

def best(fn, number=20, repeat=5) -> float:
    "Best per-call time in seconds (the least disturbed round on a shared machine)."
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number

def main():
    files = sorted((ROOT / 'tests' / 'configs' / 'valid').glob('*.pbtxt'))
    rows = []
    for f in files:
        text = f.read_bytes()
        try: cfg = parse_config(text)
        except Exception: continue
        name = cfg.name or f.stem
        try: autofill_config(parse_config(text), name); fill = best(lambda: autofill_config(parse_config(text), name)) - best(lambda: parse_config(text))
        except Exception: fill = float('nan')
        rows.append((f.stem, best(lambda: parse_config(text)), fill, best(lambda: cfg.to_json())))
    med = lambda xs: sorted(xs)[len(xs) // 2]
    print(f"{len(rows)} configs: median parse {med([r[1] for r in rows])*1e6:.0f} µs, "
          f"autofill {med([r[2] for r in rows])*1e6:.0f} µs, to_json {med([r[3] for r in rows])*1e6:.0f} µs")
    for name, p, a, j in sorted(rows, key=lambda r: -r[1])[:5]: print(f"  slowest: {name}: parse {p*1e6:.0f} µs")

if __name__ == '__main__': sys.exit(main())
