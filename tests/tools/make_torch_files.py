#!/usr/bin/python3
"""Writes the tensors of a flat trajectory as torch.save files, in the
layouts of the trainers that write them, and odd and hostile torch.save
files. torch and numpy.

    make_torch_files.py LAYOUT DIR TRAJ
    make_torch_files.py --baseline LAYOUT DIR TRAJ
    make_torch_files.py odd DIR
    make_torch_files.py hostile DIR

TRAJ is the output of the test-data generator (make_trajectory.py) with
--dtype bf16,fp32 --optimizer: TRAJ/bf16/step-N.safetensors,
TRAJ/fp32/step-N.safetensors, TRAJ/step-N.optim.safetensors. Checkpoint
after checkpoint, DIR (which must not exist) gets the same tensors as

    trainer    checkpoint-N/ as the transformers Trainer writes it:
               model.safetensors (a copy of the bf16 weights),
               optimizer.pt (AdamW's state_dict: per parameter a 0-d fp32
               step, exp_avg and exp_avg_sq, in a fixed parameter order),
               scheduler.pt, rng_state.pth, trainer_state.json
    lightning  checkpoints/epoch=E-step=N.ckpt as Lightning writes it: the
               fp32 weights under state_dict, the AdamW state under
               optimizer_states, a callback's tensor, hyper-parameters
    deepspeed  global_stepN/mp_rank_00_model_states.pt (the bf16 weights
               under module) and
               global_stepN/zero_pp_rank_0_mp_rank_00_optim_states.pt (the
               fp32 master weights, exp_avg and exp_avg_sq as flat
               vectors), and the file latest
    statedict  fp32/model-N.pt, bf16/model-N.pt, fp16/model-N.pt: the
               weights as torch.save(model.state_dict()) writes them

Weights are state dicts as torch makes them: an OrderedDict with its
_metadata, lm_head.weight tied to (one storage with)
transformer.wte.weight.

With --baseline, DIR/flat/ instead holds the flat layout of the same
tensors: for each torch.save file a safetensors file (as the corpus
generator writes them) of the tensors its storages hold, named by their
paths in the saved object (state.3.exp_avg), at step-N.ROLE.safetensors
(statedict: DTYPE/step-N.safetensors), and the layout's other files as
they are (model.safetensors as step-N.model.safetensors). Both hold the
same tensor bytes, so their archives compare the two formats.

`odd` writes valid torch.save files that torch.load reads back: tied
weights, views with storage offsets, non-contiguous views, 0-d and
0-element tensors, every dtype, nested containers, a parameter, a bare
storage, numpy arrays, the legacy (non-zip) format, pickle protocol 4,
entries rewritten by Python's zipfile (unaligned, one deflated).
`hostile` writes files a parser must refuse without harm: a truncated
zip, a central directory and a local header offset outside the file, a
pickle calling os.system, memo indices near 2^32, a storage larger than
its entry, a storage key with no entry, a view outside its storage.
Every file is a few kB.
"""
import argparse
import io
import json
import math
import os
import pickle
import pickletools
import random
import shutil
import struct
import sys
import types
import zipfile
from collections import OrderedDict

# One thread before torch loads: deterministic and cheap on small machines.
os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_layouts  # noqa: E402 (the safetensors reader and writer, the trajectory)

ST_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16,
             "BF16": torch.bfloat16, "I64": torch.int64, "I32": torch.int32,
             "I16": torch.int16, "I8": torch.int8, "U8": torch.uint8, "BOOL": torch.bool}
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}
CONVERT = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}
# The corpus model ties its output projection to the token embedding.
TIED = {"lm_head.weight": "transformer.wte.weight"}
BASE_LR = 1e-3
BETAS = (0.9, 0.95)
SEED = 1234
BATCH = 2
# The odd and hostile files' random tensors.
GEN = torch.Generator().manual_seed(SEED)


def fail(msg):
    sys.exit("make_torch_files: " + msg)


# ---- tensors from the trajectory ----

def to_tensor(dtype, shape, data):
    if dtype not in ST_DTYPES:
        fail("no torch dtype for %s" % dtype)
    if not data:
        return torch.empty(shape, dtype=ST_DTYPES[dtype])
    return torch.frombuffer(bytearray(data), dtype=ST_DTYPES[dtype]).reshape(shape)


