#!/bin/sh
# Issue 21's speed rows on every available device (cpu, cuda:0, vulkan:0): an 8-op elementwise block over 2^26
# float32 elements as one pass (% of copy bandwidth, x the composed ops), its fused backward, and the cached
# block's launch cost against one `add`. Usage: bench/math_rows.sh [build/bin/trident] [--iters N]
set -e
TRIDENT=${1:-build/bin/trident}
[ $# -gt 0 ] && shift
exec "$TRIDENT" math --bench 'tanh(x * y + 0.5) * sigmoid(x - y) + exp(y)' \
    --shape x=67108864 --shape y=67108864 --device all "$@"
