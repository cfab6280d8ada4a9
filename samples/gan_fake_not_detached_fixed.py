"""The fixed twin of `gan_fake_not_detached.py`: the discriminator's loss reads `fake.detach()`, and its
backward needs no `retain_graph=True`. Same data, same steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
generator = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 1))
discriminator = nn.Sequential(nn.Linear(1, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
opt_g = torch.optim.Adam(generator.parameters(), lr=2e-3, betas=(0.5, 0.999))
opt_d = torch.optim.Adam(discriminator.parameters(), lr=2e-3, betas=(0.5, 0.999))
ones, zeros = torch.ones(128, 1), torch.zeros(128, 1)

for step in range(300):
    real = 4.0 + 1.25 * torch.randn(128, 1)
    opt_d.zero_grad()
    opt_g.zero_grad()
    fake = generator(torch.randn(128, 4))
    d_loss = (F.binary_cross_entropy_with_logits(discriminator(real), ones)
              + F.binary_cross_entropy_with_logits(discriminator(fake.detach()), zeros))
    d_loss.backward()
    opt_d.step()
    g_loss = F.binary_cross_entropy_with_logits(discriminator(fake), ones)
    g_loss.backward()
    opt_g.step()

with torch.no_grad():
    samples = generator(torch.randn(4096, 4))
print(f"generated mean {samples.mean().item():.2f} std {samples.std().item():.2f} (target 4.00, 1.25)")
