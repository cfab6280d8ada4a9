"""A GRU (batch_first) classifies variable-length sequences padded to one length: a padding mask picks each
sequence's last real step and averages its real steps only, without packing."""
import torch
import torch.nn as nn

torch.manual_seed(3)

n, max_len, features = 32, 7, 3
lengths = torch.randint(2, max_len + 1, (n,))
steps = torch.arange(max_len)
mask = steps.unsqueeze(0) < lengths.unsqueeze(1)  # (n, max_len), True on real steps
sequences = torch.randn(n, max_len, features) * mask.unsqueeze(-1)  # padding is exactly zero
# label: is the sum of the first feature over the real steps positive?
labels = (sequences[:, :, 0].sum(dim=1) > 0).float()
print("mean length", lengths.float().mean().item(), "positives", int(labels.sum().item()))


class SequenceClassifier(nn.Module):
    def __init__(self, hidden=16):
        super().__init__()
        self.gru = nn.GRU(features, hidden, batch_first=True)
        self.head = nn.Linear(2 * hidden, 1)

    def forward(self, x, lengths, mask):
        outputs, _ = self.gru(x)  # (batch, time, hidden)
        last_index = (lengths - 1).view(-1, 1, 1).expand(-1, 1, outputs.size(2))
        last = outputs.gather(1, last_index).squeeze(1)
        weights = mask.unsqueeze(-1).float()
        mean = (outputs * weights).sum(dim=1) / weights.sum(dim=1)
        return self.head(torch.cat([last, mean], dim=1)).squeeze(-1)


model = SequenceClassifier()
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
criterion = nn.BCEWithLogitsLoss()

for epoch in range(15):
    optimizer.zero_grad()
    logits = model(sequences, lengths, mask)
    loss = criterion(logits, labels)
    loss.backward()
    optimizer.step()
    if epoch % 5 == 4:
        accuracy = ((logits > 0).float() == labels).float().mean()
        print(f"epoch {epoch + 1}: loss {loss.item():.5f} accuracy {accuracy.item():.4f}")

print("hidden weights:", tuple(model.gru.weight_hh_l0.shape), "grad norm",
      round(model.gru.weight_hh_l0.grad.norm().item(), 4))
