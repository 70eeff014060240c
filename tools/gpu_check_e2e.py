#!/usr/bin/env python3
"""The end-to-end figures of tools/gpu_check.sh, from one job's files.

  gpu_check_e2e.py job --label L --samples S --log F --stamps F [--smi F]
      --start T --end T --status ok|stopped|failed --blocks N --row-file F
      [--of 32] [--device D] [--disk-bytes B --disk-seconds S --disk-note TEXT]
      [--formula HIDDEN,INTERMEDIATE,HEADS,KV_HEADS,TOKENS_PER_SUB_BATCH]

prints the job's markdown lines (blocks, extrapolation, GPU busy, stage
totals, disk read, memory formula) and appends its table row to --row-file.

  --log     the job's whole output (quantd-quantize's stdout and stderr;
            progress may be separated by '\\r')
  --stamps  "EPOCH_SECONDS LINE" for each line gpu_check echoed as it came
  --smi     nvidia-smi --query-gpu=timestamp,utilization.gpu,memory.used
            --format=csv,noheader,nounits -lms 200, run with TZ=UTC
  --start / --end  epoch seconds of the job's launch and exit
  --blocks  the checkpoint's blocks; --of the model's (32 for Llama-3-8B)
"""
import argparse
import datetime
import re
import sys

BLOCK = re.compile(r"^block\s+(\d+)/(\d+)\b")
SECONDS = re.compile(r"\s(\d+(?:\.\d+)?) s(?: \((\d+(?:\.\d+)?) algo\))?\s*$")
GPU = re.compile(r"\sgpu (\d+(?:\.\d+)?) GiB \((\d+(?:\.\d+)?) held\)")
STAGES = re.compile(r"^block\s+\d+(?:/\d+)?\s+stages?:\s*(.*)$")
STAGE_ITEM = re.compile(r"^\s*(.*?)\s+(\d+(?:\.\d+)?)\s*s\s*$")
RSS = re.compile(r"peak host RSS (\d+(?:\.\d+)?) GiB")
GIB = float(1 << 30)


def lines_of(path):
    try:
        with open(path, "r", errors="replace") as f:
            text = f.read()
    except OSError:
        return []
    return [l for l in re.split(r"[\r\n]", text) if l]


def parse_blocks(lines):
    """{block: (seconds, algo seconds or 0, gpu live or None, gpu held or None)}"""
    blocks = {}
    for l in lines:
        m = BLOCK.match(l)
        if not m:
            continue
        s = SECONDS.search(l)
        g = GPU.search(l)
        blocks[int(m.group(1))] = (
            float(s.group(1)) if s else None,
            float(s.group(2)) if s and s.group(2) else 0.0,
            float(g.group(1)) if g else None,
            float(g.group(2)) if g else None,
        )
    return blocks


def parse_stamps(path):
    """{block: epoch seconds its line was seen}"""
    seen = {}
    for l in lines_of(path):
        t, _, rest = l.partition(" ")
        m = BLOCK.match(rest)
        if not m:
            continue
        try:
            seen.setdefault(int(m.group(1)), float(t.replace(",", ".")))
        except ValueError:
            pass
    return seen


def stage_totals(lines):
    totals = {}
    for l in lines:
        m = STAGES.match(l)
        if not m:
            continue
        for item in m.group(1).split(","):
            i = STAGE_ITEM.match(item)
            if i:
                totals[i.group(1)] = totals.get(i.group(1), 0.0) + float(i.group(2))
    return totals


def parse_smi(path):
    """[(epoch seconds, utilization %, memory MiB)]"""
    samples = []
    for l in lines_of(path):
        parts = [p.strip() for p in l.split(",")]
        if len(parts) < 3:
            continue
        try:
            t = datetime.datetime.strptime(parts[0], "%Y/%m/%d %H:%M:%S.%f")
            t = t.replace(tzinfo=datetime.timezone.utc).timestamp()
            samples.append((t, float(parts[1]), float(parts[2])))
        except ValueError:
            continue  # "[N/A]", "[Not Supported]", a torn last line
    return samples


def fmt_s(x):
    return "%.1f" % x if x >= 10 else "%.2f" % x if x >= 0.1 else "%.4f" % x


