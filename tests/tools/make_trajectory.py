#!/usr/bin/python3
"""Trains a small character-level GPT with AdamW and saves its checkpoints:
the test data of trajfs and, at the default size, its benchmark corpus.

    make_trajectory.py --out DIR [options]

DIR gets

    config.json                      the run's configuration
    step-NNNNNN.safetensors          the weights every --interval steps
    step-NNNNNN.optim.safetensors    AdamW's exp_avg and exp_avg_sq (fp32),
                                     with --optimizer
    DTYPE/step-NNNNNN.safetensors    instead, with two or more --dtype
                                     (bf16,fp32): one folder a dtype

A checkpoint holds what a GPT-2 checkpoint holds: float weights in the
saved dtype, an I64 buffer (transformer.position_ids) and frozen float
buffers (each layer's causal mask attn.bias and 0-d attn.masked_bias)
that never change, and lm_head.weight, a byte-identical copy of the tied
transformer.wte.weight. Tensors are laid out as the safetensors library
lays them out (by dtype, widest first, then by name; the header padded
with spaces to 8 bytes), with the step and the loss in __metadata__.

The model trains in fp32 on the licence texts of /usr/share/common-licenses
(present on every Debian system). A run is deterministic: one thread,
fixed seeds; the same torch build gives the same bytes.

The defaults are the benchmark corpus (6 layers, width 384, 400 steps,
a checkpoint every 25: 16 checkpoints, 10.7M parameters, about 7 minutes
on 2 cores); the tests pass small sizes and take about a second.
"""
import argparse
import glob
import json
import math
import os
import struct
import sys

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch loads

import torch
import torch.nn.functional as F
from torch import nn

TEXTS = "/usr/share/common-licenses/*"
SAVED = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
# safetensors' names, in the order the library lays tensors out (widest first)
ST_DTYPE = {torch.int64: "I64", torch.float32: "F32", torch.bfloat16: "BF16",
            torch.float16: "F16"}
LAYOUT_ORDER = ["I64", "F32", "BF16", "F16"]


def safetensors_write(path, tensors, metadata):
    """Writes name -> tensor as a safetensors file, atomically."""
    order = sorted(tensors, key=lambda n: (LAYOUT_ORDER.index(ST_DTYPE[tensors[n].dtype]), n))
    header = {"__metadata__": {k: str(v) for k, v in metadata.items()}}
    chunks, at = [], 0
    for name in order:
        t = tensors[name].detach().contiguous()
        data = t.reshape(-1).view(torch.uint8).numpy().tobytes()
        header[name] = {"dtype": ST_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(data)]}
        chunks.append(data)
        at += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path + ".part", "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
    os.replace(path + ".part", path)


