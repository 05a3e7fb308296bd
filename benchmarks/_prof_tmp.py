import torch, tileprim as tp
from torch.profiler import profile, ProfilerActivity
x = torch.randn(4, 8, device="cuda")
for _ in range(20): tp.sum(x, axes=-1); x.sum(-1)
torch.cuda.synchronize()
with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
    for _ in range(100):
        tp.sum(x, axes=-1); x.sum(-1)
    torch.cuda.synchronize()
print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=8))
