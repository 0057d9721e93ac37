import json, sys
from crosstune.tvm.tune_compare import pretrain_crossfeat
which = sys.argv[1]
if which == "autotvm":
    info = pretrain_crossfeat(["src/crosstune/data/local-cpu", "/work/runs/X86"], "local-avx512-2c", 8, 0, "/work/runs/M-autotvm")
else:  # every bundled Intel configuration, local-avx512-2c included (the Zen 4 CPU itself stays unseen)
    info = pretrain_crossfeat(["src/crosstune/data/local-cpu"], "no-such-config", 8, 0, "/work/runs/M-all4")
print(json.dumps(info))
open(f"/work/runs/pretrain-{which}.json", "w").write(json.dumps(info, indent=1))
