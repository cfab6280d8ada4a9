"""A character-level LSTM language model trained with truncated backpropagation through time, as in
pytorch/examples' word_language_model but without its `repackage_hidden`: the hidden state `(h, c)` returned by
one batch is passed to the next still attached to that batch's graph. The second `loss.backward()` goes back
into the first batch's graph, already freed, and PyTorch raises "Trying to backward through the graph a second
time ... Specify retain_graph=True": the script stops at batch 2 of 60. Following that advice
(`retain_graph=True`) only moves the error: the optimizer's in-place update changes weights the old graphs
saved, and the same second backward raises a version error instead. The fixed twin
`hidden_state_not_detached_fixed.py` detaches the pair at each batch and trains all 60 batches (final loss 0.31,
from 3.31 at the first batch).

`gradviz run` reports `hidden-state-not-detached` (warning) at the `model(x, hidden)` line with the hint
`hidden = tuple(h.detach() for h in hidden)`, and the `graph-freed` error at the `loss.backward()` line with the
same fix instead of retain_graph.
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
    logits, hidden = model(x, hidden)
    loss = F.cross_entropy(logits.reshape(-1, len(vocab)), y.reshape(-1))
    loss.backward()
    optimizer.step()
print(f"final loss {loss.item():.2f}")