def formula(spec):
    hidden, inter, heads, kv_heads, tokens = (int(v) for v in spec.split(","))
    kv = hidden // heads * kv_heads
    params = 2 * hidden * hidden + 2 * hidden * kv + 3 * hidden * inter + 2 * hidden
    weights = 4 * params
    widest = max(hidden, inter)
    hessian = 4 * widest * widest
    acts = 4 * tokens * hidden
    total = weights + hessian + acts
    text = ("formula %.3f GiB = one block's float32 weights %.3f GiB (%.1f M parameters: "
            "q, o %dx%d, k, v %dx%d, gate, up, down %dx%d, 2 norms of %d; x 4 B) "
            "+ its largest Hessian %.3f GiB (%d^2 x 4 B, down_proj's; assumes ONE Hessian "
            "alive at once) + one sub-batch of activations %.3f GiB (%d tokens x %d x 4 B: "
            "ModelOptions::max_tokens_per_chunk, i.e. %d samples of 2048 tokens); "
            "the workspace (attention, MLP intermediates, GPTQ's inverse) is not in it"
            % (total / GIB, weights / GIB, params / 1e6, hidden, hidden, kv, hidden,
               inter, hidden, hidden, hessian / GIB, widest, acts / GIB, tokens, hidden,
               max(1, tokens // 2048)))
    return total, text


def job(a):
    lines = lines_of(a.log)
    blocks = parse_blocks(lines)
    stamps = parse_stamps(a.stamps)
    wall = a.end - a.start
    out = []
    label = a.label

    done = sorted(b for b in blocks if blocks[b][0] is not None)
    k = len(done)
    if a.status == "stopped":
        out.append("- %s: **stopped by --budget-s after %d of %d blocks** (at %.1f s; "
                   "a budget stop, not a failure)" % (label, k, a.blocks, wall))

    # Where the blocks' time went.
    if k:
        secs = [blocks[b][0] for b in done]
        algo = sum(blocks[b][1] for b in done)
        line = "%d blocks, %.1f s in all (%.1f s each), %.1f s of it in algorithms" % (
            k, sum(secs), sum(secs) / k, algo)
        live = [blocks[b][2] for b in done if blocks[b][2] is not None]
        held = [blocks[b][3] for b in done if blocks[b][3] is not None]
        if live:
            line += "; allocator peak per block %.1f GiB live, %.1f GiB held" % (max(live), max(held))
        out.append("- %s blocks: %s" % (label, line))

    # Extrapolation to the model's block count. The first block line is
    # printed when block 1 ends: time to it covers load, calibration and
    # block 1; the other of-1 blocks take the mean of blocks 2..k.
    if k == 0:
        out.append("- %s: no block finished: no extrapolation" % label)
    else:
        rest = [blocks[b][0] for b in done if b != done[0]] or [blocks[done[0]][0]]
        mean = sum(rest) / len(rest)
        mean_of = "blocks 2..%d" % done[-1] if len(done) > 1 else "block 1"
        t_first = stamps.get(done[0])
        t_last = stamps.get(done[-1])
        if t_first is None:
            out.append("- %s: measured %d of %d blocks; no timestamps of the block lines: "
                       "no extrapolation" % (label, k, a.of))
        else:
            head = t_first - a.start
            if a.status == "ok" and t_last is not None:
                tail = a.end - t_last
                tail_text = "%s s after the last block line" % fmt_s(tail)
            else:
                tail = 0.0
                tail_text = "the time after the last block (export) not measured: the job did not end"
            x = head + (a.of - 1) * mean + tail
            extrapolated = k < a.of or a.status != "ok"
            out.append("- %s: %smeasured %d of %d blocks; extrapolated to %d: %.1f s "
                       "(first block line at %s s, block 1's %s s included; + %d x %s s, the mean "
                       "of %s; + %s)" % (
                           label, "**extrapolation**: " if extrapolated else "", k, a.of, a.of, x,
                           fmt_s(head), fmt_s(blocks[done[0]][0]), a.of - 1, fmt_s(mean), mean_of,
                           tail_text))

    # GPU busy over the block loop: from block 1's start to the last block line.
    if a.device == "cpu":
        out.append("- %s: GPU busy n/a (the job ran on the CPU)" % label)
    elif not a.smi:
        out.append("- %s: GPU busy n/a (no nvidia-smi)" % label)
    else:
        samples = parse_smi(a.smi)
        t_first = stamps.get(done[0]) if k else None
        t_last = stamps.get(done[-1]) if k else None
        if t_first is None or not samples:
            out.append("- %s: GPU busy n/a (%s)" % (
                label, "no nvidia-smi samples" if not samples else "no block line"))
        else:
            lo = t_first - blocks[done[0]][0]
            inside = [u for t, u, _ in samples if lo <= t <= t_last]
            if inside:
                out.append("- %s: GPU busy %.0f%% of the block loop (%d samples)" % (
                    label, sum(inside) / len(inside), len(inside)))
            else:
                out.append("- %s: GPU busy n/a (no nvidia-smi sample inside the block loop, "
                           "%d samples in all)" % (label, len(samples)))

    totals = stage_totals(lines)
    if totals:
        out.append("- %s stage totals: %s" % (
            label, ", ".join("%s %.2f s" % (n, s) for n, s in totals.items())))

    peak_mib = None
    if a.smi:
        mem = [m for _, _, m in parse_smi(a.smi)]
        peak_mib = max(mem) if mem else None
    peak = "n/a" if peak_mib is None else "%.2f" % (peak_mib / 1024)

    if a.disk_bytes is not None and a.disk_seconds:
        gbps = a.disk_bytes / a.disk_seconds / 1e9
        would = a.disk_bytes / (gbps * 1e9)
        out.append("- %s: wall %.1f s; reading the checkpoint at that bandwidth would take %s s "
                   "(%.3f GB at %.2f GB/s, %s): the wall time is %.1f x the read" % (
                       label, wall, fmt_s(would), a.disk_bytes / 1e9, gbps, a.disk_note,
                       wall / would))

    if a.formula:
        total, text = formula(a.formula)
        live = [blocks[b][2] for b in done if blocks[b][2] is not None]
        held = [blocks[b][3] for b in done if blocks[b][3] is not None]
        measured = "peak GPU memory %s (nvidia-smi, the whole device)" % (
            peak if peak == "n/a" else peak + " GiB")
        if live:
            measured += ", allocator %.2f GiB live / %.2f GiB held" % (max(live), max(held))
        out.append("- %s memory: %s; %s" % (label, measured, text))

    rss = None
    for l in lines:
        m = RSS.search(l)
        if m:
            rss = m.group(1)
    calib = "%s x 2048" % a.samples
    if a.status == "ok":
        row = "| %s | %s | %.1f | %s | %s |" % (label, calib, wall, peak, rss or "?")
    elif a.status == "stopped":
        row = "| %s | %s | stopped by --budget-s after %d of %d blocks at %.1f | %s | %s |" % (
            label, calib, k, a.blocks, wall, peak, rss or "")
    else:
        row = "| %s | %s | **failed** (exit %s) after %.1f s; %s | %s | |" % (
            label, calib, a.rc, wall, a.log, peak)
    with open(a.row_file, "a") as f:
        f.write(row + "\n")
    print("\n".join(out))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    j = sub.add_parser("job")
    j.add_argument("--label", required=True)
    j.add_argument("--samples", required=True)
    j.add_argument("--log", required=True)
    j.add_argument("--stamps", required=True)
    j.add_argument("--smi", default="")
    j.add_argument("--start", type=float, required=True)
    j.add_argument("--end", type=float, required=True)
    j.add_argument("--status", choices=["ok", "stopped", "failed"], required=True)
    j.add_argument("--rc", default="0")
    j.add_argument("--blocks", type=int, required=True)
    j.add_argument("--of", type=int, default=32)
    j.add_argument("--device", default="cuda:0")
    j.add_argument("--row-file", required=True)
    j.add_argument("--disk-bytes", type=float)
    j.add_argument("--disk-seconds", type=float)
    j.add_argument("--disk-note", default="")
    j.add_argument("--formula")
    f = sub.add_parser("formula")
    f.add_argument("spec")
    a = p.parse_args()
    if a.cmd == "formula":
        print(formula(a.spec)[1])
    else:
        job(a)


if __name__ == "__main__":
    sys.exit(main())
