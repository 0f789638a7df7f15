"""PyTorch twin of the reference workloads in ../WORKLOADS.md (W1 MLP, W2 CNN, W3 GPT-mini, W4 ops).

Usage: python3 torch_workloads.py DATA_DIR DEVICE [--epochs N] [--quick]
                                  [--only PARTS] [--matmul-n N] [--elems M] [--batch B] [--max-steps S]
                                  [--gpt-size D,H,L,T] [--gpt-batch B] [--gpt-steps N] [--no-compile]
                                  [--gpt2-size D,H,L,T] [--gpt2-batch B] [--amp bf16|fp16]
DATA_DIR holds the four Fashion-MNIST *-ubyte.gz files. DEVICE: cpu or cuda.
bench/torch_workloads.py is ../shared/anchors/torch_workloads.py with these
flags added, so `trident bench --torch` asks for what it measures, at its sizes;
without them it behaves as the anchor:
--only PARTS    a comma list of ops, w1, w2, w3, w5, dispatch: run those parts alone
                (dispatch: 10k adds of [1] tensors, then one synchronize; only
                when named).
DATA_DIR -      W1/W2 train on random pixels and labels (timing only).
--matmul-n, --elems   the W4 sizes.
--batch B       W1/W2's batch (default 128; the line then carries "batch").
--max-steps S   at most S steps per W1/W2 epoch (the line then carries "steps").
--gpt-size D,H,L,T    W3's d_model, heads, layers and context; --gpt-batch B its
                batch (default 64 on cuda, 8 on cpu); --gpt-steps N its timed
                steps (default 20 on cuda, 2 on cpu); --no-compile skips the
                torch.compile run on cuda.
--gpt2-size D,H,L,T, --gpt2-batch B   W5 (part w5, GPT-2 small with a byte
                vocabulary: 768,12,12,1024, batch 16): on cuda, or on any
                device at a reduced size (d_model <= 128).
--only w6       W6, the LSTM language model (2 layers, hidden 512, batch 32, seq 256;
                --lstm-size HIDDEN,T, --lstm-batch B, --lstm-steps N (default 20 on cuda, 2 on cpu)).
--only w7       W7, a U-Net-style block fwd+bwd and its depthwise conv and ConvTranspose2d
                alone (--unet-size BATCH,SIDE: input [BATCH, 64, SIDE, SIDE], default 16,128).
--amp bf16|fp16 W3/W5 also run under torch.autocast (fp16 with a GradScaler);
                those lines carry dtype "<dtype>-amp". On cuda every gpt line
                carries peak_bytes (torch.cuda.max_memory_allocated).
Prints one JSON line per measurement. The same workloads are defined in
../WORKLOADS.md, so Trident and PyTorch can be measured side by side in one run.
"""
import gzip, json, math, os, struct, sys, time
import torch
import torch.nn as nn
import torch.nn.functional as F

def idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2051:
        r, c = struct.unpack(">II", data[8:16])
        return torch.frombuffer(bytearray(data[16:]), dtype=torch.uint8).reshape(n, r * c)
    return torch.frombuffer(bytearray(data[8:]), dtype=torch.uint8).long()

def emit(**kw):
    print(json.dumps(kw), flush=True)

def sync(dev):
    if dev == "cuda":
        torch.cuda.synchronize()

def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))

def cnn():
    return nn.Sequential(
        nn.Unflatten(1, (1, 28, 28)),
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))

