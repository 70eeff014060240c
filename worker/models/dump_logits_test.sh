#!/bin/bash
# dump_logits on stories260K against the float64 golden logits of
# tests/golden/stories260K.json (12 positions x 512): float32 agreement.
set -euo pipefail
BIN="$1"
OUT="${TEST_TMPDIR:-/tmp}/logits.npy"
IDS=$(/usr/bin/python3 -c "import json; print(','.join(map(str, json.load(open('tests/golden/stories260K.json'))['logits']['input_ids'])))")
"$BIN" --model models/stories260K --ids "$IDS" --out "$OUT" | tee "${TEST_TMPDIR:-/tmp}/shape.json"
grep -q '"tokens": 12, "vocab": 512, "architecture": "LlamaForCausalLM"' "${TEST_TMPDIR:-/tmp}/shape.json"
/usr/bin/python3 - "$OUT" <<'PY'
import json, sys
import numpy as np
got = np.load(sys.argv[1])
want = np.array(json.load(open("tests/golden/stories260K.json"))["logits"]["values"])
assert got.dtype == np.float32 and got.shape == want.shape, (got.dtype, got.shape)
# float32 through 5 blocks of width 64: about 1e-5 of the logits' scale.
err = np.abs(got - want).max() / np.abs(want).max()
print(f"max |quantd - golden| / max |golden| = {err:.3e}")
assert err < 1e-4, err
PY
# Bad input is refused with a usage line, not a crash.
if "$BIN" --model models/stories260K --ids 1,x --out "$OUT" 2>/dev/null; then exit 1; fi
if "$BIN" --model /nonexistent --ids 1 --out "$OUT" 2>/dev/null; then exit 1; fi
echo PASS
