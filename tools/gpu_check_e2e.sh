# gpu_check_e2e.sh: part 5 of tools/gpu_check.sh, the end-to-end jobs at
# Llama-3-8B shapes (or the small rehearsal shapes). Sourced by it, never
# run alone: it uses gpu_check.sh's settings, budget and report helpers.
# shellcheck shell=bash

# --- 5. End to end at Llama-3-8B shapes ----------------------------------------
# Peak GPU memory and utilization are sampled from nvidia-smi every 0.2 s
# (all processes on the device: quantd-quantize is the only one); peak host
# RSS is the process's VmHWM, which quantd-quantize prints as it exits.
# tools/gpu_check_e2e.py turns a job's files into the report's lines.
E2E_ROWS="$LOG/e2e-rows.md"
# The page cache, dropped before the disk read and the RTN job so that
# both read the checkpoint from the disk. Prints what it did.
drop_cache() {
  if [ "$DROP_CACHE" = 0 ]; then
    echo "cache NOT dropped (--no-drop-cache)"
  elif [ "$(id -u)" != 0 ]; then
    echo "cache NOT dropped (not root)"
  elif sync && { echo 3 >/proc/sys/vm/drop_caches; } 2>/dev/null; then
    echo "cache dropped"
  else
    echo "cache NOT dropped (/proc/sys/vm/drop_caches not writable)"
  fi
}
# Echoes the job log's block lines (and the quantd-quantize:, GPTQ and stage
# lines) to stdout as they come, prefixed "    ", each also to the stamps
# file with the time it was seen. Ends when process $3 has.
follow_log() {  # log, stamps, pid
  local line part parts
  tail -n +1 -s 0.2 -F --pid="$3" "$1" 2>/dev/null |
    while IFS= read -r line; do
      # The CLI redraws its progress with '\r' on a terminal.
      IFS=$'\r' read -ra parts <<<"$line"
      for part in "${parts[@]}"; do
        case "$part" in
          "block "*|quantd-quantize:*|*GPTQ*|*stage*)
            echo "${EPOCHREALTIME:-$(date +%s.%N)} $part" >>"$2"
            echo "    $part" ;;
        esac
      done
    done
}
# One e2e job: under timeout with the budget's reserve, its block lines
# echoed as they come, nvidia-smi sampling beside it; then its summary
# lines, and its table row into $E2E_ROWS.
run_e2e() {  # label, samples, [--disk-bytes B --disk-seconds S --disk-note T] [--formula F] --, quantization args...
  local label="$1" samples="$2"; shift 2
  local extra=()
  while [ "$1" != -- ]; do extra+=("$1"); shift; done
  shift
  local out="$LOG/e2e-$label" smi="" start end rc cap status job_pid follow_pid smi_pid=""
  echo
  echo "#### $label: $samples x 2048 calibration tokens, $E2E_DEVICE"
  echo
  if ! budget_ok "$MIN_E2E_JOB"; then
    skipped_budget "$MIN_E2E_JOB"
    echo "| $label | $samples x 2048 | skipped: budget | | |" >>"$E2E_ROWS"
    return
  fi
  rm -rf "$out" "$out.stamps"
  : >"$out.log"
  if [ "$E2E_DEVICE" != cpu ] && command -v nvidia-smi >/dev/null 2>&1; then
    smi="$LOG/e2e-$label.smi"
    local idx="${E2E_DEVICE#cuda:}"
    [[ "$idx" =~ ^[0-9]+$ ]] || idx=0
    TZ=UTC nvidia-smi -i "$idx" --query-gpu=timestamp,utilization.gpu,memory.used \
      --format=csv,noheader,nounits -lms 200 >"$smi" 2>/dev/null &
    smi_pid=$!
    BG_PIDS+=("$smi_pid")
  fi
  cap=$(budget_cap 0)
  start=${EPOCHREALTIME:-$(date +%s.%N)}
  timeout --signal=TERM --kill-after=15 "$cap" \
    "$QUANTIZE" --model "$CKPT" --calib "$ROOT/tests/data/tinyshakespeare.txt" --calib-samples "$samples" \
    --calib-seq-len 2048 $([[ " $* " == *" --eval "* ]] || echo --no-eval) --format hf-quark \
    --output "$out" --data-dir "$LOG/data" \
    --device "$E2E_DEVICE" "$@" >"$out.log" 2>&1 &
  job_pid=$!
  BG_PIDS+=("$job_pid")
  follow_log "$out.log" "$out.stamps" "$job_pid" &
  follow_pid=$!
  wait "$job_pid"
  rc=$?
  end=${EPOCHREALTIME:-$(date +%s.%N)}
  # tail ends within its 0.2 s poll of the job's end, after a last read.
  wait "$follow_pid" 2>/dev/null
  [ -n "$smi_pid" ] && { kill "$smi_pid" 2>/dev/null; wait "$smi_pid" 2>/dev/null; }
  if [ "$rc" = 0 ]; then
    status=ok
  elif stopped_by_budget "$rc" "$cap" 0; then
    status=stopped
    # What the stopped job leaves: its scratch (blocks, activations) and
    # a partial output.
    rm -rf "$out" "$LOG/data/scratch"
  else
    status=failed
    FAILED=1
  fi
  echo
  python3 "$ROOT/tools/gpu_check_e2e.py" job --label "$label" --samples "$samples" --log "$out.log" \
    --stamps "$out.stamps" --smi "$smi" --start "$start" --end "$end" --status "$status" --rc "$rc" \
    --blocks "$E2E_BLOCKS" --of 32 --device "$E2E_DEVICE" --row-file "$E2E_ROWS" "${extra[@]}" ||
    { echo "(gpu_check_e2e.py failed on $out.log)"; FAILED=1; }
  [ "$status" = failed ] && show_crash "$out.log"
}
if [ "$E2E" = 1 ]; then
  echo
  if [ "$E2E_SHAPE" = 8b ]; then
    echo "### End to end, Llama-3-8B shapes (random bf16 weights, $E2E_BLOCKS of its 32 blocks), W4 uint4 asym g128, $E2E_DEVICE"
  else
    echo "### End to end, small shapes (hidden 256, random bf16 weights; a rehearsal: $E2E_BLOCKS of 32 blocks), W4 uint4 asym g128, $E2E_DEVICE"
  fi
  echo
  wait_for_checkpoint
  if [ "$E2E_OK" != 1 ]; then
    echo "skipped: ${E2E_WHY}"
  else
    if [ -e "$LOG/make_random_checkpoint.seconds" ]; then
      echo "checkpoint: $(du -sh "$CKPT" | cut -f1) written in $(cat "$LOG/make_random_checkpoint.seconds") s ($CKPT)"
    else
      echo "checkpoint: $(du -sh "$CKPT" | cut -f1), written by an earlier run ($CKPT)"
    fi
    rm -f "$E2E_ROWS"
    # The disk's own read bandwidth, from a cold cache, before the RTN job
    # (before the GPTQ job when there is no RTN job), for its comparison.
    DISK_ARGS=()
    measure_disk() {
      local note cap t0 t1 bytes rc secs
      budget_ok "$MIN_E2E_JOB" || return 0
      bytes=$(stat -c %s "$CKPT"/*.safetensors | awk '{s += $1} END {print s}')
      note="$(drop_cache)"
      cap=$(budget_cap 0)
      t0=${EPOCHREALTIME:-$(date +%s.%N)}
      timeout "$cap" cat "$CKPT"/*.safetensors >/dev/null
      rc=$?
      t1=${EPOCHREALTIME:-$(date +%s.%N)}
      echo
      if [ "$rc" != 0 ]; then echo "disk read: stopped by --budget-s"; return 0; fi
      secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN {d = b - a; if (d < 1e-6) d = 1e-6; printf "%.4f", d}')
      local what="a cold read"
      [ "$note" = "cache dropped" ] || what="the page cache may have served part of it"
      awk -v b="$bytes" -v s="$secs" -v n="$note" -v w="$what" 'BEGIN {
        printf "disk read: %.3f GB of *.safetensors in %s s, %.2f GB/s; %s: %s\n", b / 1e9, s, b / 1e9 / s, n, w }'
      DISK_ARGS=(--disk-bytes "$bytes" --disk-seconds "$secs" --disk-note "$note")
    }
    if [ "$E2E_GPTQ_SAMPLES" -gt 0 ]; then
      cat >"$LOG/w4_g128_gptq.json" <<'JSON'
{"global_quant_config": {"weight": {"dtype": "uint4", "qscheme": "per_group", "ch_axis": -1,
  "group_size": 128, "symmetric": false, "is_dynamic": false}},
 "exclude": ["lm_head"], "algo_config": [{"name": "gptq", "damp_percent": 0.01}]}
JSON
      if [ "$E2E_SAMPLES" = 0 ]; then measure_disk; fi
    fi
    # One GPTQ job per calibration compute dtype: the first, then the
    # offload and RTN jobs, then the others (a budget cut falls on those).
    gptq_label() { [ "$1" = float32 ] && echo gptq || echo gptq-bf16; }
    read -r -a CALIB_DTYPES <<<"${E2E_CALIB_DTYPES//,/ }"
    if [ "$E2E_GPTQ_SAMPLES" -gt 0 ]; then
      run_e2e "$(gptq_label "${CALIB_DTYPES[0]}")" "$E2E_GPTQ_SAMPLES" "${DISK_ARGS[@]}" -- \
        --config "$LOG/w4_g128_gptq.json" --calib-dtype "${CALIB_DTYPES[0]}" \
        --activation-offload "$E2E_ACTIVATIONS"
      if [ "$E2E_OFFLOAD" = 1 ]; then
        # ModelOptions::max_tokens_per_chunk: 8192 tokens per sub-batch.
        run_e2e "$(gptq_label "${CALIB_DTYPES[0]}")-offload" "$E2E_GPTQ_SAMPLES" \
          --formula "$SHAPE_FORMULA,8192" -- \
          --config "$LOG/w4_g128_gptq.json" --activation-offload host --calib-dtype "${CALIB_DTYPES[0]}"
      fi
    fi
    if [ "$E2E_SAMPLES" -gt 0 ]; then
      if budget_ok "$MIN_E2E_JOB"; then
        measure_disk
        echo
        echo "before the RTN job: $(drop_cache)"
      fi
      EVAL_ARGS=()
      if [ "$E2E_EVAL_WINDOWS" -gt 0 ]; then
        EVAL_ARGS=(--eval "$ROOT/tests/data/tinyshakespeare.txt" --n-ctx 2048 --eval-windows "$E2E_EVAL_WINDOWS")
      fi
      run_e2e rtn "$E2E_SAMPLES" "${DISK_ARGS[@]}" -- --scheme w_uint4_per_group_asym --group-size 128 \
        --activation-offload "$E2E_ACTIVATIONS" "${EVAL_ARGS[@]}"
    fi
    if [ "$E2E_GPTQ_SAMPLES" -gt 0 ]; then
      for d in "${CALIB_DTYPES[@]:1}"; do
        run_e2e "$(gptq_label "$d")" "$E2E_GPTQ_SAMPLES" -- --config "$LOG/w4_g128_gptq.json" \
          --calib-dtype "$d" --activation-offload "$E2E_ACTIVATIONS"
      done
    fi
    echo
    echo "| job | calibration | wall s | peak GPU GiB (device) | peak host RSS GiB |"
    echo "|---|---|---|---|---|"
    cat "$E2E_ROWS" 2>/dev/null
  fi
fi
