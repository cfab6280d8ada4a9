"""A classifier trained from a Dataset that normalizes each sample in `__getitem__` with in-place ops on
`self.features[i]`, a view of the cached tensor: `x.sub_(self.mean).div_(self.std)` writes the normalized values
back into the cache, so the next epoch normalizes them again, and again: after the first epoch the training data
drift further from what the test data look like every epoch. Test accuracy 0.66, against 0.95 for the fixed twin
(`dataset_mutated_inplace_fixed.py`, which normalizes out of place). Nothing raises.

`gradviz run` on real PyTorch reports `dataset-mutated-inplace` (warning) at the `x.sub_(...)` line, with the line
that bound the cached tensor and the one that took the view as related. gradviz's own engine (`--torch`) does
not watch for this yet and reports nothing.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)


class Points(Dataset):
    def __init__(self, features, labels):
        self.features = features  # cached once: raw features, normalized per item
        self.labels = labels
        self.mean, self.std = features.mean(0), features.std(0)

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, i):
        x = self.features[i]
        x.sub_(self.mean).div_(self.std)  # normalizes the cache itself: every epoch again
        return x, self.labels[i]


raw = torch.randn(600, 8) * 3 + 5
labels = (raw[:, :4].sum(1) > 20).long()
train = DataLoader(Points(raw[:480], labels[:480]), batch_size=48, shuffle=True)
mean, std = raw[:480].mean(0), raw[:480].std(0)
test_x, test_y = (raw[480:] - mean) / std, labels[480:]

model = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for epoch in range(6):
    for x, y in train:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()

with torch.no_grad():
    accuracy = (model(test_x).argmax(1) == test_y).float().mean().item()
print(f"test accuracy {accuracy:.2f}")
