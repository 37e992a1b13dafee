"""Autotunes a 4-layer decoder's first training step in a decisions cache of
its own and prints what the tuner kept for each key: the choice, each
candidate's median ratio to aten's time in the same round, and that ratio's
spread. Run it with the machine loaded (e.g. two `yes > /dev/null` loops on
two cores) to see what load does to the decisions."""

import json
import os
import tempfile
import time

os.environ["BWDCONV_CACHE_DIR"] = tempfile.mkdtemp(prefix="tune-decoder-")

import torch  # noqa: E402
from torch import nn  # noqa: E402

import bwdconv  # noqa: E402

torch.manual_seed(0)
decoder = nn.Sequential(
    nn.ConvTranspose2d(64, 32, 4, stride=2, padding=1), nn.ReLU(),
    nn.ConvTranspose2d(32, 16, 4, stride=2, padding=1), nn.ReLU(),
    nn.ConvTranspose2d(16, 8, 4, stride=2, padding=1), nn.ReLU(),
    nn.ConvTranspose2d(8, 3, 4, stride=2, padding=1))
z = torch.randn(4, 64, 8, 8)
print("load average", " ".join(f"{v:.2f}" for v in os.getloadavg()))
bwdconv.enable(autotune=True)
start = time.perf_counter()
decoder(z).square().mean().backward()
print(f"first step, tuning: {time.perf_counter() - start:.1f} s")
bwdconv.disable()
with bwdconv.enabled():
    print(bwdconv.explain_model(decoder, z))
with open(os.path.join(os.environ["BWDCONV_CACHE_DIR"], "decisions-v1.json")) as f:
    entries = json.load(f)["entries"]
for key, entry in entries.items():
    fields = key.split(" | ")
    for gradient, decided in entry["gradients"].items():
        ratios = ", ".join(f"{name} {r['median']:.2f} (spread {r['spread']:.2f})"
                           for name, r in decided.get("ratios_to_aten", {}).items())
        print(f"{fields[-2]} | {fields[-1]}: {decided['choice']} "
              f"(load {decided.get('load_average')}); {ratios or 'no candidate'}")
