#!/usr/bin/env python3
"""Writes the seed corpus of the libFuzzer harnesses: tests/fuzz/corpus/<name>/.
corpus/checkpoint/ comes from the harness itself: TD_FUZZ_SEED_OUT=<file> build-fuzz/fuzz/fuzz_checkpoint.
The files named by a SHA-1 come from the long runs (bench/RESULTS.md): the run's corpus merged into the seeds
(libFuzzer -merge=1), then, smallest first, only the inputs that raise the seeds' edge coverage."""
import gzip
import json
import os
import struct

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(name, fname, data):
    os.makedirs(os.path.join(root, name), exist_ok=True)
    with open(os.path.join(root, name, fname), "wb") as f:
        f.write(data)


def safetensors(tensors, meta=None):
    """tensors: (name, dtype, shape, raw bytes), laid out in order."""
    header, off, body = {}, 0, b""
    if meta:
        header["__metadata__"] = meta
    for name, dt, shape, raw in tensors:
        header[name] = {"dtype": dt, "shape": shape, "data_offsets": [off, off + len(raw)]}
        off += len(raw)
        body += raw
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + body


f32 = lambda *v: struct.pack("<%df" % len(v), *v)
put("safetensors", "f32_2x3", safetensors([("w", "F32", [2, 3], f32(1, 2, 3, 4, 5, 6))]))
put("safetensors", "mixed_meta", safetensors(
    [("a.idx", "I64", [2], struct.pack("<2q", 7, -1)), ("b", "F16", [1, 2], b"\x00\x3c\x00\xc0"),
     ("c", "U8", [0, 4], b""), ("d", "BF16", [], b"\x80\x3f")], {"format": "pt", "step": "3"}))
put("safetensors", "empty", safetensors([]))


def idx(type_code, shape, raw):
    return struct.pack(">BBBB", 0, 0, type_code, len(shape)) + struct.pack(">%dI" % len(shape), *shape) + raw


put("idx", "images_u8", idx(0x08, [2, 3, 3], bytes(range(18))))
put("idx", "labels_u8", idx(0x08, [4], bytes([1, 0, 9, 3])))
put("idx", "f32", idx(0x0D, [2, 2], struct.pack(">4f", 0.5, -1, 2, 3)))
put("idx", "i16", idx(0x0B, [3], struct.pack(">3h", -2, 0, 5)))
put("idx", "labels_gz", gzip.compress(idx(0x08, [3], bytes([2, 7, 1])), mtime=0))

put("cifar", "one_record", bytes([3]) + bytes((i * 7) % 256 for i in range(3072)))

for i, args in enumerate([["--model", "mlp", "--batch", "32", "--lr", "0.01", "--epochs=2"],
                          ["--model", "gpt", "--text", "a.txt", "--context", "64", "--layers", "2", "--d-model", "96",
                           "--heads", "3", "--steps", "10"],
                          ["--resume", "--checkpoint", "ck.safetensors", "--workers", "2", "--seed", "7",
                           "--optimizer", "sgd", "--deterministic"],
                          ["--device", "cpu", "--limit", "100", "--log", "l.csv", "--checkpoint-every", "5",
                           "--max-steps", "20", "--capture"]]):
    put("cli", "args%d" % i, b"\0".join(a.encode() for a in args))

put("glsl", "copy", b"""#version 450
layout(local_size_x = 64) in;
layout(std430, binding = 0) readonly buffer A { float a[]; };
layout(std430, binding = 1) writeonly buffer B { float b[]; };
layout(push_constant) uniform P { uint n; float s; } p;
void main() {
    uint i = gl_GlobalInvocationID.x;
    if (i < p.n) b[i] = p.s * a[i];
}
""")
put("glsl", "shared_reduce", b"""#version 450
layout(local_size_x = 32) in;
layout(std430, binding = 0) buffer A { float a[]; };
shared float s[32];
void main() {
    uint l = gl_LocalInvocationID.x;
    s[l] = a[gl_GlobalInvocationID.x];
    barrier();
    for (uint k = 16; k > 0; k >>= 1) {
        if (l < k) s[l] += s[l + k];
        barrier();
    }
    if (l == 0) a[gl_WorkGroupID.x] = s[0];
}
""")

# math blocks: 4 bytes of input shapes, then the source
put("math", "mlp", b"\x11\x22\x33\x44h = relu(W1 @ x + b1)\ny = W2 @ h + b2\nloss = ((y - target)^2).mean()")
put("math", "rows", b"\x05\x06\x07\x08x.sum(dim=[0, 1], keepdim=true) * softmax(x, -1) + layer_norm(x, w, w)")
put("math", "misc", b"\x01\x02\x03\x04a = x > 0 ? exp(x) : -x^2; return a, clamp(a, -1, 1), max(a, y), x' @ x, "
    b"cross_entropy(x, t)")
