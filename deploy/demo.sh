#!/bin/sh
# demo.sh — 'make demo' until the farm exists: a synthetic camera pair with a
# known flow (a Lamb-Oseen vortex), measured by pivfarm-piv and scored
# against the truth, then a real camera pair. Everything lands in run/demo/.
set -eu

here=$(cd "$(dirname "$0")/.." && pwd)
bin="$here/bin"
out="$here/run/demo"
data="$here/../shared/data/piv"
mkdir -p "$out"

echo "== synthetic camera: a 2048x2048 pair of a Lamb-Oseen vortex (peak 6 px)"
"$bin/pivfarm-synth" --flow lamb-oseen:6,120 --size 2048x2048 -o "$out/vortex"
ls -l "$out"/vortex_a.tif "$out"/vortex_b.tif "$out"/vortex.flow | sed 's/^/   /'

echo "== pivfarm-piv: windows 64, 32, 16 px, 50 % overlap, 2 threads"
"$bin/pivfarm-piv" -v --passes 64,32,16 --threads 2 -o "$out/vortex.txt" \
    "$out/vortex_a.tif" "$out/vortex_b.tif"
grep -E '^# (grid|vectors|mean)' "$out/vortex.txt" | sed 's/^#/  /'

echo "== accuracy against the known flow"
"$bin/pivfarm-synth" --score "$out/vortex.txt" --truth "$out/vortex.flow" | sed 's/^/   /'

if [ -f "$data/B005_1.tif" ]; then
    echo "== a real camera pair (B005, OpenPIV's example; OpenPIV's mean is (-0.13, +0.22) px)"
    "$bin/pivfarm-piv" --passes 64,32,16 -o "$out/B005.txt" "$data/B005_1.tif" "$data/B005_2.tif"
    grep -E '^# (vectors|mean)' "$out/B005.txt" | sed 's/^#/  /'
fi
echo "== vector files (x y u v flags peak_ratio) are in $out"