def train(name, model, xtr, ytr, xte, yte, dev, epochs, bs=128, max_steps=None):
    torch.manual_seed(0)
    model = model.to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    n = xtr.shape[0]
    times = []
    for ep in range(epochs):
        perm = torch.randperm(n, device=dev)
        sync(dev); t0 = time.perf_counter()
        model.train()
        for i in range(0, n - bs + 1 if max_steps is None else min(n - bs + 1, max_steps * bs), bs):
            b = perm[i:i + bs]
            loss = F.cross_entropy(model(xtr[b]), ytr[b])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
        sync(dev); times.append(time.perf_counter() - t0)
    model.eval()
    with torch.no_grad():
        acc = sum((model(xte[i:i + 1000]).argmax(1) == yte[i:i + 1000]).sum().item() for i in range(0, xte.shape[0], 1000)) / xte.shape[0]
    extra = {} if max_steps is None else {"steps": min(max_steps, n // bs)}
    if "--batch" in sys.argv:
        extra["batch"] = bs
    emit(workload=name, device=dev, epochs=epochs, epoch_s=[round(t, 3) for t in times],
         best_epoch_s=round(min(times), 3), test_acc=round(acc, 4), final_loss=round(loss.item(), 4), **extra)

class Block(nn.Module):
    def __init__(s, d, h):
        super().__init__()
        s.ln1, s.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        s.qkv, s.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        s.fc, s.out = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)
        s.h = h
    def forward(s, x):
        B, T, C = x.shape
        q, k, v = s.qkv(s.ln1(x)).split(C, dim=2)
        q, k, v = [t.view(B, T, s.h, C // s.h).transpose(1, 2) for t in (q, k, v)]
        if hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # torch < 2.0
            att = (q @ k.transpose(-2, -1)) / math.sqrt(k.shape[-1])
            att = att.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            y = att.softmax(-1) @ v
        x = x + s.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        return x + s.out(F.gelu(s.fc(s.ln2(x))))

class GPT(nn.Module):
    def __init__(s, vocab=256, d=384, h=6, L=6, T=256):
        super().__init__()
        s.tok, s.pos = nn.Embedding(vocab, d), nn.Embedding(T, d)
        s.blocks = nn.Sequential(*[Block(d, h) for _ in range(L)])
        s.ln, s.head = nn.LayerNorm(d), nn.Linear(d, vocab)
    def forward(s, idx):
        x = s.tok(idx) + s.pos(torch.arange(idx.shape[1], device=idx.device))
        return s.head(s.ln(s.blocks(x)))

def gpt(dev, compiled, steps, B=64, T=256, cfg=None, name="W3-gpt-mini", amp=None):
    """amp: None, torch.bfloat16 or torch.float16 (forward and loss under
    torch.autocast; fp16 with a GradScaler); the line's dtype is then
    "<dtype>-amp". On cuda the line carries peak_bytes (max_memory_allocated)."""
    torch.manual_seed(0)
    cfg = cfg or {}
    T = cfg.get("T", T)
    if dev == "cuda": torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats()
    m = GPT(**cfg).to(dev)
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4)
    f = torch.compile(m) if compiled else m
    data = torch.randint(0, 256, (B, T + 1), device=dev)
    scaler = torch.amp.GradScaler(dev) if amp == torch.float16 else None
    def step():
        with torch.autocast(dev, dtype=amp or torch.float32, enabled=amp is not None):
            logits = f(data[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, 256), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        if scaler:
            scaler.scale(loss).backward(); scaler.step(opt); scaler.update()
        else:
            loss.backward(); opt.step()
        return loss
    for _ in range(3): step()
    sync(dev); t0 = time.perf_counter()
    for _ in range(steps): step()
    sync(dev); dt = (time.perf_counter() - t0) / steps
    extra = {"dtype": str(amp).replace("torch.", "") + "-amp"} if amp else {}
    if dev == "cuda": extra["peak_bytes"] = torch.cuda.max_memory_allocated()
    emit(workload=name, device=dev, compiled=compiled, ms_per_step=round(dt * 1e3, 3),
         tokens_per_s=round(B * T / dt), params=sum(p.numel() for p in m.parameters()), **extra)
    del m, opt, f

class LSTMLM(nn.Module):
    """W6: emb -> 2-layer LSTM (batch_first) -> head, as src/workloads' workload_lstm_new."""
    def __init__(s, vocab=256, hidden=512, layers=2):
        super().__init__()
        s.emb, s.rnn = nn.Embedding(vocab, hidden), nn.LSTM(hidden, hidden, layers, batch_first=True)
        s.head = nn.Linear(hidden, vocab)
    def forward(s, idx):
        return s.head(s.rnn(s.emb(idx))[0])

def lstm(dev, steps, B=32, T=256, hidden=512):
    """W6: the LSTM language model on random bytes, Adam lr 1e-3 (cuDNN's LSTM on cuda)."""
    torch.manual_seed(0)
    m = LSTMLM(hidden=hidden).to(dev)
    opt = torch.optim.Adam(m.parameters(), lr=1e-3)
    data = torch.randint(0, 256, (B, T + 1), device=dev)
    def step():
        loss = F.cross_entropy(m(data[:, :-1]).reshape(-1, 256), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward(); opt.step()
    dt = timeit(step, dev, steps)
    emit(workload="W6-lstm", device=dev, compiled=False, ms_per_step=round(dt * 1e3, 3),
         tokens_per_s=round(B * T / dt), params=sum(p.numel() for p in m.parameters()))
    del m, opt

def unet(dev, N=16, S=128, steps=20):
    """W7 as bench_workloads.c's run_unet_row: the block, then the depthwise conv and ConvTranspose2d alone,
    f32 fwd+bwd, parameters' grads set to None before each step; images/s."""
    torch.manual_seed(0)
    C = 64
    shapes = [(C, C, 3, 3), (C, 1, 3, 3), (2 * C, C, 3, 3), (2 * C, C, 2, 2)]
    w = [(torch.randn(s, device=dev) / (s[1] * s[2] * s[3])).requires_grad_() for s in shapes]
    b = [torch.zeros(n, device=dev, requires_grad=True) for n in (C, C, 2 * C, C)]
    def block(x):
        h1 = F.relu(F.conv2d(x, w[0], b[0], padding=1))
        h2 = F.relu(F.conv2d(h1, w[1], b[1], padding=1, groups=C))
        h3 = F.relu(F.conv2d(h2, w[2], b[2], stride=2, padding=1))
        return F.conv_transpose2d(h3, w[3], b[3], stride=2) + h1
    runs = [("W7-unet", torch.randn(N, C, S, S, device=dev), block),
            ("W7-depthwise", torch.randn(N, C, S, S, device=dev, requires_grad=True),
             lambda x: F.conv2d(x, w[1], b[1], padding=1, groups=C)),
            ("W7-convtranspose", torch.randn(N, 2 * C, S // 2, S // 2, device=dev, requires_grad=True),
             lambda x: F.conv_transpose2d(x, w[3], b[3], stride=2))]
    # cuDNN's f32 convolutions: strict (Trident's default, the ratio's row) and TF32 (torch's default), on CUDA
    for tf32 in ([False, True] if dev == "cuda" else [False]):
        torch.backends.cudnn.allow_tf32 = tf32
        for name, x, f in runs:
            def step():
                for p in w + b: p.grad = None
                x.grad = None
                f(x).sum().backward()
            dt = timeit(step, dev, steps)
            emit(workload=name, device=dev, shape=list(x.shape), tf32=tf32, ms_per_step=round(dt * 1e3, 3),
                 samples_per_s=round(N / dt, 1))
    torch.backends.cudnn.allow_tf32 = True

def timeit(fn, dev, reps):
    for _ in range(3): fn()
    sync(dev); t0 = time.perf_counter()
    for _ in range(reps): fn()
    sync(dev); return (time.perf_counter() - t0) / reps

def ops(dev, quick, n=None, m=None):
    n = n or (1024 if quick else 4096)
    for dt in ([torch.float32] if dev == "cpu" else [torch.float32, torch.bfloat16, torch.float16]):
        for tf32 in ([False] if dt != torch.float32 or dev == "cpu" else [False, True]):
            torch.backends.cuda.matmul.allow_tf32 = tf32
            a = torch.randn(n, n, device=dev, dtype=dt); b = torch.randn(n, n, device=dev, dtype=dt)
            t = timeit(lambda: a @ b, dev, 20 if dev == "cuda" else 5)
            emit(workload="W4-matmul", device=dev, n=n, dtype=str(dt), tf32=tf32, tflops=round(2 * n ** 3 / t / 1e12, 2))
    torch.backends.cuda.matmul.allow_tf32 = False
    m = m or ((1 << 24) if quick or dev == "cpu" else (1 << 28))
    x = torch.randn(m, device=dev); y = torch.randn(m, device=dev)
    t = timeit(lambda: x + y, dev, 20)
    emit(workload="W4-add", device=dev, elems=m, gbps=round(3 * 4 * m / t / 1e9, 1))
    rows = m // 4096
    z = x.view(rows, 4096)
    t = timeit(lambda: torch.softmax(z, dim=1), dev, 20)
    emit(workload="W4-softmax", device=dev, shape=[rows, 4096], gbps=round(2 * 4 * m / t / 1e9, 1))
    w = torch.ones(4096, device=dev); bb = torch.zeros(4096, device=dev)
    t = timeit(lambda: F.layer_norm(z, (4096,), w, bb), dev, 20)
    emit(workload="W4-layernorm", device=dev, shape=[rows, 4096], gbps=round(2 * 4 * m / t / 1e9, 1))
    t = timeit(lambda: x.sum(), dev, 20)
    emit(workload="W4-sum", device=dev, elems=m, gbps=round(4 * m / t / 1e9, 1))

def dispatch(dev, n=10000, reps=5):
    a = torch.randn(1, device=dev); b = torch.randn(1, device=dev)
    for _ in range(100): a + b
    sync(dev)
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        for _ in range(n): a + b
        sync(dev); times.append(time.perf_counter() - t0)
    t = sorted(times)[reps // 2]
    emit(workload="dispatch", device=dev, ops=n, us_per_op=round(t / n * 1e6, 3), ops_per_s=round(n / t))

def main():
    data, dev = sys.argv[1], sys.argv[2]
    quick = "--quick" in sys.argv
    epochs = int(sys.argv[sys.argv.index("--epochs") + 1]) if "--epochs" in sys.argv else 3
    only = set(sys.argv[sys.argv.index("--only") + 1].split(",")) if "--only" in sys.argv else {"ops", "w1", "w2", "w3"}
    arg = lambda flag: int(sys.argv[sys.argv.index(flag) + 1]) if flag in sys.argv else None
    emit(torch=torch.__version__, device=dev, name=torch.cuda.get_device_name() if dev == "cuda" else "cpu",
         threads=torch.get_num_threads())
    if only & {"w1", "w2"} and data == "-":
        torch.manual_seed(0)
        xtr, ytr = torch.rand(60000, 784, device=dev), torch.randint(0, 10, (60000,), device=dev)
        xte, yte = torch.rand(10000, 784, device=dev), torch.randint(0, 10, (10000,), device=dev)
    elif only & {"w1", "w2"}:
        xtr = (idx(os.path.join(data, "train-images-idx3-ubyte.gz")).float() / 255.0).to(dev)
        ytr = idx(os.path.join(data, "train-labels-idx1-ubyte.gz")).to(dev)
        xte = (idx(os.path.join(data, "t10k-images-idx3-ubyte.gz")).float() / 255.0).to(dev)
        yte = idx(os.path.join(data, "t10k-labels-idx1-ubyte.gz")).to(dev)
    if "ops" in only:
        ops(dev, quick, arg("--matmul-n"), arg("--elems"))
    if "w1" in only:
        train("W1-mlp", mlp(), xtr, ytr, xte, yte, dev, epochs, arg("--batch") or 128, arg("--max-steps"))
    if "w2" in only:
        train("W2-cnn", cnn(), xtr, ytr, xte, yte, dev, epochs, arg("--batch") or 128, arg("--max-steps"))
    if "dispatch" in only:
        dispatch(dev)
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}[sys.argv[sys.argv.index("--amp") + 1]] \
        if "--amp" in sys.argv else None
    def gpt_runs(name, cfg, batch, default_batch):
        if dev == "cuda":
            for a in [None, amp] if amp else [None]:
                gpt(dev, False, arg("--gpt-steps") or 20, B=batch or default_batch, cfg=cfg, name=name, amp=a)
                if "--no-compile" not in sys.argv:
                    gpt(dev, True, arg("--gpt-steps") or 20, B=batch or default_batch, cfg=cfg, name=name, amp=a)
        else:
            for a in [None, amp] if amp else [None]:
                gpt(dev, False, arg("--gpt-steps") or 2, B=batch or 8, cfg=cfg, name=name, amp=a)
    if "w3" in only:
        size = sys.argv[sys.argv.index("--gpt-size") + 1].split(",") if "--gpt-size" in sys.argv else None
        cfg = dict(zip(("d", "h", "L", "T"), map(int, size))) if size else None
        gpt_runs("W3-gpt-mini", cfg, arg("--gpt-batch"), 64)
    if "w5" in only:
        size = sys.argv[sys.argv.index("--gpt2-size") + 1].split(",") if "--gpt2-size" in sys.argv else None
        cfg = dict(zip(("d", "h", "L", "T"), map(int, size))) if size else dict(d=768, h=12, L=12, T=1024)
        if dev == "cuda" or cfg["d"] <= 128:  # the full W5 is for GPUs; a reduced size runs anywhere
            gpt_runs("W5-gpt2-small", cfg, arg("--gpt2-batch"), 16)
    if "w7" in only:
        size = sys.argv[sys.argv.index("--unet-size") + 1].split(",") if "--unet-size" in sys.argv else (16, 128)
        unet(dev, N=int(size[0]), S=int(size[1]), steps=20 if dev == "cuda" else 3)
    if "w6" in only:
        size = sys.argv[sys.argv.index("--lstm-size") + 1].split(",") if "--lstm-size" in sys.argv else (512, 256)
        lstm(dev, arg("--lstm-steps") or (20 if dev == "cuda" else 2), B=arg("--lstm-batch") or 32,
             hidden=int(size[0]), T=int(size[1]))

if __name__ == "__main__":
    main()