def tensor_bytes(t):
    return t.detach().contiguous().reshape(-1).view(torch.uint8).numpy().tobytes()


def module_prefixes(names):
    """The _metadata keys of a state dict: every module's prefix."""
    prefixes = OrderedDict([("", None)])
    for name in names:
        parts = name.split(".")[:-1]
        for k in range(1, len(parts) + 1):
            prefixes[".".join(parts[:k])] = None
    return prefixes


def state_dict(path, convert=None, prefix=""):
    """The weights of a safetensors file as model.state_dict() gives
    them: float tensors converted to the dtype convert, tied weights one
    storage, names with prefix."""
    meta, tensors = make_layouts.read_safetensors(path)
    by_name = OrderedDict((n, to_tensor(d, s, b)) for n, d, s, b in sorted(tensors))
    if convert is not None:
        by_name = OrderedDict((n, t.to(convert) if t.is_floating_point() else t)
                              for n, t in by_name.items())
    for alias, target in TIED.items():
        if alias in by_name and target in by_name and torch.equal(by_name[alias], by_name[target]):
            by_name[alias] = by_name[target]
    sd = OrderedDict((prefix + n, t) for n, t in by_name.items())
    sd._metadata = OrderedDict((p, {"version": 1}) for p in module_prefixes(sd))
    return sd


def step_loss(path):
    meta, _ = make_layouts.read_safetensors(path)
    try:
        return float((meta or {}).get("loss", "nan"))
    except ValueError:
        return float("nan")


class Optimizer:
    """The AdamW state of one checkpoint (TRAJ/step-N.optim.safetensors):
    parameters in a fixed order, those of two or more dimensions (decayed)
    first, as the test-data generator groups them."""

    def __init__(self, path):
        _, tensors = make_layouts.read_safetensors(path)
        self.moments = {n: to_tensor(d, s, b) for n, d, s, b in tensors}
        params = {n[:-len(".exp_avg")] for n in self.moments if n.endswith(".exp_avg")}
        missing = [p for p in params if p + ".exp_avg_sq" not in self.moments]
        if missing or not params:
            fail("%s: no exp_avg/exp_avg_sq pairs (missing: %s)" % (path, ", ".join(missing)))
        self.params = sorted(params, key=lambda p: (self.moments[p + ".exp_avg"].dim() < 2, p))
        self.decayed = sum(self.moments[p + ".exp_avg"].dim() >= 2 for p in self.params)

    def exp_avg(self, param):
        return self.moments[param + ".exp_avg"]

    def exp_avg_sq(self, param):
        return self.moments[param + ".exp_avg_sq"]

    def adamw_state_dict(self, step, lr):
        """torch.optim.AdamW.state_dict() (torch 1.13)."""
        state = {i: {"step": torch.tensor(float(step)), "exp_avg": self.exp_avg(p),
                     "exp_avg_sq": self.exp_avg_sq(p)}
                 for i, p in enumerate(self.params)}
        groups = []
        for wd, ids in ((0.1, range(self.decayed)), (0.0, range(self.decayed, len(self.params)))):
            groups.append({"lr": lr, "betas": BETAS, "eps": 1e-8, "weight_decay": wd,
                           "amsgrad": False, "foreach": None, "maximize": False,
                           "capturable": False, "initial_lr": BASE_LR, "params": list(ids)})
        return {"state": state, "param_groups": groups}


def lr_at(step, last):
    """A cosine schedule to a tenth of the base rate (the values only need
    to change from checkpoint to checkpoint as a scheduler's do)."""
    return BASE_LR * (0.1 + 0.45 * (1 + math.cos(math.pi * step / max(last, 1))))


def scheduler_state_dict(step, lr):
    """LambdaLR.state_dict() of two parameter groups."""
    return {"base_lrs": [BASE_LR, BASE_LR], "last_epoch": step, "verbose": False,
            "_step_count": step + 1, "_get_lr_called_within_step": False,
            "_last_lr": [lr, lr], "lr_lambdas": [None, None]}


