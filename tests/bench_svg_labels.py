"""Check the labels of a `trident bench` SVG chart (bench/bench_svg.c) as boxes.

Usage: python3 bench_svg_labels.py CHART.svg

Each <text class="... label"> (the device names, the values over the bars, the
roof % or step time under them) gets a box from its x, y, text-anchor and font
size, its width from Helvetica's advance widths times 1.1 (the model
bench_svg.c lays them out with). Fails when two boxes of one panel intersect,
or when a W2-cold-start panel is not drawn in seconds with "lower is better".
"""
import re
import sys
import xml.etree.ElementTree as ET

SVG = "{http://www.w3.org/2000/svg}"
NARROW = set(" .,:/iljftI()")
WIDE = set("mwMW%")


def width(s, px):
    w = 0.0
    for c in s:
        em = (0.556 if c.isdigit() else 0.278 if c in NARROW else 0.889 if c in WIDE else 0.333 if c == "r"
              else 0.667 if "A" <= c <= "Z" else 0.556)
        w += em * px * 1.1
    return w


def box(t):
    px = float(re.search(r"font-size:([0-9.]+)px", t.get("style", "")).group(1))
    x, y, w = float(t.get("x")), float(t.get("y")), width(t.text or "", px)
    x0 = {"middle": x - w / 2, "end": x - w}.get(t.get("text-anchor"), x)
    return (x0, y - 0.8 * px, x0 + w, y + 0.2 * px)


def overlap(a, b):
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


def main(path):
    root = ET.parse(path).getroot()
    panels = [g for g in root.iter(SVG + "g") if g.get("class") == "panel"]
    if not panels:
        sys.exit(f"{path}: no panels")
    n_labels, cold = 0, 0
    for g in panels:
        texts = list(g.iter(SVG + "text"))
        title = texts[0].text or ""
        labels = [(t.text, box(t)) for t in texts if "label" in (t.get("class") or "").split()]
        n_labels += len(labels)
        for i in range(len(labels)):
            for j in range(i + 1, len(labels)):
                if overlap(labels[i][1], labels[j][1]):
                    sys.exit(f"{path}: panel {title!r}: label {labels[i][0]!r} {labels[i][1]} overlaps "
                             f"{labels[j][0]!r} {labels[j][1]}")
        if title.startswith("W2-cold-start"):
            cold += 1
            unit = " ".join(t.text or "" for t in texts if "axis-unit" in (t.get("class") or ""))
            if "seconds" not in unit or "lower is better" not in unit or "ops/s" in unit:
                sys.exit(f"{path}: panel {title!r}: the axis says {unit!r}, not seconds (lower is better)")
            values = [t.text for t in texts if "label" in (t.get("class") or "") and (t.text or "").endswith(" s")]
            if not values:
                sys.exit(f"{path}: panel {title!r}: no bar value in seconds")
    print(f"{path}: {len(panels)} panels, {n_labels} labels, none overlapping; {cold} cold-start panels in seconds")
    if n_labels == 0:
        sys.exit(f"{path}: no labels")


main(sys.argv[1])
