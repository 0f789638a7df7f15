"""PyTorch DDP twin of `trident bench --ddp`: W3 (GPT-mini, bench/torch_workloads.py's GPT)
trained on a fixed random batch per process, timed after 3 warm-up steps.
Run by `python -m torch.distributed.run --nproc_per_node N torch_ddp.py --steps S [--quick]`;
rank 0 prints one JSON line with ms_per_step and tokens_per_s over all processes.
With one process the model is not wrapped (the baseline, as Trident's)."""
import json, os, sys, time
import torch
import torch.nn.functional as F
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_workloads import GPT

def main():
    steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 20
    quick = "--quick" in sys.argv
    world, rank, local = int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("RANK", 0)), int(os.environ.get("LOCAL_RANK", 0))
    dev = torch.device("cuda", local)
    torch.cuda.set_device(dev)
    cfg = dict(d=32, h=2, L=1, T=32) if quick else {}
    B, T = (4, 32) if quick else (64, 256)
    if world > 1:
        torch.distributed.init_process_group("nccl", device_id=dev)
    torch.manual_seed(0)
    m = GPT(**cfg).to(dev)
    f = torch.nn.parallel.DistributedDataParallel(m, device_ids=[local]) if world > 1 else m
    opt = torch.optim.AdamW(m.parameters(), lr=3e-4, weight_decay=0.01)
    g = torch.Generator(device=dev).manual_seed(1000 + rank)
    data = torch.randint(0, 256, (B, T + 1), device=dev, generator=g)
    def step():
        loss = F.cross_entropy(f(data[:, :-1]).reshape(-1, 256), data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True); loss.backward(); opt.step()
    for _ in range(3): step()
    torch.cuda.synchronize(); t0 = time.perf_counter()
    for _ in range(steps): step()
    torch.cuda.synchronize(); dt = (time.perf_counter() - t0) / steps
    if rank == 0:
        print(json.dumps(dict(workload="W3-ddp", world=world, ms_per_step=round(dt * 1e3, 3),
                              tokens_per_s=round(B * T * world / dt))), flush=True)
    if world > 1:
        torch.distributed.destroy_process_group()

if __name__ == "__main__":
    main()