# The Python and numpy generator states of rng_state.pth are made once and
# kept: they are pickled integers, bytes that the flat baseline has no
# tensor for, and drawn anew each checkpoint they would cost as much as
# the tensors' deltas save on this small model. torch's state (a tensor,
# in the baseline too) changes each checkpoint.
PYTHON_RNG = random.Random(SEED).getstate()
NUMPY_LIKE_RNG = ("MT19937", [random.Random(SEED + 1).getrandbits(32) for _ in range(624)], 624, 0, 0.0)


def rng_state(step):
    """transformers' rng_state.pth of a CPU run (the numpy state as a list,
    not an array: the pickle keeps to torch's and Python's own types)."""
    return {"python": PYTHON_RNG, "numpy": NUMPY_LIKE_RNG,
            "cpu": torch.Generator().manual_seed(SEED + step).get_state()}


def trainer_state(traj, step):
    history = [{"epoch": round(s / traj.step_list()[-1], 4), "learning_rate": lr_at(s, traj.step_list()[-1]),
                "loss": round(step_loss(traj.weights(s)), 4), "step": s}
               for s in traj.step_list() if s <= step]
    return {"best_metric": None, "best_model_checkpoint": None, "epoch": history[-1]["epoch"],
            "eval_steps": 500, "global_step": step, "is_hyper_param_search": False,
            "is_local_process_zero": True, "is_world_process_zero": True, "log_history": history,
            "logging_steps": 1, "max_steps": traj.step_list()[-1], "num_train_epochs": 1,
            "save_steps": step, "total_flos": 1000.0 * step, "train_batch_size": BATCH,
            "trial_name": None, "trial_params": None}


def hyper_parameters(traj):
    try:
        with open(os.path.join(traj.root, "config.json")) as f:
            config = json.load(f)
    except (OSError, ValueError):
        config = {}
    keep = ("layers", "width", "heads", "ctx", "vocab", "seed")
    return dict({k: config[k] for k in keep if k in config}, lr=BASE_LR, betas=BETAS, weight_decay=0.1)


# ---- writing a layout or its baseline ----

def storage_tensors(obj):
    """[(path, tensor)] of the tensors of obj that come first to their
    storage, in pickle order: the tensors its torch.save file holds. A
    layout's tensors cover their storages."""
    seen, found = set(), []

    def walk(o, path):
        if isinstance(o, torch.Tensor):
            s = o.storage()
            if s.data_ptr() in seen:
                return
            if o.storage_offset() != 0 or not o.is_contiguous() or o.numel() != s.size():
                fail("%s does not cover its storage" % path)
            seen.add(s.data_ptr())
            found.append((path, o))
        elif isinstance(o, dict):
            for k, v in o.items():
                walk(v, "%s.%s" % (path, k) if path else str(k))
        elif isinstance(o, (list, tuple)):
            for k, v in enumerate(o):
                walk(v, "%s.%d" % (path, k) if path else str(k))

    walk(obj, "")
    return found


class Output:
    """The files of a layout, or with baseline those of its flat layout
    (in DIR/flat/) in their place."""

    def __init__(self, root, baseline):
        self.baseline = baseline
        self.root = os.path.join(root, "flat") if baseline else root

    def path(self, rel):
        p = os.path.join(self.root, rel)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        return p

    def torch_file(self, rel, flat_rel, obj, in_memory=False):
        """torch.save(obj) at rel (in_memory: saved to a buffer first, as
        Lightning does, so the zip's records are named archive/...), or its
        tensors as the safetensors file flat_rel."""
        if self.baseline:
            tensors = [(p, ST_NAMES[t.dtype], list(t.shape), tensor_bytes(t))
                       for p, t in storage_tensors(obj)]
            if tensors:
                make_layouts.write_safetensors(self.path(flat_rel), tensors, {"format": "pt"})
        elif in_memory:
            buf = io.BytesIO()
            torch.save(obj, buf)
            with open(self.path(rel), "wb") as f:
                f.write(buf.getvalue())
        else:
            torch.save(obj, self.path(rel))

    def copy(self, src, rel, flat_rel):
        shutil.copyfile(src, self.path(flat_rel if self.baseline else rel))

    def text(self, rel, flat_rel, text):
        with open(self.path(flat_rel if self.baseline else rel), "w") as f:
            f.write(text)


