"""A one-dimensional GAN whose discriminator loss reads the generator's output `fake` without `detach()`. The
first run raised "Trying to backward through the graph a second time", so `retain_graph=True` was added to the
discriminator's backward: the error is gone, and the generator, whose gradients were cleared at the top of the
step, is now stepped on the sum of its own loss's gradient and the discriminator's, which pushes its samples to
look fake. Nothing raises; the generator learns a narrow spike: after 300 steps its samples have a standard
deviation of 0.31, 0.29 and 0.28 (seeds 0, 1, 2) against the target's 1.25, where the fixed twin
`gan_fake_not_detached_fixed.py` reaches 1.03, 0.96 and 0.93, still widening (the means are within 0.23 of
4.00 here, 0.55 in the twin).

`gradviz run` reports `gan-fake-not-detached` (warning) at the line where `discriminator(fake)` enters the
discriminator's loss, with both steps as related lines, and the hint `discriminator(fake.detach())`.
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
              + F.binary_cross_entropy_with_logits(discriminator(fake), zeros))
    d_loss.backward(retain_graph=True)
    opt_d.step()
    g_loss = F.binary_cross_entropy_with_logits(discriminator(fake), ones)
    g_loss.backward()
    opt_g.step()

with torch.no_grad():
    samples = generator(torch.randn(4096, 4))
print(f"generated mean {samples.mean().item():.2f} std {samples.std().item():.2f} (target 4.00, 1.25)")
