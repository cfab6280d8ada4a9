"""A character-level LSTM language model trained with truncated backpropagation through time: the hidden state
is carried across chunks but detached from the previous chunk's graph, gradients are clipped by norm and the
learning rate decays with StepLR."""
import math

import torch
import torch.nn as nn

torch.manual_seed(2)

text = "the quick brown fox jumps over the lazy dog. " * 6
vocab = sorted(set(text))
stoi = {ch: i for i, ch in enumerate(vocab)}
ids = torch.tensor([stoi[ch] for ch in text], dtype=torch.long)

# lay the stream out as `batch` parallel columns: (steps, batch)
batch = 4
steps = ids.size(0) // batch
columns = ids[: steps * batch].view(batch, steps).t().contiguous()
print("vocab", len(vocab), "columns", tuple(columns.shape))


class CharLM(nn.Module):
    def __init__(self, n_tokens, emb=12, hidden=24, layers=2):
        super().__init__()
        self.embed = nn.Embedding(n_tokens, emb)
        self.rnn = nn.LSTM(emb, hidden, num_layers=layers)
        self.out = nn.Linear(hidden, n_tokens)

    def forward(self, x, state):
        h, state = self.rnn(self.embed(x), state)
        return self.out(h), state

    def init_state(self, batch_size):
        shape = (self.rnn.num_layers, batch_size, self.rnn.hidden_size)
        return torch.zeros(shape), torch.zeros(shape)


model = CharLM(len(vocab))
optimizer = torch.optim.SGD(model.parameters(), lr=2.0)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
criterion = nn.CrossEntropyLoss()
bptt = 10

for epoch in range(3):
    state = model.init_state(batch)
    total, count = 0.0, 0
    for start in range(0, columns.size(0) - 1, bptt):
        seq_len = min(bptt, columns.size(0) - 1 - start)
        inputs = columns[start:start + seq_len]
        targets = columns[start + 1:start + 1 + seq_len]
        state = tuple(s.detach() for s in state)  # keep the values, drop the old graph
        logits, state = model(inputs, state)
        loss = criterion(logits.view(-1, len(vocab)), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        norm = nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5)
        optimizer.step()
        total += loss.item() * seq_len
        count += seq_len
    scheduler.step()
    print(f"epoch {epoch}: loss {total / count:.4f} ppl {math.exp(total / count):.3f} "
          f"last grad norm {norm.item():.4f} next lr {scheduler.get_last_lr()[0]:.3f}")

with torch.no_grad():
    state = model.init_state(1)
    token = torch.tensor([[stoi["t"]]])
    generated = []
    for _ in range(12):
        logits, state = model(token, state)
        token = logits.argmax(dim=-1)
        generated.append(vocab[token.item()])
print("greedy:", repr("t" + "".join(generated)))