def checkpoints(traj):
    """[(step, Optimizer, lr)] in step order."""
    last = traj.step_list()[-1]
    found = []
    for step in traj.step_list():
        if traj.optim(step) is None:
            fail("%s has no optimizer state (generate it with --optimizer)" % traj.weights(step))
        found.append((step, Optimizer(traj.optim(step)), lr_at(step, last)))
    return found


def write_trainer(traj, out):
    bf16 = traj.dtype_dir("bf16")
    for step, opt, lr in checkpoints(traj):
        d = "checkpoint-%d/" % step
        flat = "step-%d." % step
        out.copy(traj.weights(step, bf16), d + "model.safetensors", flat + "model.safetensors")
        out.torch_file(d + "optimizer.pt", flat + "optimizer.safetensors", opt.adamw_state_dict(step, lr))
        out.torch_file(d + "scheduler.pt", flat + "scheduler.safetensors", scheduler_state_dict(step, lr))
        out.torch_file(d + "rng_state.pth", flat + "rng_state.safetensors", rng_state(step))
        out.text(d + "trainer_state.json", flat + "trainer_state.json",
                 json.dumps(trainer_state(traj, step), indent=2, sort_keys=True) + "\n")


def write_lightning(traj, out):
    fp32 = traj.dtype_dir("fp32")
    hparams = hyper_parameters(traj)
    for k, (step, opt, lr) in enumerate(checkpoints(traj)):
        epoch = k // 2
        callback = "ModelCheckpoint{'monitor': None, 'mode': 'min', 'every_n_train_steps': 0, " \
                   "'every_n_epochs': 1, 'train_time_interval': None}"
        ckpt = {"epoch": epoch, "global_step": step, "pytorch-lightning_version": "2.0.0",
                "state_dict": state_dict(traj.weights(step, fp32), prefix="model."),
                "loops": {"fit_loop": {"state_dict": {}, "epoch_loop.state_dict": {"_batches_that_stepped": step},
                                       "epoch_progress": {"total": {"ready": epoch + 1, "completed": epoch}}}},
                "callbacks": {callback: {"monitor": None, "best_model_score": None, "best_model_path": "",
                                         "current_score": None, "dirpath": "checkpoints", "best_k_models": {},
                                         "kth_best_model_path": "", "kth_value": torch.tensor(float("inf")),
                                         "last_model_path": ""}},
                "optimizer_states": [opt.adamw_state_dict(step, lr)],
                "lr_schedulers": [scheduler_state_dict(step, lr)],
                "hparams_name": "kwargs", "hyper_parameters": hparams}
        out.torch_file("checkpoints/epoch=%d-step=%d.ckpt" % (epoch, step), "step-%d.safetensors" % step,
                       ckpt, in_memory=True)


DS_CONFIG = {"train_micro_batch_size_per_gpu": BATCH, "gradient_accumulation_steps": 1,
             "bf16": {"enabled": True}, "zero_optimization": {"stage": 1},
             "optimizer": {"type": "AdamW", "params": {"lr": BASE_LR, "betas": list(BETAS), "weight_decay": 0.1}}}
DS_VERSION = "0.10.0"


