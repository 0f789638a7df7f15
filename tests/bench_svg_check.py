"""Check that a headless-Chromium screenshot of a `trident bench --svg` chart shows its bars.

Usage: python3 bench_svg_check.py CHART.svg SCREENSHOT.png

Reads every <rect class="bar"> (position, size, fill) from the SVG, decodes the
PNG (zlib + the five PNG row filters, no third-party modules), and checks, for
each bar taller than 8 px:
  - points inside the bar have the bar's fill colour;
  - the point 6 px above the bar's top (background or gridline) does not.
Also checks that the page background is white. Prints what it checked; exit
status 1 on the first mismatch.
"""
import struct
import sys
import xml.etree.ElementTree as ET
import zlib

SVG = "{http://www.w3.org/2000/svg}"


def read_png(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, w = 8, b"", 0
    while pos < len(data):
        n, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b"IHDR":
            w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or ctype not in (2, 6) or interlace:
                sys.exit(f"{path}: unsupported PNG (depth {depth}, colour type {ctype}, interlace {interlace})")
            bpp = 3 if ctype == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + n
    raw = zlib.decompress(idat)
    stride = w * bpp
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 255
            elif ftype == 2:
                line[i] = (line[i] + b) & 255
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(line)
        prev = line
    return w, h, lambda x, y: tuple(rows[y][x * bpp:x * bpp + 3])


def near(px, rgb, tol=12):
    return all(abs(p - q) <= tol for p, q in zip(px, rgb))


def main():
    svg, png = sys.argv[1], sys.argv[2]
    bars = [r for r in ET.parse(svg).getroot().iter(SVG + "rect") if r.get("class") == "bar"]
    if not bars:
        sys.exit(f"{svg}: no bars")
    w, h, pixel = read_png(png)
    if not near(pixel(w - 3, h - 3), (255, 255, 255)):
        sys.exit(f"background at ({w - 3},{h - 3}) is {pixel(w - 3, h - 3)}, not white")
    checked = 0
    for r in bars:
        x, y, bw, bh = (float(r.get(k)) for k in ("x", "y", "width", "height"))
        fill = r.get("fill")
        rgb = tuple(int(fill[i:i + 2], 16) for i in (1, 3, 5))
        if bh < 8:
            continue
        cx = int(x + bw / 2)
        inside = [pixel(cx, int(y + bh * f)) for f in (0.2, 0.4, 0.6, 0.8)]
        hits = sum(near(p, rgb) for p in inside)
        if hits < 3:
            sys.exit(f"bar {r.get('data-device')} {r.get('data-workload')} at ({x:.0f},{y:.0f}) {bw:.0f}x{bh:.0f}: "
                     f"expected {fill}, screenshot has {inside}")
        above = pixel(cx, int(y) - 6)
        if near(above, rgb):
            sys.exit(f"bar {r.get('data-device')} {r.get('data-workload')}: colour {fill} also above its top "
                     f"at ({cx},{int(y) - 6}); the bar is not where the SVG puts it")
        checked += 1
    if checked == 0:
        sys.exit("no bar tall enough to check")
    print(f"{checked} of {len(bars)} bars drawn in their colours at their places ({w}x{h} screenshot)")


if __name__ == "__main__":
    main()
