"""An autoencoder squeezes 16-bit binary patterns through a 3-unit bottleneck; the decoder outputs logits and
the loss is BCEWithLogitsLoss, so no sigmoid is applied before the loss."""
import torch
import torch.nn as nn

torch.manual_seed(6)

# eight prototypes, each seen with a few bits flipped
prototypes = (torch.rand(8, 16) > 0.5).float()
choice = torch.randint(0, 8, (96,))
flips = (torch.rand(96, 16) < 0.05).float()
data = (prototypes[choice] + flips) % 2


class AutoEncoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(16, 8), nn.Tanh(), nn.Linear(8, 3))
        self.decoder = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 16))

    def forward(self, x):
        return self.decoder(self.encoder(x))


model = AutoEncoder()
optimizer = torch.optim.Adam(model.parameters(), lr=0.02)
criterion = nn.BCEWithLogitsLoss()

for epoch in range(30):
    for batch in data.split(32):
        optimizer.zero_grad()
        loss = criterion(model(batch), batch)
        loss.backward()
        optimizer.step()
    if epoch % 10 == 9:
        print(f"epoch {epoch + 1}: loss {loss.item():.5f}")

with torch.no_grad():
    codes = model.encoder(data)
    reconstructed = torch.sigmoid(model(data)) > 0.5
bit_accuracy = (reconstructed.float() == data).float().mean().item()
print(f"bit accuracy {bit_accuracy:.4f}")
print("code range", round(codes.min().item(), 4), round(codes.max().item(), 4))
print("functional loss matches", torch.allclose(
    nn.functional.binary_cross_entropy_with_logits(model(data), data),
    nn.functional.binary_cross_entropy(torch.sigmoid(model(data)), data), atol=1e-5))
