"""A word-level LSTM language model, one epoch of training steps, written as a plain PyTorch script (run it with
`gradviz run --torch`): a DataLoader over (context, next-word) windows of a small corpus, an Embedding, a
two-layer LSTM (batch_first) and a Linear decoder, cross-entropy over the vocabulary,
`clip_grad_norm_` before each step and a StepLR scheduler after each epoch. Each batch starts from a fresh
zero state, so no graph outlives its step.

`gradviz run --torch` reports nothing (clean); the losses match PyTorch's (tests/test_torch_scripts.py).
"""

import math

import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)

corpus = ("the cat sat on the mat . the dog sat on the log . "
          "a cat saw a dog . the dog saw the cat on the mat .").split()
vocab = sorted(set(corpus))
index = {word: i for i, word in enumerate(vocab)}
tokens = torch.tensor([index[w] for w in corpus])


class Windows(Dataset):
    """Every run of `size` words, and the same run shifted by one word (the words to predict)."""

    def __init__(self, tokens, size):
        self.tokens, self.size = tokens, size

    def __len__(self):
        return len(self.tokens) - self.size

    def __getitem__(self, i):
        return self.tokens[i:i + self.size], self.tokens[i + 1:i + 1 + self.size]


class WordLM(nn.Module):
    def __init__(self, n_words, dim=16, hidden=32):
        super().__init__()
        self.embed = nn.Embedding(n_words, dim)
        self.drop = nn.Dropout(0.1)
        self.lstm = nn.LSTM(dim, hidden, num_layers=2, batch_first=True)
        self.decode = nn.Linear(hidden, n_words)

    def forward(self, words):
        out, _ = self.lstm(self.drop(self.embed(words)))
        return self.decode(out)


loader = DataLoader(Windows(tokens, size=6), batch_size=8, shuffle=True, drop_last=True)
model = WordLM(len(vocab))
optimizer = torch.optim.Adam(model.parameters(), lr=0.03)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
criterion = nn.CrossEntropyLoss()

for epoch in range(5):
    model.train()
    total, batches = 0.0, 0
    for context, target in loader:
        logits = model(context)  # (batch, time, vocab)
        loss = criterion(logits.reshape(-1, len(vocab)), target.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        total, batches = total + loss.item(), batches + 1
    scheduler.step()
    print(f"epoch {epoch}: loss {total / batches:.4f} perplexity {math.exp(total / batches):.2f} "
          f"lr {scheduler.get_last_lr()[0]:.4f}")

model.eval()
with torch.no_grad():
    prompt = torch.tensor([[index["the"], index["dog"]]])
    next_word = model(prompt)[0, -1].argmax().item()
print("after 'the dog':", vocab[next_word])
