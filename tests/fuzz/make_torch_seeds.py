#!/usr/bin/python3
"""Seeds of the torch.save fuzz target: small files as torch.save writes
them (state dicts of several dtypes, an optimizer state, tied weights and
views, protocol 4, the legacy format).

    make_torch_seeds.py DIR
"""
import os
import sys

import torch


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    w = torch.randn(4, 3)
    seeds = {
        "fp32": {"a.weight": w, "a.bias": torch.zeros(3)},
        "bf16": {"a.weight": w.to(torch.bfloat16), "b": torch.arange(5)},
        "fp16": {"a.weight": w.to(torch.float16), "mask": torch.ones(2, 2, dtype=torch.bool)},
        "adamw": {"state": {0: {"step": torch.tensor(3.0), "exp_avg": w * 0.1,
                                "exp_avg_sq": w * w}},
                  "param_groups": [{"lr": 1e-3, "betas": (0.9, 0.95), "params": [0]}]},
        "tied": {"wte": w, "lm_head": w, "view": w[1:3], "t": w.t()},
        "odd": {"scalar": torch.tensor(2.5), "empty": torch.zeros(0),
                "nested": [1, (2, "x"), {"k": torch.ones(1)}]},
    }
    for name, obj in seeds.items():
        torch.save(obj, os.path.join(out, name + ".pt"))
    torch.save(seeds["adamw"], os.path.join(out, "protocol4.pt"), pickle_protocol=4)
    torch.save(seeds["fp32"], os.path.join(out, "legacy.pt"),
               _use_new_zipfile_serialization=False)


if __name__ == "__main__":
    main()
