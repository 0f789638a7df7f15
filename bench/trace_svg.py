"""Draw a Chrome trace of the Trident profiler as an SVG timeline, offline.

Usage: python3 bench/trace_svg.py TRACE.json OUT.svg [--step N]

One row per track (device queue, or host thread for CPU ops), one box per op
coloured by op name, backward ops hatched darker; --step N draws only the Nth
step (between the trace's "step" marks), which keeps a long trace readable.
Chromium renders the SVG without network (Perfetto's UI needs it), which is
how the README's screenshot is taken:
  chromium --headless --screenshot=trace.png --window-size=1200,420 file://$PWD/OUT.svg
"""
import html
import json
import sys
import zlib

PALETTE = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7",
           "#9c755f", "#86bcb6", "#d37295", "#a0cbe8", "#8cd17d", "#f1ce63"]


def colour(name):
    return PALETTE[zlib.crc32(name.encode()) % len(PALETTE)]


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    step = int(argv[argv.index("--step") + 1]) if "--step" in argv else 0
    events = json.load(open(argv[1]))["traceEvents"]
    names = {}
    for e in events:
        if e["ph"] == "M" and e["name"] in ("process_name", "thread_name"):
            names[(e["pid"], e["tid"] if e["name"] == "thread_name" else None)] = e["args"]["name"]
    marks = sorted(e["ts"] for e in events if e["ph"] == "i")
    ops = [e for e in events if e["ph"] == "X"]
    lo, hi = min(e["ts"] for e in ops), max(e["ts"] + e["dur"] for e in ops)
    if step and step <= len(marks):
        lo, hi = (marks[step - 2] if step >= 2 else lo), marks[step - 1]
        ops = [e for e in ops if lo <= e["ts"] < hi]
    tracks = sorted({(e["pid"], e["tid"]) for e in ops})
    left, width, row = 230, 940, 46
    scale = width / max(hi - lo, 1e-9)
    totals = {}
    for e in ops:
        totals[e["name"]] = totals.get(e["name"], 0) + e["dur"]
    top = sorted(totals, key=totals.get, reverse=True)[:10]
    height = 70 + row * len(tracks) + 22 * ((len(top) + 4) // 5) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{left + width + 20}" height="{height}" '
           'font-family="sans-serif" font-size="12">',
           '<rect width="100%" height="100%" fill="white"/>',
           f'<text x="10" y="22" font-size="15">{html.escape(argv[1].split("/")[-1])}: '
           f'{len(ops)} ops over {(hi - lo) / 1e3:.2f} ms{f" (step {step})" if step else ""}</text>']
    for i, (pid, tid) in enumerate(tracks):
        y = 40 + i * row
        label = names.get((pid, None), f"pid {pid}") + " / " + names.get((pid, tid), f"tid {tid}")
        out.append(f'<text x="10" y="{y + 24}">{html.escape(label[:34])}</text>')
        out.append(f'<rect x="{left}" y="{y + 4}" width="{width}" height="{row - 10}" fill="#f4f4f4"/>')
        for e in ops:
            if (e["pid"], e["tid"]) != (pid, tid):
                continue
            x, w = left + (e["ts"] - lo) * scale, max(e["dur"] * scale, 0.5)
            bw = e.get("cat") == "backward"
            tip = f'{e["name"]} ({e.get("cat")}) {e["args"].get("module", "")} {e["args"].get("shapes", "")} {e["dur"]:.1f} us'
            out.append(f'<rect x="{x:.2f}" y="{y + (18 if bw else 4)}" width="{w:.2f}" height="{row / 2 - 6:.0f}" '
                       f'fill="{colour(e["name"])}"><title>{html.escape(tip)}</title></rect>')
        out.append(f'<text x="{left - 4}" y="{y + 15}" font-size="9" text-anchor="end">fwd</text>')
        out.append(f'<text x="{left - 4}" y="{y + 31}" font-size="9" text-anchor="end">bwd</text>')
    y = 50 + row * len(tracks)
    for k, name in enumerate(top):
        x, yy = 10 + (k % 5) * 230, y + 22 * (k // 5)
        out.append(f'<rect x="{x}" y="{yy}" width="12" height="12" fill="{colour(name)}"/>'
                   f'<text x="{x + 18}" y="{yy + 11}">{html.escape(name)} {totals[name] / 1e3:.2f} ms</text>')
    out.append("</svg>")
    open(argv[2], "w").write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv)
