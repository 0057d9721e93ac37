"""What of one machine's programs another dataset's programs can teach: the share of the target's token
occurrences whose primitive (kind), and whose primitive with its string category (kind, cat), also occur
in each source machine's programs, and the share of the target's records whose operator kind a source has.
Data from another format (AutoTVM knobs against MetaSchedule traces) shares the vocabulary's kinds but
not necessarily what follows them; this says how much before any model is trained.

    crosstune import ../shared/data/droplet-autotvm/i7-3770 --hardware i7-3770 --codegen-isa x86-64 --out X86
    python benchmarks/vocab_overlap.py src/crosstune/data/local-cpu X86 --target local-avx512-2c --json OUT.json
"""

from __future__ import annotations

import argparse
from collections import Counter

import numpy as np

from crosstune.dataset import Dataset, load_dataset
from crosstune.errors import CrosstuneError
from crosstune.records.operators import OP_KINDS
from crosstune.reporting import write_json
from crosstune.tokens import CATEGORIES, KINDS


def token_counts(ds: Dataset, hardware: int) -> tuple[Counter, Counter, Counter]:
    """(kind, cat) token occurrences, kind occurrences and operator kinds of one machine's records."""
    mine = ds.hardware == hardware
    token_mine = np.repeat(mine, ds.seq_len)
    kinds, cats = ds.kinds[token_mine].astype(np.int64), ds.cats[token_mine].astype(np.int64)
    pairs = Counter(zip(kinds.tolist(), cats.tolist()))
    return pairs, Counter(kinds.tolist()), Counter(ds.op_kind[mine].tolist())


def shared_share(target: Counter, source: Counter) -> float:
    """Share of the target's occurrences whose key the source has at all."""
    total = sum(target.values())
    return sum(n for key, n in target.items() if key in source) / total if total else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("datasets", nargs="+")
    parser.add_argument("--target", required=True, help="the machine whose programs are to be scored")
    parser.add_argument("--json")
    args = parser.parse_args()
    try:
        ds = load_dataset(args.datasets)
    except CrosstuneError as err:  # a missing or foreign folder: one line, no traceback
        parser.error(str(err))
    if args.target not in ds.hardware_names:
        parser.error(f"{args.target} is in none of the datasets (they hold {', '.join(ds.hardware_names)})")
    counts = {name: token_counts(ds, i) for i, name in enumerate(ds.hardware_names)}
    t_pairs, t_kinds, t_ops = counts[args.target]
    rows = {}
    print(f"target {args.target}: {sum(t_ops.values()):,} records, {sum(t_kinds.values()):,} tokens, "
          f"{len(t_pairs)} (kind, cat) pairs")
    print("source | records | kinds shared | (kind, cat) shared | operator kinds shared | target pairs it lacks")
    for name, (pairs, kinds, ops) in counts.items():
        if name == args.target:
            continue
        missing = Counter({p: n for p, n in t_pairs.items() if p not in pairs}).most_common(4)
        rows[name] = {
            "records": sum(ops.values()),
            "kinds_shared": shared_share(t_kinds, kinds),
            "kind_cat_shared": shared_share(t_pairs, pairs),
            "op_kinds_shared": shared_share(t_ops, ops),
            "target_op_kinds": {OP_KINDS[k]: n for k, n in t_ops.items()},
            "source_op_kinds": {OP_KINDS[k]: n for k, n in ops.items()},
            "largest_missing_pairs": [[KINDS[k], CATEGORIES[c], n] for (k, c), n in missing],
        }
        lacks = ", ".join(f"{KINDS[k]}/{CATEGORIES[c]} ({n:,})" for (k, c), n in missing) or "-"
        r = rows[name]
        print(f"{name} | {r['records']:,} | {r['kinds_shared']:.3f} | {r['kind_cat_shared']:.3f} | "
              f"{r['op_kinds_shared']:.3f} | {lacks}")
    if args.json:
        write_json(args.json, {"target": args.target, "datasets": args.datasets, "sources": rows})


if __name__ == "__main__":
    main()