class Layer(nn.Module):
    """A pre-norm transformer block, named as GPT-2's."""

    def __init__(self, width, heads, ctx):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.ModuleDict({"c_attn": nn.Linear(width, 3 * width),
                                   "c_proj": nn.Linear(width, width)})
        self.attn.register_buffer("bias", torch.tril(torch.ones(1, 1, ctx, ctx)))
        self.attn.register_buffer("masked_bias", torch.tensor(-10000.0))
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.ModuleDict({"c_fc": nn.Linear(width, 4 * width),
                                  "c_proj": nn.Linear(4 * width, width)})

    def forward(self, x):
        b, t, w = x.shape
        q, k, v = (z.reshape(b, t, self.heads, -1).transpose(1, 2)
                   for z in self.attn["c_attn"](self.ln_1(x)).chunk(3, dim=-1))
        scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        scores = scores.masked_fill(self.attn.bias[..., :t, :t] == 0, self.attn.masked_bias)
        y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, t, w)
        x = x + self.attn["c_proj"](y)
        return x + self.mlp["c_proj"](F.gelu(self.mlp["c_fc"](self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, width, layers, heads, ctx):
        super().__init__()
        self.transformer = nn.ModuleDict({
            "wte": nn.Embedding(vocab, width),
            "wpe": nn.Embedding(ctx, width),
            "h": nn.ModuleList(Layer(width, heads, ctx) for _ in range(layers)),
            "ln_f": nn.LayerNorm(width),
        })
        self.transformer.register_buffer("position_ids", torch.arange(ctx).unsqueeze(0))
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.transformer["wte"].weight
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() >= 2:  # residual projections scaled down, as GPT-2 does
                scale = 1 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 1
                nn.init.normal_(p, 0.0, 0.02 * scale)

    def forward(self, idx):
        x = self.transformer["wte"](idx) + self.transformer["wpe"](
            self.transformer.position_ids[:, :idx.shape[1]])
        for layer in self.transformer["h"]:
            x = layer(x)
        return self.lm_head(self.transformer["ln_f"](x))


def arguments():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--width", type=int, default=384)
    p.add_argument("--heads", type=int, default=6)
    p.add_argument("--ctx", type=int, default=128, help="context length")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--interval", type=int, default=25, help="a checkpoint every N steps")
    p.add_argument("--max-chars", type=int, default=0, help="train on the first N characters (0: all)")
    p.add_argument("--dtype", default="bf16", help="saved dtype(s): bf16, fp16, fp32, or a comma list")
    p.add_argument("--optimizer", action="store_true", help="also save AdamW's state")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=1e-3)
    a = p.parse_args()
    a.dtypes = a.dtype.split(",")
    if any(d not in SAVED for d in a.dtypes):
        p.error("--dtype: bf16, fp16 or fp32")
    if a.width % a.heads or min(a.layers, a.steps, a.interval, a.batch) < 1 or a.ctx < 2:
        p.error("sizes must be positive, --width a multiple of --heads")
    return a


def main():
    a = arguments()
    files = sorted(f for f in glob.glob(TEXTS) if os.path.isfile(f))
    text = "\n".join(open(f, encoding="utf-8", errors="replace").read() for f in files)
    text = text[:a.max_chars or None]
    vocab = sorted(set(text))
    code = {c: i for i, c in enumerate(vocab)}
    data = torch.tensor([code[c] for c in text], dtype=torch.int64)
    if len(data) <= a.ctx + 1:
        sys.exit("make_trajectory: %d characters of text, fewer than --ctx" % len(data))

    torch.manual_seed(a.seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    model = GPT(len(vocab), a.width, a.layers, a.heads, a.ctx)
    params = dict(model.named_parameters())  # the tied head is listed once, as wte
    decayed = [n for n, p in params.items() if p.dim() >= 2]
    optim = torch.optim.AdamW(
        [{"params": [params[n] for n in decayed], "weight_decay": 0.1},
         {"params": [p for n, p in params.items() if n not in decayed], "weight_decay": 0.0}],
        lr=a.lr, betas=(0.9, 0.95), eps=1e-8, foreach=False)
    warmup = min(40, a.steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(optim, lambda s: (
        (s + 1) / warmup if s < warmup
        else 0.1 + 0.45 * (1 + math.cos(math.pi * (s - warmup) / max(1, a.steps - warmup)))))

    folders = {d: os.path.join(a.out, d) if len(a.dtypes) > 1 else a.out for d in a.dtypes}
    for f in folders.values():
        os.makedirs(f, exist_ok=True)
    config = {"generator": "make_trajectory.py", "seed": a.seed, "layers": a.layers,
              "width": a.width, "heads": a.heads, "ctx": a.ctx, "vocab": len(vocab),
              "params": sum(p.numel() for p in params.values()), "dtype": a.dtype,
              "steps": a.steps, "interval": a.interval, "batch": a.batch, "lr": a.lr,
              "optimizer": "AdamW betas (0.9, 0.95), weight decay 0.1 on matrices",
              "texts": files, "chars": len(text), "torch": torch.__version__}
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
        f.write("\n")

    batches = torch.Generator().manual_seed(a.seed + 1)
    loss_avg = None
    for step in range(1, a.steps + 1):
        at = torch.randint(len(data) - a.ctx - 1, (a.batch, 1), generator=batches)
        window = data[at + torch.arange(a.ctx + 1)]
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, len(vocab)), window[:, 1:].reshape(-1))
        optim.zero_grad(set_to_none=True)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optim.step()
        schedule.step()
        loss_avg = loss.item() if loss_avg is None else 0.9 * loss_avg + 0.1 * loss.item()
        if step % a.interval:
            continue
        meta = {"format": "pt", "step": step, "loss": "%.6f" % loss_avg}
        state = model.state_dict()
        for d, folder in folders.items():
            safetensors_write(os.path.join(folder, "step-%06d.safetensors" % step),
                              {n: t.to(SAVED[d]) if t.is_floating_point() else t
                               for n, t in state.items()}, dict(meta, dtype=d))
        if a.optimizer:
            moments = {}
            for n, p in params.items():
                moments[n + ".exp_avg"] = optim.state[p]["exp_avg"]
                moments[n + ".exp_avg_sq"] = optim.state[p]["exp_avg_sq"]
            safetensors_write(os.path.join(a.out, "step-%06d.optim.safetensors" % step),
                              moments, dict(meta, kind="AdamW state"))
        print("step %d/%d loss %.4f" % (step, a.steps, loss_avg), flush=True)


if __name__ == "__main__":
    main()
