import torch
a=torch.randn(4096,4096,dtype=torch.float16,device='cuda'); b=torch.randn(8192,4096,dtype=torch.float16,device='cuda')
for _ in range(3): c=a@b.t()
torch.cuda.synchronize()
