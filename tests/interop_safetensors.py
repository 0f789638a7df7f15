#!/usr/bin/python3
"""safetensors interop between Trident and PyTorch (run by tests/test_safetensors.c).

    interop_safetensors.py read FILE    check a file Trident wrote: layout rules and values
    interop_safetensors.py write FILE   write the same tensors from PyTorch for Trident to read

The safetensors Python package may be absent, so the format is parsed and written
by hand (struct + json + torch.frombuffer), following the reference rules: an
8-byte little-endian header length, a JSON header padded with spaces to a multiple
of 8, tensors sorted by descending dtype alignment then name, contiguous offsets.
Exit status 0 means success; 3 means torch is missing (the test skips).
"""
import json
import struct
import sys

try:
    import torch
except ImportError:
    print("torch is not importable by", sys.executable)
    sys.exit(3)

DTYPES = {"F32": torch.float32, "F64": torch.float64, "F16": torch.float16, "BF16": torch.bfloat16,
          "I32": torch.int32, "I64": torch.int64, "U8": torch.uint8, "BOOL": torch.bool}
RANK = {"BOOL": 0, "U8": 1, "F16": 7, "BF16": 8, "I32": 9, "F32": 11, "F64": 12, "I64": 13}  # reference enum order


def expected():
    """The tensors both sides agree on (tests/test_safetensors.c builds the same)."""
    return {
        "weight": torch.arange(12, dtype=torch.float32).reshape(3, 4) * 0.25 - 1,
        "bias": torch.tensor([1.5, -2.25, 3.125, 1e-3], dtype=torch.float64),
        "half": (torch.arange(5, dtype=torch.float32) * 0.5).to(torch.float16),
        "bf": torch.tensor([[1.0, -2.0], [0.5, 4.0]]).to(torch.bfloat16),
        "idx": torch.tensor([-1, 0, 1 << 40], dtype=torch.int64),
        "i32": torch.tensor([7, -9], dtype=torch.int32),
        "u8": torch.tensor([0, 1, 128, 255], dtype=torch.uint8),
        "mask": torch.tensor([True, False, True]),
        "scalar": torch.tensor(3.5, dtype=torch.float32),
    }


def name_of(dtype):
    return next(k for k, v in DTYPES.items() if v == dtype)


def read(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    assert n % 8 == 0, f"header length {n} is not a multiple of 8"
    header = json.loads(data[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    assert meta.get("producer") == "trident", f"metadata {meta}"
    buf = data[8 + n:]
    order = sorted(header.items(), key=lambda kv: kv[1]["data_offsets"])
    at = 0
    for name, info in order:
        b, e = info["data_offsets"]
        assert b == at, f"{name}: begins at {b}, expected {at}"
        at = e
    assert at == len(buf), f"buffer is {len(buf)} bytes, header covers {at}"
    want_order = sorted(header, key=lambda k: (-RANK[header[k]["dtype"]], k))
    assert [k for k, _ in order] == want_order, f"order {[k for k, _ in order]} != {want_order}"
    want = expected()
    assert set(header) == set(want), f"names {sorted(header)}"
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt = DTYPES[info["dtype"]]
        t = torch.frombuffer(bytearray(buf[b:e]), dtype=dt) if e > b else torch.empty(0, dtype=dt)
        t = t.reshape(info["shape"])
        assert t.dtype == want[name].dtype and torch.equal(t, want[name]), f"{name}: {t} != {want[name]}"
    print("pytorch read trident's file: ok")


def write(path):
    tensors = expected()
    names = sorted(tensors, key=lambda k: (-RANK[name_of(tensors[k].dtype)], k))
    header, chunks, at = {"__metadata__": {"producer": "torch"}}, [], 0
    for k in names:
        t = tensors[k].contiguous()
        raw = (t.view(torch.int16) if t.dtype in (torch.float16, torch.bfloat16) else t).numpy().tobytes()
        header[k] = {"dtype": name_of(t.dtype), "shape": list(t.shape), "data_offsets": [at, at + len(raw)]}
        chunks.append(raw)
        at += len(raw)
    h = json.dumps(header, separators=(",", ":")).encode("utf-8")
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(chunks))
    print("pytorch wrote", path)


if __name__ == "__main__":
    {"read": read, "write": write}[sys.argv[1]](sys.argv[2])