def write_deepspeed(traj, out):
    bf16, fp32 = traj.dtype_dir("bf16"), traj.dtype_dir("fp32")
    for step, opt, lr in checkpoints(traj):
        d = "global_step%d/" % step
        module = state_dict(traj.weights(step, bf16))
        master = state_dict(traj.weights(step, fp32))
        buffers = [n for n in module if n not in opt.params and n not in TIED]
        model_states = {
            "module": module, "buffer_names": buffers, "optimizer": None,
            "param_shapes": [OrderedDict((p, master[p].shape) for p in opt.params)],
            "frozen_param_shapes": None, "shared_params": dict(TIED), "frozen_param_fragments": None,
            "lr_scheduler": None, "data_sampler": None, "random_ltd": None,
            "sparse_tensor_module_names": set(), "skipped_steps": 0, "global_steps": step,
            "global_samples": step * BATCH, "dp_world_size": 1, "mp_world_size": 1,
            "ds_config": DS_CONFIG, "ds_version": DS_VERSION}
        flat = [torch.cat([f(p).reshape(-1) for p in opt.params])
                for f in (lambda p: master[p], opt.exp_avg, opt.exp_avg_sq)]
        optim_states = {
            "optimizer_state_dict": {
                "state": {0: {"step": step, "exp_avg": flat[1], "exp_avg_sq": flat[2]}},
                "param_groups": [{"lr": lr, "betas": BETAS, "eps": 1e-8, "weight_decay": 0.1,
                                  "amsgrad": False, "params": [0]}],
                "fp32_flat_groups": [flat[0]], "zero_stage": 1, "partition_count": [1],
                "ds_version": DS_VERSION},
            "ds_config": DS_CONFIG, "ds_version": DS_VERSION}
        out.torch_file(d + "mp_rank_00_model_states.pt", "step-%d.model_states.safetensors" % step, model_states)
        out.torch_file(d + "zero_pp_rank_0_mp_rank_00_optim_states.pt",
                       "step-%d.optim_states.safetensors" % step, optim_states)
    out.text("latest", "latest", "global_step%d" % traj.step_list()[-1])


def write_statedict(traj, out):
    fp32 = traj.dtype_dir("fp32")
    for name, dtype in CONVERT.items():
        for step in traj.step_list():
            out.torch_file("%s/model-%d.pt" % (name, step), "%s/step-%d.safetensors" % (name, step),
                           state_dict(traj.weights(step, fp32), dtype))


LAYOUTS = {"trainer": write_trainer, "lightning": write_lightning,
           "deepspeed": write_deepspeed, "statedict": write_statedict}


# ---- odd files: valid, torch.load reads them ----

def randn(*shape):
    return torch.randn(*shape, generator=GEN)


def odd_objects():
    """name -> (object, torch.save keyword arguments)."""
    w = randn(8, 4)
    base = torch.arange(64, dtype=torch.float32)
    big = randn(100)
    m = randn(6, 8)
    special = torch.tensor([float("nan"), -0.0, float("inf"), -float("inf"), 1e-45, 3.0])
    shared = [randn(3), "shared"]
    deep = randn(2)
    for k in range(24):
        deep = {"level%d" % k: [deep, k]}
    nested = {"list": [randn(2), (randn(3), 3, "x"), {"k": [randn(1, 1)]}], "int": 7, "neg": -5,
              "big": 2 ** 70, "float": 1.5, "bool": True, "none": None, "str": "hello",
              "unicode": "h\u00e9llo \u2713", "bytes": b"\x00\x01\xff", "tuples": ((1, 2), (3,), ()),
              "shared": shared, "again": shared, "deep": deep, "int keys": {0: randn(2), -1: randn(2)}}
    dtypes = OrderedDict((str(t.dtype), t) for t in [
        special.double(), special, special.half(), special.bfloat16(), torch.arange(-3, 3),
        torch.arange(-3, 3, dtype=torch.int32), torch.arange(-3, 3, dtype=torch.int16),
        torch.arange(-3, 3, dtype=torch.int8), torch.arange(250, 256, dtype=torch.uint8),
        torch.tensor([True, False, True]), randn(3).to(torch.complex64)])
    weights = OrderedDict([("embed", w), ("lm_head", w), ("flat", w.view(32)), ("bias", randn(4))])
    return {
        "tied.pt": (weights, {}),
        "views.pth": ({"head": base[:16], "middle": base[16:40].view(4, 6), "tail": base[40:],
                       "slice of a larger storage": big[10:20]}, {}),
        "noncontig.pt": ({"transposed": m.t(), "every other": m[:, ::2], "expanded": randn(2).expand(3, 2),
                          "channels last": randn(2, 3, 4, 5).to(memory_format=torch.channels_last)}, {}),
        "scalars.bin": ({"0-d": torch.tensor(3.5), "0-d int": torch.tensor(7), "empty": torch.empty(0),
                         "empty 3x0x2": torch.zeros(3, 0, 2), "one": randn(1)}, {}),
        "dtypes.pt": (dtypes, {}),
        "nested.ckpt": (nested, {}),
        "parameter.pt": ({"p": torch.nn.Parameter(randn(3, 2)), "frozen": torch.nn.Parameter(randn(2), False)}, {}),
        "storage.pt": ({"storage": randn(5).storage(), "tensor": randn(2)}, {}),
        "numpy.pth": ({"numpy": np.random.RandomState(0).get_state(), "array": np.arange(6).reshape(2, 3),
                       "cpu": torch.Generator().manual_seed(0).get_state()}, {}),
        "legacy.pt": (weights, {"_use_new_zipfile_serialization": False}),
        "protocol4.pt": (nested, {"pickle_protocol": 4}),
    }


