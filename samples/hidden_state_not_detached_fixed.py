"""The fixed twin of `hidden_state_not_detached.py`: `hidden = tuple(h.detach() for h in hidden)` before each
batch's forward (the example's `repackage_hidden`), so each backward stops at the batch boundary. Same data, same
steps.

`gradviz run` reports nothing (clean).
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)
text = "the quick brown fox jumps over the lazy dog. " * 60
vocab = sorted(set(text))
data = torch.tensor([vocab.index(ch) for ch in text])
batch, bptt = 4, 10
columns = data[: len(data) // batch * batch].view(batch, -1).t()  # (time, batch), as in the example's batchify


class CharModel(nn.Module):
    def __init__(self, tokens, width=48):
        super().__init__()
        self.embed = nn.Embedding(tokens, width)
        self.lstm = nn.LSTM(width, width)
        self.out = nn.Linear(width, tokens)

    def forward(self, x, hidden):
        output, hidden = self.lstm(self.embed(x), hidden)
        return self.out(output), hidden


model = CharModel(len(vocab))
optimizer = torch.optim.Adam(model.parameters(), lr=5e-3)
hidden = (torch.zeros(1, batch, 48), torch.zeros(1, batch, 48))
for i in range(0, 60 * bptt, bptt):
    x, y = columns[i:i + bptt], columns[i + 1:i + 1 + bptt]
    optimizer.zero_grad()
    hidden = tuple(h.detach() for h in hidden)  # a new graph from here: backward stops at this batch
    logits, hidden = model(x, hidden)
    loss = F.cross_entropy(logits.reshape(-1, len(vocab)), y.reshape(-1))
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.2f}")
