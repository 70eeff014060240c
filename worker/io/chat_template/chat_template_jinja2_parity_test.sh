#!/usr/bin/env bash
# Renders every testdata template over every testdata context with the C++
# engine and with jinja2 (jinja2_render.py, /usr/bin/python3 whose
# python3-jinja2 is the reference) and asserts byte-identical output, or
# that both fail (raise_exception, undefined, type errors).
set -euo pipefail
engine="$1"
reference="$2"
dir="$(dirname "$reference")/testdata"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
pairs=0
failures=0
both_failed=0
for t in "$dir"/*.jinja; do
  for c in "$dir"/contexts/*.json; do
    pairs=$((pairs + 1))
    set +e
    "$engine" "$t" "$c" >"$tmp/cc.out" 2>"$tmp/cc.err"
    cc_rc=$?
    /usr/bin/python3 "$reference" "$t" "$c" >"$tmp/py.out" 2>"$tmp/py.err"
    py_rc=$?
    set -e
    name="$(basename "$t") x $(basename "$c")"
    if [[ $cc_rc -ne $py_rc ]]; then
      echo "FAIL $name: engine exit $cc_rc, jinja2 exit $py_rc"
      cat "$tmp/cc.err" "$tmp/py.err"
      failures=$((failures + 1))
    elif [[ $cc_rc -ne 0 ]]; then
      both_failed=$((both_failed + 1))
      echo "both failed: $name: $(head -c 200 "$tmp/py.err")"
      # raise_exception's message must reach the engine's Status too.
      if grep -q '^TemplateError: ' "$tmp/py.err"; then
        msg="$(sed -n 's/^TemplateError: //p' "$tmp/py.err" | head -1)"
        if ! grep -qF "template raised an exception: $msg" "$tmp/cc.err"; then
          echo "FAIL $name: engine error lacks the raise_exception message: $(cat "$tmp/cc.err")"
          failures=$((failures + 1))
        fi
      fi
    elif ! cmp -s "$tmp/cc.out" "$tmp/py.out"; then
      echo "FAIL $name: output differs"
      diff <(od -c "$tmp/py.out") <(od -c "$tmp/cc.out") | head -20 || true
      failures=$((failures + 1))
    fi
  done
done
echo "$pairs pairs, $failures mismatches, $both_failed failed on both sides"

# Short snippets, one construct each, over the tool-call conversation;
# jinja2 renders them all in one process.
snippets=0
for s in "$dir"/snippets/*.txt; do
  out="$tmp/$(basename "$s" .txt)"
  mkdir -p "$out"
  /usr/bin/python3 "$reference" --snippets "$s" "$dir/contexts/c3_tools.json" "$out"
  for t in "$out"/*.jinja; do
    n="${t%.jinja}"
    snippets=$((snippets + 1))
    set +e
    "$engine" "$t" "$dir/contexts/c3_tools.json" >"$n.cc" 2>"$n.cc_err"
    cc_rc=$?
    set -e
    if [[ $cc_rc -ne $(cat "$n.rc") ]]; then
      echo "FAIL $(basename "$s") snippet $(basename "$n"): engine exit $cc_rc, jinja2 exit $(cat "$n.rc")"
      cat "$t"; echo; cat "$n.cc_err" "$n.out"; echo
      failures=$((failures + 1))
    elif [[ $cc_rc -eq 0 ]] && ! cmp -s "$n.cc" "$n.out"; then
      echo "FAIL $(basename "$s") snippet $(basename "$n"): output differs"
      cat "$t"; echo; echo "jinja2: $(cat "$n.out")"; echo "engine: $(cat "$n.cc")"
      failures=$((failures + 1))
    fi
  done
done
echo "$snippets snippets; $failures mismatches in all"
[[ $failures -eq 0 && $pairs -ge 40 && $snippets -ge 100 ]]