def rezip(raw, deflate):
    """raw's zip entries written again by Python's zipfile: no 64-byte
    alignment, and the entries deflate names compressed."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(raw)) as zin, zipfile.ZipFile(out, "w") as zout:
        for info in zin.infolist():
            method = zipfile.ZIP_DEFLATED if deflate(info.filename) else zipfile.ZIP_STORED
            zout.writestr(info.filename, zin.read(info), method)
    return out.getvalue()


def saved_bytes(obj, **kwargs):
    buf = io.BytesIO()
    torch.save(obj, buf, **kwargs)
    return buf.getvalue()


def write_odd(out):
    os.makedirs(out)
    for name, (obj, kwargs) in odd_objects().items():
        torch.save(obj, os.path.join(out, name), **kwargs)
    raw = saved_bytes({"a": randn(40), "b": randn(3, 5)})
    with open(os.path.join(out, "unaligned.pt"), "wb") as f:
        f.write(rezip(raw, lambda n: False))
    with open(os.path.join(out, "deflated.pt"), "wb") as f:
        f.write(rezip(raw, lambda n: n.endswith("/data/0")))


# ---- hostile files: no parser may trust them ----

def crafted_pickle_module(transform=lambda data: data, persistent_id=None, reducer_override=None):
    """A pickle_module for torch.save: the pickle is made as torch makes it
    (its persistent_id registers the storages), but persistent_id(torch's,
    obj) and reducer_override(obj) may change what is pickled, and
    transform(bytes) what is written as data.pkl."""

    class Crafted(pickle.Pickler):
        def reducer_override(self, obj):
            return reducer_override(obj) if reducer_override else NotImplemented

    class Pickler:
        def __init__(self, f, protocol):
            self.f, self.protocol = f, protocol
            self.persistent_id = None

        def dump(self, obj):
            buf = io.BytesIO()
            p = Crafted(buf, protocol=self.protocol)
            torch_pid = self.persistent_id
            p.persistent_id = (lambda o: persistent_id(torch_pid, o)) if persistent_id else torch_pid
            p.dump(obj)
            self.f.write(transform(buf.getvalue()))

    module = types.ModuleType("crafted_pickle")
    module.Pickler = Pickler
    return module


class Call:
    """Pickled as a call of func(*args) (a reduce)."""

    def __init__(self, func, args):
        self.func, self.args = func, args


def reduce_calls(obj):
    return (obj.func, obj.args) if isinstance(obj, Call) else NotImplemented


def reduce_far_views(obj):
    """Tensors pickled as views that start 2^40 elements into their
    storage."""
    if not isinstance(obj, torch.Tensor):
        return NotImplemented
    return torch._utils._rebuild_tensor_v2, (obj.storage(), 2 ** 40, obj.size(), obj.stride(), False, OrderedDict())


# The fields of torch's persistent id of a storage: ("storage", type, key,
# location, element count).
PID_KEY, PID_NUMEL = 2, 4


def storage_ids_with(field, value):
    """A persistent_id for crafted_pickle_module: torch's, with field of
    every storage's id set to value."""
    def persistent_id(torch_pid, obj):
        pid = torch_pid(obj)
        return pid if pid is None else pid[:field] + (value,) + pid[field + 1:]
    return persistent_id


