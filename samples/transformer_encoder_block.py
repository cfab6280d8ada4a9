"""A small transformer encoder learns to sort short digit sequences, written as a plain PyTorch script (run it
with `gradviz run --torch`): token and learned position embeddings, two `nn.TransformerEncoderLayer` blocks
(multi-head self-attention, LayerNorm, a GELU feed-forward; batch_first, pre-norm) stacked by
`nn.TransformerEncoder`, a Linear head per position, AdamW and a OneCycleLR schedule.

`gradviz run --torch` reports nothing (clean); the losses match PyTorch's (tests/test_torch_scripts.py).
"""

import torch
import torch.nn as nn

torch.manual_seed(0)

digits, length, d_model = 6, 5, 24


class Sorter(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(digits, d_model)
        self.position = nn.Parameter(torch.randn(1, length, d_model) * 0.02)
        layer = nn.TransformerEncoderLayer(d_model, nhead=4, dim_feedforward=48, dropout=0.0,
                                           activation="gelu", batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
        self.norm = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, digits)

    def forward(self, x):
        h = self.encoder(self.embed(x) + self.position)
        return self.head(self.norm(h))


model = Sorter()
steps = 60
optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=steps)
criterion = nn.CrossEntropyLoss()

for step in range(steps):
    x = torch.randint(0, digits, (32, length))
    target, _ = x.sort(dim=1)
    logits = model(x)
    loss = criterion(logits.reshape(-1, digits), target.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    scheduler.step()
    if step % 20 == 19:
        print(f"step {step + 1}: loss {loss.item():.4f} lr {scheduler.get_last_lr()[0]:.5f}")

model.eval()
with torch.no_grad():
    x = torch.randint(0, digits, (64, length))
    predicted = model(x).argmax(-1)
    target, _ = x.sort(dim=1)
print(f"positions right: {(predicted == target).float().mean().item():.3f}")
print("example:", x[0].tolist(), "->", predicted[0].tolist())
