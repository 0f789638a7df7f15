"""PyTorch DDP twin of `trident bench --ddp`: W3 (GPT-mini, 64x256 tokens per process, 8 on the CPU) and W5
(GPT-2 small, 16x1024), bench/torch_workloads.py's GPT, trained on a fixed random batch per process, AdamW.
Run by `python -m torch.distributed.run --nproc_per_node N torch_ddp.py --device cuda|cpu --only W3,W5
--amp fp32|bf16 --zero 0,1 --ddp-grad-dtype fp32,bf16 --steps S --warmup W [--quick]` (or `trident launch`). Each workload runs in
each configuration (DDP or ZeroRedundancyOptimizer; float32 gradients or DDP's bf16_compress_hook; one
process: the plain model once) on a fresh model: W warm-up steps, S timed, then S with the collectives left
out (no_sync; ZeRO's local step without its parameter broadcast). Rank 0 prints, per run, the line of
Trident's workers: ddp-result wl=W3 zero=0 grad=fp32 world=N ms=X tps=Y peak_mib=P opt_mib=O comm=C loss=L
(peak: max_memory_allocated, opt: the optimizer state's bytes, both the largest over the ranks; -1 on the
CPU). A configuration this torch or backend cannot run is skipped with a line on stderr."""
import os, sys, time
import torch
import torch.distributed as dist
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_workloads import GPT

def arg(name, default):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else default

def state_bytes(opt):
    o = getattr(opt, "optim", opt)  # ZeroRedundancyOptimizer keeps its shard's optimizer in .optim
    return sum(t.numel() * t.element_size() for s in o.state.values() for t in s.values() if torch.is_tensor(t))

def run(wl, zero, grad, dev, world, rank, local, quick, amp, steps, warmup):
    cuda = dev.type == "cuda"
    cfg = dict(d=768, h=12, L=12, T=1024) if wl == 5 else {}
    B = 16 if wl == 5 else 64 if cuda else 8
    if quick: cfg, B = dict(d=32, h=2, L=1, T=32), 4
    T = cfg.get("T", 256)
    if cuda: torch.cuda.empty_cache(); torch.cuda.reset_peak_memory_stats(dev)
    torch.manual_seed(0)
    m = GPT(**cfg).to(dev)
    f = m
    if world > 1:
        f = torch.nn.parallel.DistributedDataParallel(m, device_ids=[local] if cuda else None)
        if grad == "bf16":
            from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
            f.register_comm_hook(None, default_hooks.bf16_compress_hook)
    if zero:
        from torch.distributed.optim import ZeroRedundancyOptimizer
        opt = ZeroRedundancyOptimizer(m.parameters(), optimizer_class=torch.optim.AdamW, lr=3e-4, weight_decay=0.01)
    else:
        opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.01)
    g = torch.Generator(device=dev).manual_seed(1000 + rank)
    data = torch.randint(0, 256, (B, T + 1), device=dev, generator=g)
    def step(comm):
        with torch.autocast(dev.type, dtype=torch.bfloat16, enabled=amp):
            loss = F.cross_entropy(f(data[:, :-1]).reshape(-1, 256), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True); loss.backward()
        (opt.step if comm or not zero else opt.optim.step)()
        return loss
    def timed(comm):
        sync = torch.cuda.synchronize if cuda else (lambda: None)
        sync(); t0 = time.perf_counter()
        for _ in range(steps): loss = step(comm)
        sync(); return (time.perf_counter() - t0) / steps, loss
    for _ in range(warmup): step(True)
    dt, loss = timed(True)
    v = torch.tensor([torch.cuda.max_memory_allocated(dev) if cuda else -1, state_bytes(opt)], dtype=torch.float64,
                     device=dev)
    if world > 1: dist.all_reduce(v, op=dist.ReduceOp.MAX)
    local_dt = dt
    if world > 1:
        with f.no_sync(): local_dt, _ = timed(False)
    if rank == 0:
        print(f"ddp-result wl=W{wl} zero={int(zero)} grad={grad} world={world} ms={dt * 1e3:.3f} "
              f"tps={B * T * world / dt:.0f} peak_mib={v[0].item() / 2**20 if v[0] >= 0 else -1:.1f} "
              f"opt_mib={v[1].item() / 2**20:.1f} comm={1 - local_dt / dt if world > 1 else 0:.3f} "
              f"loss={loss.item():.4f}", flush=True)

def main():
    world, rank, local = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    cuda = arg("--device", "cuda") == "cuda"
    dev = torch.device("cuda", local) if cuda else torch.device("cpu")
    if cuda: torch.cuda.set_device(dev)
    quick = "--quick" in sys.argv
    amp = arg("--amp", "fp32") == "bf16"
    steps, warmup = int(arg("--steps", 20)), int(arg("--warmup", 3))
    wls = [int(w.upper().lstrip("W")) for w in arg("--only", "W3").split(",")]
    zeros = [z == "1" for z in arg("--zero", "0").split(",")]
    grads = arg("--ddp-grad-dtype", "fp32").split(",")
    if world > 1:
        if cuda:
            try: dist.init_process_group("nccl", device_id=dev)
            except TypeError: dist.init_process_group("nccl")  # torch < 2.3
        else:
            dist.init_process_group("gloo")
    for wl in wls:
        if wl == 5 and not cuda and not quick: continue  # hours per step, as Trident's
        for zero in zeros if world > 1 else [False]:
            for grad in grads if world > 1 else ["fp32"]:
                try:
                    run(wl, zero, grad, dev, world, rank, local, quick, amp, steps, warmup)
                except Exception as e:  # e.g. bf16 all-reduce on gloo
                    if rank == 0: print(f"torch_ddp: W{wl} zero={int(zero)} grad={grad}: {type(e).__name__}: {str(e)[:200]}",
                          file=sys.stderr, flush=True)
                    if world > 1: dist.barrier()
    if world > 1:
        dist.destroy_process_group()

if __name__ == "__main__":
    main()