def huge_memo(data):
    """Every memo put and get of a protocol 2 pickle moved to an index
    near 2^32 (LONG_BINPUT and LONG_BINGET): memo slot k becomes
    2^32 - 1 - k."""
    out = []
    ops = list(pickletools.genops(data))
    for k, (op, arg, pos) in enumerate(ops):
        end = ops[k + 1][2] if k + 1 < len(ops) else len(data)
        if op.name in ("BINPUT", "LONG_BINPUT"):
            out.append(b"r" + struct.pack("<I", 0xFFFFFFFF - arg))
        elif op.name in ("BINGET", "LONG_BINGET"):
            out.append(b"j" + struct.pack("<I", 0xFFFFFFFF - arg))
        else:
            out.append(data[pos:end])
    return b"".join(out)


def patch_eocd_offsets(raw, offset):
    """The zip's central directory offset (in its end record and its zip64
    end record) set to offset."""
    b = bytearray(raw)
    eocd = b.rfind(b"PK\x05\x06")
    zip64 = b.rfind(b"PK\x06\x06")
    if eocd < 0 or zip64 < 0:
        fail("torch.save wrote no zip64 end record")
    b[eocd + 16:eocd + 20] = struct.pack("<I", min(offset, 0xFFFFFFFF))
    b[zip64 + 48:zip64 + 56] = struct.pack("<Q", offset)
    return bytes(b)


def patch_local_offset(raw, entry_suffix, offset):
    """The local header offset of the central directory entry whose name
    ends in entry_suffix set to offset."""
    b = bytearray(raw)
    at = b.find(b"PK\x01\x02")
    while at >= 0:
        n = struct.unpack_from("<H", b, at + 28)[0]
        if bytes(b[at + 46:at + 46 + n]).endswith(entry_suffix.encode()):
            b[at + 42:at + 46] = struct.pack("<I", offset)
            return bytes(b)
        at = b.find(b"PK\x01\x02", at + 4)
    fail("no central directory entry ends in %s" % entry_suffix)


def write_hostile(out):
    os.makedirs(out)
    weights = {"weight": randn(16, 4), "bias": randn(4)}
    raw = saved_bytes(weights)

    def crafted(**kwargs):
        return saved_bytes(weights, pickle_module=crafted_pickle_module(**kwargs))

    files = {
        "truncated.pt": raw[:len(raw) // 2],
        "cd_outside.pt": patch_eocd_offsets(raw, len(raw) + 4096),
        "local_outside.pt": patch_local_offset(raw, "/data/0", len(raw) + 4096),
        # Python pickles os.system as posix.system: the GLOBAL is renamed.
        "os_system.pt": saved_bytes(dict(weights, hook=Call(os.system, ("true",))),
                                    pickle_module=crafted_pickle_module(
                                        transform=lambda d: d.replace(b"cposix\nsystem\n", b"cos\nsystem\n"),
                                        reducer_override=reduce_calls)),
        "huge_memo.pt": crafted(transform=huge_memo),
        "storage_too_large.pt": crafted(persistent_id=storage_ids_with(PID_NUMEL, 2 ** 40)),
        "missing_storage.pt": crafted(persistent_id=storage_ids_with(PID_KEY, "77")),
        "view_outside.pt": crafted(reducer_override=reduce_far_views),
    }
    for name, data in files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--baseline", action="store_true",
                    help="write the flat safetensors layout of the same tensors instead")
    ap.add_argument("kind", choices=sorted(LAYOUTS) + ["odd", "hostile"])
    ap.add_argument("dir", help="the directory to create")
    ap.add_argument("traj", nargs="?", help="generator output folder (the layouts)")
    args = ap.parse_args()
    if os.path.lexists(args.dir):
        fail("%s exists" % args.dir)
    if args.kind in LAYOUTS:
        if args.traj is None:
            fail("%s takes a trajectory" % args.kind)
        LAYOUTS[args.kind](make_layouts.Trajectory(args.traj, "bf16"), Output(args.dir, args.baseline))
    elif args.baseline or args.traj is not None:
        fail("%s takes only DIR" % args.kind)
    elif args.kind == "odd":
        write_odd(args.dir)
    else:
        write_hostile(args.dir)


if __name__ == "__main__":
    main()
