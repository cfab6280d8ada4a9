"""A hand-written pre-norm transformer encoder block (MultiheadAttention, LayerNorm, a GELU feed-forward,
dropout) tags each token of short padded sequences; padded keys are masked out of the attention."""
import torch
import torch.nn as nn

torch.manual_seed(4)

batch, length, d_model, heads, n_tags = 6, 5, 16, 4, 3


class EncoderBlock(nn.Module):
    def __init__(self, d_model, heads, hidden=32, p=0.1):
        super().__init__()
        self.norm1 = nn.LayerNorm(d_model)
        self.attn = nn.MultiheadAttention(d_model, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(d_model)
        self.ff = nn.Sequential(nn.Linear(d_model, hidden), nn.GELU(), nn.Linear(hidden, d_model))
        self.drop = nn.Dropout(p)

    def forward(self, x, pad_mask):
        h = self.norm1(x)
        attended, weights = self.attn(h, h, h, key_padding_mask=pad_mask)
        x = x + self.drop(attended)
        x = x + self.drop(self.ff(self.norm2(x)))
        return x, weights


class Tagger(nn.Module):
    def __init__(self, vocab=10):
        super().__init__()
        self.embed = nn.Embedding(vocab, d_model, padding_idx=0)
        self.position = nn.Parameter(torch.zeros(1, length, d_model))
        self.block = EncoderBlock(d_model, heads)
        self.out = nn.Linear(d_model, n_tags)

    def forward(self, tokens):
        pad_mask = tokens == 0
        x, weights = self.block(self.embed(tokens) + self.position, pad_mask)
        return self.out(x), weights


tokens = torch.randint(1, 10, (batch, length))
tokens[0, 3:] = 0
tokens[1, 4:] = 0
tags = tokens % n_tags
model = Tagger()
optimizer = torch.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.01)
criterion = nn.CrossEntropyLoss(ignore_index=-100)
targets = tags.masked_fill(tokens == 0, -100)  # no loss on padding

for step in range(10):
    model.train()
    logits, weights = model(tokens)
    loss = criterion(logits.reshape(-1, n_tags), targets.reshape(-1))
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    if step % 3 == 0:
        print(f"step {step}: loss {loss.item():.5f}")

model.eval()
with torch.no_grad():
    logits, weights = model(tokens)
print("attention weights", tuple(weights.shape), "row sums", round(weights.sum(-1).mean().item(), 5))
print("weight on padded keys", weights[0, :, 3:].abs().max().item())
real = targets != -100
print("accuracy", round((logits.argmax(-1)[real] == targets[real]).float().mean().item(), 4))
print("padding row of the embedding", model.embed.weight[0].abs().sum().item())
